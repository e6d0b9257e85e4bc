"""The RL demo's training recipe: PPO with generalised state-dependent exploration on the reach task.

What a policy is trained with (``robotid-sim rl-demo`` and ``rl-demo --compare``; why each choice, with the
measurements behind it, in ``docs/envs.md``):

- **Algorithm.** Stable-Baselines3's PPO (an optional extra: ``pip install 'robotid-sim[rl]'``) with gSDE
  (``use_sde``, the exploration noise a function of the state, resampled every :data:`SDE_SAMPLE_FREQ`
  steps): smooth exploration of torques, which the arm's light distal links need (white noise on their
  torque shakes them and the policy learns nothing precise).
- **Episodes** of :data:`EPISODE_STEPS` control steps (3 s): time to move and to settle.
- **Observations** as the policy sees them (:func:`policy_features`): ``sin q, cos q`` (revolute joints;
  ``q`` and 0 for prismatic ones), ``qd``, the error ``q* − q`` and ``qd* − qd``, normalised by
  Stable-Baselines3's ``VecNormalize`` (running mean and variance, frozen for evaluation).
- **Reward**: the env's own (:mod:`robotid_sim.envs.spec`), which pays for precision.
- **Hyperparameters**: the constants below.

The policy is not saved (Stable-Baselines3 saves with pickle, which a run folder never holds).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robotid_sim.progress import Progress

#: control steps per training and evaluation episode (3 s at the 10 ms control step)
EPISODE_STEPS = 300
#: env copies stepped together while training
NUM_ENVS = 64
#: PPO's rollout length per copy, minibatch size, epochs per rollout
PPO_STEPS_PER_ROLLOUT = 128
BATCH_SIZE = 2048
EPOCHS = 10
#: discount: a horizon of about 20 steps (0.2 s); the reward is dense, so a short horizon learns faster
GAMMA = 0.95
#: Adam's step size
LEARNING_RATE = 3e-4
#: hidden layers of the policy and the value network
NET_ARCH = (128, 128)
#: gSDE: the log standard deviation at the start and the steps between noise resamples
LOG_STD_INIT = -2.0
SDE_SAMPLE_FREQ = 4
#: measurement noise of the data the training models are identified from (the demo's and the comparison's)
NOISE = {"q": {"snr_db": 70}, "qd": {"snr_db": 50}, "qdd": {"snr_db": 30}, "tau": {"std": 0.05}}
#: the demo's identification data: 50 s (five periods) of a 5-harmonic Fourier excitation. planar3r's default
#: excitation (55 s of sequential one-frequency sines) confounds Coulomb and viscous friction (lmi_wls found
#: 0.15/1.57 N·m for the true 1.2/0.8 on joint 1), and a policy trained on that much viscous damping went
#: unstable on the truth in 22 % of episodes; from this excitation lmi_wls finds 1.17/0.83 (docs/benchmarks.md)
DEMO_EXCITATION = {"type": "fourier", "harmonics": 5, "base_frequency": 0.1}
DEMO_SECONDS = 50.0
#: final joint error (rad; m for a prismatic joint) under which an episode counts as a success
SUCCESS_ERROR = 0.05


def policy_features(obs: np.ndarray, prismatic: np.ndarray) -> np.ndarray:
    """The policy's input (B, 5n) float32 from env observations ``[q, qd, q*, qd*]`` (B, 4n) or (4n,).

    ``sin q, cos q`` for revolute joints (``q`` and 0 for the ``prismatic`` mask's joints), ``qd``, ``q* − q``,
    ``qd* − qd``: the gravity torque is a trigonometric function of ``q``, and the control law one of the error,
    which an MLP would otherwise have to learn as the difference of two inputs."""
    o = np.atleast_2d(np.asarray(obs, dtype=float))
    n = len(prismatic)
    q, qd, q_target, qd_target = (o[:, k * n : (k + 1) * n] for k in range(4))
    sin = np.where(prismatic, q, np.sin(q))
    cos = np.where(prismatic, 0.0, np.cos(q))
    return np.concatenate([sin, cos, qd, q_target - q, qd_target - qd], axis=-1).astype(np.float32)


@dataclass
class TrainedPolicy:
    """A trained agent with the observation pipeline it was trained with.

    Attributes:
        agent: the Stable-Baselines3 PPO agent.
        normalizer: its ``VecNormalize`` (frozen).
        prismatic: (n,) bool, the joints whose features are not trigonometric.
        train_seconds: wall time of the training.
        timesteps: env steps trained.
    """

    agent: object
    normalizer: object
    prismatic: np.ndarray
    train_seconds: float
    timesteps: int

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The deterministic action (n,) for one env observation (4n,)."""
        x = self.normalizer.normalize_obs(policy_features(obs, self.prismatic))
        action, _ = self.agent.predict(x, deterministic=True)
        return np.asarray(action, dtype=np.float32).reshape(-1)


def feature_wrapper(venv, prismatic: np.ndarray):
    """``venv`` (an SB3 ``VecEnv`` of arm envs) seen through :func:`policy_features` (terminal observations too)."""
    from gymnasium import spaces
    from stable_baselines3.common.vec_env import VecEnvWrapper

    n = len(prismatic)

    class PolicyFeatures(VecEnvWrapper):
        def __init__(self, inner):
            super().__init__(inner, observation_space=spaces.Box(-np.inf, np.inf, (5 * n,), np.float32))

        def reset(self):
            return policy_features(self.venv.reset(), prismatic)

        def step_wait(self):
            obs, rewards, dones, infos = self.venv.step_wait()
            for info in infos:
                if "terminal_observation" in info:
                    info["terminal_observation"] = policy_features(info["terminal_observation"], prismatic)[0]
            return policy_features(obs, prismatic), rewards, dones, infos

    return PolicyFeatures(venv)


@contextlib.contextmanager
def one_torch_thread():
    """Torch on one thread inside: as fast for these small MLPs, and far faster than several under robotid-sim's
    passive OpenMP waiting (:mod:`robotid_sim.threads`), which wakes torch's workers for every small op (a single
    ``predict`` took 16 ms on 2 busy cores, 0.2 ms on one thread)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_policy(
    venv, prismatic: np.ndarray, timesteps: int, seed: int, progress: Progress | None = None, what: str = "train"
) -> TrainedPolicy:
    """Train PPO (the module's recipe) on ``venv``, an SB3 ``VecEnv`` of arm envs (closed afterwards).

    ``progress(what, steps_done, timesteps)`` as the training goes (:mod:`robotid_sim.progress`).
    """
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

    report = progress or (lambda *_: None)
    normalizer = VecNormalize(feature_wrapper(VecMonitor(venv), prismatic), gamma=GAMMA)
    agent = PPO(
        "MlpPolicy",
        normalizer,
        n_steps=PPO_STEPS_PER_ROLLOUT,
        batch_size=BATCH_SIZE,
        n_epochs=EPOCHS,
        gamma=GAMMA,
        learning_rate=LEARNING_RATE,
        use_sde=True,
        sde_sample_freq=SDE_SAMPLE_FREQ,
        policy_kwargs={"net_arch": list(NET_ARCH), "log_std_init": LOG_STD_INIT},
        seed=seed,
        device="cpu",
        verbose=0,
    )

    class Report(BaseCallback):
        def _on_rollout_end(self) -> None:
            report(what, min(self.num_timesteps, timesteps), timesteps)

        def _on_step(self) -> bool:
            return True

    start = time.perf_counter()
    try:
        with one_torch_thread():
            agent.learn(timesteps, callback=Report())
    finally:
        normalizer.close()
    seconds = time.perf_counter() - start
    normalizer.training = False
    report(what, timesteps, timesteps)
    return TrainedPolicy(agent, normalizer, np.asarray(prismatic, bool), seconds, timesteps)


def reach_options(torque_limit) -> dict:
    """The keywords of the recipe's reach env (either env id): task, torque limit and episode length."""
    return {"task": "reach", "torque_limit": torque_limit, "max_episode_steps": EPISODE_STEPS}


def train_on_model(
    arm,
    model,
    env_options: dict,
    parameter_draws: str | None,
    timesteps: int,
    num_envs: int,
    seed: int,
    progress: Progress | None = None,
) -> TrainedPolicy:
    """Train the recipe's PPO (:func:`train_policy`) on ``num_envs`` copies of ``model``'s ``IdentifiedArm-v0``
    (one vector env), ``env_options`` being its other keywords (:func:`reach_options`, and ``robot`` where the
    model needs it)."""
    import gymnasium

    from robotid_sim.envs import IDENTIFIED_ARM_ID, register_envs, to_sb3

    register_envs()
    venv = gymnasium.make_vec(
        IDENTIFIED_ARM_ID,
        num_envs=num_envs,
        model=model,
        parameter_draws=parameter_draws,
        **env_options,
        vectorization_mode="vector_entry_point",
        autoreset_mode="SameStep",
    )
    prismatic = np.array(arm.joint_kinds) == "prismatic"
    return train_policy(to_sb3(venv), prismatic, timesteps, seed, progress)


@dataclass
class Evaluation:
    """Deterministic episodes of a policy on one env.

    Attributes:
        returns: (episodes,) the sum of rewards per episode.
        final_errors: (episodes,) ‖q − q*‖ at the end of each episode.
        first_curve: ‖q − q*‖ at each step of the first episode.
    """

    returns: np.ndarray
    final_errors: np.ndarray
    first_curve: np.ndarray

    @property
    def success_rate(self) -> float:
        """The fraction of episodes ending within :data:`SUCCESS_ERROR`."""
        return float(np.mean(self.final_errors <= SUCCESS_ERROR))

    def summary(self) -> dict[str, float]:
        """Success rate, median and 90th percentile of the final error, mean return."""
        return {
            "success_rate": self.success_rate,
            "median_final_error": float(np.median(self.final_errors)),
            "p90_final_error": float(np.percentile(self.final_errors, 90)),
            "mean_return": float(np.mean(self.returns)),
        }


def evaluate_policy(policy: TrainedPolicy, make_env: Callable, episodes: int, seed: int) -> Evaluation:
    """``episodes`` deterministic episodes of ``make_env()``, reset with seeds ``seed, seed + 1, ...`` (so every
    env and policy meets the same starts and targets)."""
    returns, errors, curve = [], [], []
    env = make_env()
    try:
        with one_torch_thread():
            for k in range(episodes):
                obs, _ = env.reset(seed=seed + k)
                total, done, info = 0.0, False, {}
                while not done:
                    obs, reward, terminated, truncated, info = env.step(policy.act(obs))
                    total += float(reward)
                    done = terminated or truncated
                    if k == 0:
                        curve.append(float(info["joint_error"]))
                returns.append(total)
                errors.append(float(info["joint_error"]))
    finally:
        env.close()
    return Evaluation(np.asarray(returns), np.asarray(errors), np.asarray(curve))

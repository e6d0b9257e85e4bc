"""Sim-to-sim demo (``robotid-sim rl-demo``): train a policy on an identified model, evaluate it on the truth.

1. Simulate the robot's default excitation in PyBullet with measurement noise and identify a model
   (``ols`` by default) from it: the only thing the policy will ever train on.
2. Train Stable-Baselines3's PPO (an optional extra: ``pip install 'robotid-sim[rl]'``) on
   ``robotid_sim/IdentifiedArm-v0`` (task ``reach``), the vector entry point stepping all copies in
   one batched call, observations and rewards normalised by SB3's ``VecNormalize``.
3. Evaluate the deterministic policy on the same episodes (same seeds: same start and target) of the
   identified env and of ``robotid_sim/PyBulletArm-v0`` (the truth, friction on): return and final
   joint error ‖q − q*‖ per episode. Their ratio is the sim-to-sim gap.

The run folder holds the identified model (``models/``), ``metrics.json`` (per-episode returns and
final errors on both envs, training time, the options), ``plots/final_errors.png`` (final error per
episode, identified vs truth), ``plots/episode.png`` (joint error over the first episode on both) and
``report.md`` / ``report.html``. The policy itself is not saved (SB3 saves with pickle, which a run
folder never holds).

Torque limits: the actions are scaled by :func:`demo_torque_limit` (twice the largest gravity torque
of each joint over the workspace, at least a tenth of its URDF effort limit, at most that limit), not
by the URDF effort limits, which on light distal links give accelerations of hundreds of rad/s²
within one 10 ms control step.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.progress import Progress

#: gravity torques are sampled at this many random positions for :func:`demo_torque_limit`
GRAVITY_SAMPLES = 2000
#: PPO's rollout length per env copy (SB3's ``n_steps``): one rollout is ``n_steps × num_envs`` steps
PPO_STEPS_PER_ROLLOUT = 256
#: seconds of wall time per PPO environment step (measured 184 µs: 552 s for 3 M steps, 32 copies, 2 cores)
TRAINING_SECONDS_PER_STEP = 250e-6
#: seconds per evaluation step of both envs together (measured 3.2 ms identified + 5.3 ms PyBullet, loaded)
EVALUATION_SECONDS_PER_STEP = 10e-3
#: float64 values held per env copy, rollout step and joint (observations 4 n, actions n, six per-step scalars,
#: and the torch copies of a minibatch: twice that, rounded up)
ROLLOUT_VALUES_PER_STEP_AND_JOINT = 16


@dataclass
class DemoResult:
    """What :func:`run_rl_demo` measured.

    Attributes:
        robot: robot name.
        estimator: the estimator the training model was identified with.
        timesteps: PPO environment steps.
        train_seconds: wall time of the training.
        torque_limit: the action scale per joint.
        returns: ``{"identified": [...], "pybullet": [...]}`` per evaluation episode.
        final_errors: the same for ‖q − q*‖ at the end of each episode (rad, m for a prismatic joint).
    """

    robot: str
    estimator: str
    timesteps: int
    train_seconds: float
    torque_limit: list[float]
    returns: dict[str, list[float]] = field(default_factory=dict)
    final_errors: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per env: mean return, median and 90th percentile of the final joint error."""
        return {
            env: {
                "mean_return": float(np.mean(self.returns[env])),
                "median_final_error": float(np.median(self.final_errors[env])),
                "p90_final_error": float(np.percentile(self.final_errors[env], 90)),
            }
            for env in self.returns
        }

    @property
    def gap(self) -> float:
        """Median final error on the truth / on the identified env (1 means no sim-to-sim gap)."""
        s = self.summary()
        return s["pybullet"]["median_final_error"] / max(s["identified"]["median_final_error"], 1e-12)


def require_sb3() -> None:
    """Refuse with a :class:`ConfigError` saying how to install Stable-Baselines3 when it is missing."""
    try:
        import stable_baselines3  # noqa: F401 - only whether it imports
    except ImportError as exc:
        raise ConfigError(
            "the RL demo needs Stable-Baselines3, an optional extra: pip install 'robotid-sim[rl]' "
            "(or pip install stable-baselines3)"
        ) from exc


def demo_torque_limit(robot) -> list[float]:
    """Per joint: 2 × the largest gravity torque over random positions, within [0.1, 1] × the effort limit."""
    q, _, _ = robot.random_states(np.random.default_rng(0), GRAVITY_SAMPLES)
    gravity = np.abs(robot.inverse_dynamics(q, np.zeros_like(q), np.zeros_like(q))).max(axis=0)
    effort = np.array([j.effort_limit for j in robot.joints], dtype=float)
    low = np.where(np.isfinite(effort), 0.1 * effort, 0.0)
    return np.minimum(np.maximum(2.0 * gravity, low), effort).tolist()


def check_rl_demo(timesteps: int, num_envs: int, episodes: int, seed: int, allow_large: bool = False) -> None:
    """Refuse demo options out of range, or a demo above the memory or time limit
    (:func:`robotid_sim.sim.cost.limit_problems`), before anything is imported or simulated.

    The estimate: training ``max(timesteps, n_steps · num_envs) · 250 µs`` (PPO collects at least one rollout
    of :data:`PPO_STEPS_PER_ROLLOUT` steps per copy), evaluation ``episodes · 200 · 10 ms`` (a step of both envs),
    memory ``num_envs · n_steps · 16 · 8`` bytes per joint for the rollout buffer (3 joints assumed at least).

    Raises:
        ConfigError: naming each option by its argument and its ``rl-demo`` flag.
    """
    from robotid_sim.envs import DEFAULT_MAX_EPISODE_STEPS
    from robotid_sim.safety import memory_limit_bytes
    from robotid_sim.sim.cost import format_bytes, limit_problems
    from robotid_sim.sim.simulate import check_seed

    for value, name, flag in (
        (timesteps, "timesteps", "--timesteps"),
        (num_envs, "num_envs", "--envs"),
        (episodes, "episodes", "--episodes"),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ConfigError(f"{name} ({flag}) must be a whole number >= 1, got {value!r}")
    check_seed(seed, "seed (--seed)")
    steps = max(timesteps, PPO_STEPS_PER_ROLLOUT * num_envs)
    seconds = steps * TRAINING_SECONDS_PER_STEP + episodes * DEFAULT_MAX_EPISODE_STEPS * EVALUATION_SECONDS_PER_STEP
    memory = float(num_envs) * PPO_STEPS_PER_ROLLOUT * ROLLOUT_VALUES_PER_STEP_AND_JOINT * 8 * 3
    limit = memory_limit_bytes() * (2 if allow_large else 1)
    problems = limit_problems(memory, seconds, limit, allow_large, work="training and evaluation")
    if problems:
        raise ConfigError(
            f"this RL demo ({float(steps):.3g} PPO steps on {num_envs:,} env copies, {episodes:,} evaluation "
            f"episodes per env, rollout buffer {format_bytes(memory)}) would need {' and '.join(problems)}; lower "
            "timesteps (--timesteps), num_envs (--envs) or episodes (--episodes), or set allow_large=True "
            "(--allow-large) to run it anyway"
        )


def _evaluate(agent, normalize, make_env, episodes: int, seed: int) -> tuple[list[float], list[float], np.ndarray]:
    """Deterministic episodes: returns, final joint errors, and the joint-error curve of the first episode."""
    returns, errors, curve = [], [], []
    env = make_env()
    try:
        for k in range(episodes):
            obs, _ = env.reset(seed=seed + k)
            total, done, info = 0.0, False, {}
            while not done:
                action, _ = agent.predict(normalize(obs), deterministic=True)
                obs, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
                done = terminated or truncated
                if k == 0:
                    curve.append(float(info["joint_error"]))
            returns.append(total)
            errors.append(float(info["joint_error"]))
    finally:
        env.close()
    return returns, errors, np.asarray(curve)


def run_rl_demo(
    out_dir: str | Path | None = None,
    *,
    robot: str = "planar3r",
    estimator: str = "ols",
    timesteps: int = 3_000_000,
    num_envs: int = 32,
    episodes: int = 20,
    seed: int = 0,
    progress: Progress | None = None,
    allow_large: bool = False,
) -> Path:
    """Identify ``robot``, train PPO on its identified reach env, evaluate on the identified and the PyBullet
    env (module docstring); returns the new run folder (under ``out_dir``, default ``./runs``).

    ``allow_large``: run a demo estimated above the time limit or above half of this machine's RAM
    (:func:`check_rl_demo`).

    Raises:
        ConfigError: an option out of range or a demo above the limits (:func:`check_rl_demo`), an estimator
            whose model the envs cannot step, or Stable-Baselines3 not installed; all but the model's forward
            dynamics are checked before any work, and the sizes before Stable-Baselines3 is imported.
        PluginError: an unknown estimator.
    """
    from robotid_sim.plugins import get_estimator
    from robotid_sim.robot import load_robot
    from robotid_sim.run_folder import build_run_folder, output_root

    check_rl_demo(timesteps, num_envs, episodes, seed, allow_large)
    get_estimator(estimator).from_options()  # an unknown estimator is refused before Stable-Baselines3 is asked for
    require_sb3()
    arm = load_robot(robot)
    root = output_root(out_dir)
    report = progress or (lambda *_: None)

    def write(run_dir: Path) -> None:
        result, curves = _train_and_evaluate(arm, estimator, timesteps, num_envs, episodes, seed, run_dir, report)
        _write_outputs(run_dir, result, curves)

    return build_run_folder(root, f"rl_demo_{arm.name}", write)


def _training_model(arm, estimator: str, seed: int, run_dir: Path):
    """(model, its saved path, the env keywords it needs): ``estimator``'s model of ``arm`` from noisy simulated
    data, saved in ``run_dir/models``.

    Raises:
        ConfigError: the model has no forward dynamics (the envs step it), naming ``--estimator``.
    """
    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.plugins import get_estimator
    from robotid_sim.sim import simulate

    noise = {"q": {"snr_db": 70}, "qd": {"snr_db": 50}, "qdd": {"snr_db": 30}, "tau": {"std": 0.05}}
    fitter = get_estimator(estimator).from_options()
    model = fitter.fit(IdentificationProblem(arm, simulate(arm, "default", noise=noise, seed=seed)))
    if not model.has_forward_dynamics:
        raise ConfigError(
            f"estimator '{estimator}' (--estimator) identified a '{model.kind}' model without forward dynamics, "
            "which the RL envs step: choose an estimator of a model with forward dynamics (e.g. --estimator ols)"
        )
    (run_dir / "models").mkdir()
    model_path = model.save(run_dir / "models" / f"{estimator}.json")
    # a model without the robot's structure (a feature library) takes the joint limits from the robot itself
    return model, model_path, ({"robot": arm} if getattr(model, "structure", None) is None else {})


def _train_and_evaluate(arm, estimator, timesteps, num_envs, episodes, seed, run_dir: Path, report: Progress):
    import gymnasium
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor, VecNormalize

    from robotid_sim.envs import IDENTIFIED_ARM_ID, PYBULLET_ARM_ID, register_envs, to_sb3

    register_envs()
    report("identify", 0, 1)
    model, model_path, with_robot = _training_model(arm, estimator, seed, run_dir)
    report("identify", 1, 1)
    limit = demo_torque_limit(arm)
    venv = gymnasium.make_vec(
        IDENTIFIED_ARM_ID,
        num_envs=num_envs,
        model=model,
        task="reach",
        torque_limit=limit,
        **with_robot,
        vectorization_mode="vector_entry_point",
        autoreset_mode="SameStep",
    )
    normalized = VecNormalize(VecMonitor(to_sb3(venv)), gamma=0.99)
    agent = PPO(
        "MlpPolicy",
        normalized,
        n_steps=256,
        batch_size=1024,
        gamma=0.99,
        policy_kwargs={"net_arch": [128, 128], "log_std_init": -1.0},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    import torch

    threads = torch.get_num_threads()
    # one torch thread: as fast for this small MLP, and 20 % faster than several under robotid-sim's
    # passive OpenMP waiting (robotid_sim.threads), which wakes torch's workers for every small op
    torch.set_num_threads(1)
    start = time.perf_counter()
    done = 0
    chunk = max(timesteps // 50, num_envs * 256)
    try:
        while done < timesteps:  # learn in chunks so the progress bar moves
            step = min(chunk, timesteps - done)
            agent.learn(step, reset_num_timesteps=done == 0)
            done += step
            report("train", done, timesteps)
    finally:
        torch.set_num_threads(threads)
    train_seconds = time.perf_counter() - start
    normalized.training = False
    result = DemoResult(arm.name, estimator, timesteps, train_seconds, limit)
    curves = {}
    envs = {
        "identified": lambda: gymnasium.make(
            IDENTIFIED_ARM_ID, model=model_path, task="reach", torque_limit=limit, **with_robot
        ),
        "pybullet": lambda: gymnasium.make(PYBULLET_ARM_ID, robot=arm, task="reach", torque_limit=limit),
    }
    for k, (name, make_env) in enumerate(envs.items()):
        report("evaluate", k, len(envs))
        returns, errors, curve = _evaluate(agent, normalized.normalize_obs, make_env, episodes, 10_000 + seed)
        result.returns[name], result.final_errors[name], curves[name] = returns, errors, curve
    report("evaluate", len(envs), len(envs))
    venv.close()
    return result, curves


def _write_outputs(run_dir: Path, result: DemoResult, curves: dict[str, np.ndarray]) -> None:
    from robotid_sim.envs.spec import CONTROL_DT
    from robotid_sim.report.plots import new_figure, save_figure

    plots = run_dir / "plots"
    plots.mkdir()
    fig = new_figure(6.0, 4.0)
    ax = fig.add_subplot()
    ident, truth = np.array(result.final_errors["identified"]), np.array(result.final_errors["pybullet"])
    ax.scatter(ident, truth, s=18)
    top = float(max(ident.max(), truth.max(), 1e-3)) * 1.05
    ax.plot([0, top], [0, top], "k--", lw=0.8, label="no gap")
    unit = "[rad; m for prismatic joints]"  # the joint error's norm, in each joint's own unit
    ax.set_xlabel(f"final joint error on the identified env {unit}")
    ax.set_ylabel(f"final joint error on PyBullet (truth) {unit}")
    ax.set_title(f"{result.robot}: policy trained on the identified model only")
    ax.legend()
    save_figure(fig, plots / "final_errors.png")
    fig = new_figure(7.0, 3.5)
    ax = fig.add_subplot()
    for name, curve in curves.items():
        ax.plot(np.arange(len(curve)) * CONTROL_DT, curve, label=name)
    ax.set_xlabel("time [s]")
    ax.set_ylabel(f"‖q − q*‖ {unit}")
    ax.set_title("first evaluation episode (same start and target)")
    ax.legend()
    save_figure(fig, plots / "episode.png")
    summary = result.summary()
    metrics = {**asdict(result), "summary": summary, "gap": result.gap}
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    rows = [
        f"| {env} | {s['mean_return']:.2f} | {s['median_final_error']:.4f} | {s['p90_final_error']:.4f} |"
        for env, s in summary.items()
    ]
    text = "\n".join(
        [
            f"# RL sim-to-sim demo: {result.robot}",
            "",
            f"PPO trained for {result.timesteps:,} steps ({result.train_seconds:.0f} s) on `IdentifiedArm-v0` "
            f"(reach) of a `{result.estimator}` model identified from noisy simulated data, then evaluated "
            f"deterministically on {len(result.returns['identified'])} episodes of the identified env and of "
            "`PyBulletArm-v0` (the truth, friction on), same seeds: same starts and targets.",
            "",
            "| env | mean return | median final joint error [rad] | 90th percentile [rad] |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Sim-to-sim gap (median final error, truth / identified): **{result.gap:.3f}×**. "
            f"Torque limits (action scale): {[round(x, 3) for x in result.torque_limit]}.",
            "",
            "![final errors](plots/final_errors.png)",
            "",
            "![first episode](plots/episode.png)",
            "",
        ]
    )
    (run_dir / "report.md").write_text(text)
    (run_dir / "report.html").write_text(_html(text))


def _html(markdown: str) -> str:
    """A minimal HTML page of the demo's Markdown (headings, paragraphs, the table, images)."""
    import html
    import re

    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>RL demo</title></head><body>"]
    table: list[str] = []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            if not set(line) <= set("|-"):
                cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
                table.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
            continue
        if table:
            out.append("<table border='1'>" + "".join(table) + "</table>")
            table = []
        image = re.fullmatch(r"!\[(.*)\]\((.*)\)", line)
        if line.startswith("# "):
            out.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif image:
            out.append(f"<img alt='{html.escape(image[1])}' src='{html.escape(image[2])}'>")
        elif line:
            out.append(f"<p>{html.escape(line).replace('**', '')}</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"

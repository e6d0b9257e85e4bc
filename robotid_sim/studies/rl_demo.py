"""Sim-to-sim demo (``robotid-sim rl-demo``): train a policy on an identified model, evaluate it on the truth.

1. Simulate 50 s of a Fourier excitation (:data:`~robotid_sim.studies.rl_training.DEMO_EXCITATION`) in
   PyBullet with measurement noise and identify a model (``lmi_wls`` by default, physically consistent)
   from it: the only thing the policy will ever train on.
   A model whose mass matrix is not positive definite inside the joint limits is refused (its episodes
   would end at once): ``ols`` on planar3r's noisy data is one, at 74 % of random states.
2. Train PPO on ``robotid_sim/IdentifiedArm-v0`` (task ``reach``) with the recipe of
   :mod:`robotid_sim.studies.rl_training` (Stable-Baselines3, an optional extra:
   ``pip install 'robotid-sim[rl]'``).
3. Evaluate the deterministic policy on the same episodes (same seeds: same start and target) of the
   identified env and of ``robotid_sim/PyBulletArm-v0`` (the truth, friction on): return, final joint error
   ‖q − q*‖ and success (final error <= 0.05 rad) per episode. Their ratio is the sim-to-sim gap.

The run folder holds the identified model (``models/``), ``metrics.json`` (per-episode returns and
final errors on both envs, success rates, training time, the options), ``plots/final_errors.png`` (final error per
episode, identified vs truth), ``plots/episode.png`` (joint error over the first episode on both) and
``report.md`` / ``report.html``. The policy itself is not saved (SB3 saves with pickle, which a run
folder never holds).

Torque limits: the actions are scaled by :func:`demo_torque_limit` (twice the largest gravity torque
of each joint over the workspace, at least a tenth of its URDF effort limit, at most that limit), not
by the URDF effort limits, which on light distal links give accelerations of hundreds of rad/s²
within one 10 ms control step.

``robotid-sim rl-demo --compare`` (:mod:`robotid_sim.studies.rl_compare`) trains policies on the truth, on
identified models and on a CAD model and evaluates them all on the truth.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.progress import Progress

#: gravity torques are sampled at this many random positions for :func:`demo_torque_limit`
GRAVITY_SAMPLES = 2000
#: seconds of wall time per PPO environment step, updates included (measured about 240 µs with the recipe of
#: :mod:`robotid_sim.studies.rl_training` on planar3r, 2 cores, two trainings at once)
TRAINING_SECONDS_PER_STEP = 250e-6
#: seconds per evaluation step of both envs together (measured 3.2 ms identified + 5.3 ms PyBullet, loaded)
EVALUATION_SECONDS_PER_STEP = 10e-3
#: float64 values held per env copy, rollout step and joint (observations 4 n, actions n, six per-step scalars,
#: and the torch copies of a minibatch: twice that, rounded up)
ROLLOUT_VALUES_PER_STEP_AND_JOINT = 16
#: the evaluation episodes of the demo (episode k is reset with seed + EVALUATION_SEED + k)
EVALUATION_SEED = 10_000


@dataclass
class DemoResult:
    """What :func:`run_rl_demo` measured.

    Attributes:
        robot: robot name.
        estimator: the estimator the training model was identified with.
        timesteps: PPO environment steps.
        train_seconds: wall time of the training.
        torque_limit: the action scale per joint.
        parameter_draws: ``"covariance"`` if the training drew parameters at every reset, else None.
        returns: ``{"identified": [...], "pybullet": [...]}`` per evaluation episode.
        final_errors: the same for ‖q − q*‖ at the end of each episode (rad, m for a prismatic joint).
    """

    robot: str
    estimator: str
    timesteps: int
    train_seconds: float
    torque_limit: list[float]
    parameter_draws: str | None = None
    returns: dict[str, list[float]] = field(default_factory=dict)
    final_errors: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per env: mean return, median and 90th percentile of the final joint error, success rate (final error
        at most :data:`~robotid_sim.studies.rl_training.SUCCESS_ERROR`)."""
        from robotid_sim.studies.rl_training import SUCCESS_ERROR

        return {
            env: {
                "mean_return": float(np.mean(self.returns[env])),
                "median_final_error": float(np.median(self.final_errors[env])),
                "p90_final_error": float(np.percentile(self.final_errors[env], 90)),
                "success_rate": float(np.mean(np.asarray(self.final_errors[env]) <= SUCCESS_ERROR)),
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
    of ``PPO_STEPS_PER_ROLLOUT`` steps per copy), evaluation ``episodes · EPISODE_STEPS · 10 ms`` (a step of both
    envs; :mod:`robotid_sim.studies.rl_training`),
    memory ``num_envs · n_steps · 16 · 8`` bytes per joint for the rollout buffer (3 joints assumed at least).

    Raises:
        ConfigError: naming each option by its argument and its ``rl-demo`` flag.
    """
    from robotid_sim.safety import memory_limit_bytes
    from robotid_sim.sim.cost import format_bytes, limit_problems
    from robotid_sim.sim.simulate import check_seed
    from robotid_sim.studies.rl_training import EPISODE_STEPS, PPO_STEPS_PER_ROLLOUT

    for value, name, flag in (
        (timesteps, "timesteps", "--timesteps"),
        (num_envs, "num_envs", "--envs"),
        (episodes, "episodes", "--episodes"),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ConfigError(f"{name} ({flag}) must be a whole number >= 1, got {value!r}")
    check_seed(seed, "seed (--seed)")
    steps = max(timesteps, PPO_STEPS_PER_ROLLOUT * num_envs)
    seconds = steps * TRAINING_SECONDS_PER_STEP + episodes * EPISODE_STEPS * EVALUATION_SECONDS_PER_STEP
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


def run_rl_demo(
    out_dir: str | Path | None = None,
    *,
    robot: str = "planar3r",
    estimator: str = "lmi_wls",
    timesteps: int = 2_500_000,
    num_envs: int | None = None,
    episodes: int = 50,
    seed: int = 0,
    parameter_draws: str | None = None,
    progress: Progress | None = None,
    allow_large: bool = False,
) -> Path:
    """Identify ``robot``, train PPO on its identified reach env, evaluate on the identified and the PyBullet
    env (module docstring); returns the new run folder (under ``out_dir``, default ``./runs``).

    The defaults are the recipe's measured run (docs/benchmarks.md): 2.5 M steps, about 9 minutes on 2 cores.

    ``num_envs``: env copies trained on (default the recipe's :data:`~robotid_sim.studies.rl_training.NUM_ENVS`).
    ``parameter_draws``: ``"covariance"`` trains with the identified parameters drawn from the model's covariance
    at every reset (``IdentifiedArm-v0``'s option; the evaluation on the identified env uses the model as
    identified).
    ``allow_large``: run a demo estimated above the time limit or above half of this machine's RAM
    (:func:`check_rl_demo`).

    Raises:
        ConfigError: an option out of range or a demo above the limits (:func:`check_rl_demo`), an estimator
            whose model the envs cannot step (:func:`check_training_model`), or Stable-Baselines3 not installed;
            all but the model are checked before any work, and the sizes before Stable-Baselines3 is imported.
        PluginError: an unknown estimator.
    """
    from robotid_sim.plugins import get_estimator
    from robotid_sim.robot import load_robot
    from robotid_sim.run_folder import build_run_folder, output_root
    from robotid_sim.studies.rl_training import NUM_ENVS

    num_envs = NUM_ENVS if num_envs is None else num_envs
    check_rl_demo(timesteps, num_envs, episodes, seed, allow_large)
    if parameter_draws not in (None, "covariance"):
        raise ConfigError(
            f"parameter_draws (--parameter-draws) must be 'covariance' or left out, got {parameter_draws!r}"
        )
    get_estimator(estimator).from_options()  # an unknown estimator is refused before Stable-Baselines3 is asked for
    require_sb3()
    arm = load_robot(robot)
    root = output_root(out_dir)
    report = progress or (lambda *_: None)

    def write(run_dir: Path) -> None:
        result, curves = _train_and_evaluate(
            arm, estimator, timesteps, num_envs, episodes, seed, parameter_draws, run_dir, report
        )
        _write_outputs(run_dir, result, curves)

    return build_run_folder(root, f"rl_demo_{arm.name}", write)


def check_training_model(model, estimator: str, arm):
    """``model`` if the RL envs can step it, else ConfigError naming ``--estimator``: it needs forward dynamics
    and a mass matrix positive definite inside the joint limits
    (:func:`~robotid_sim.envs.identified.indefinite_mass_fraction`)."""
    from robotid_sim.envs.identified import indefinite_mass_fraction, mass_matrix_message

    if not model.has_forward_dynamics:
        raise ConfigError(
            f"estimator '{estimator}' (--estimator) identified a '{model.kind}' model without forward dynamics, "
            "which the RL envs step: choose an estimator of a model with forward dynamics (e.g. --estimator lmi_wls)"
        )
    chain = arm if getattr(model, "structure", None) is None else model.structure
    bad = indefinite_mass_fraction(model, chain)
    if bad > 0:
        raise ConfigError(
            f"{mass_matrix_message(bad, estimator)} (--estimator lmi_wls); the RL envs end such episodes at once"
        )
    return model


def _training_model(arm, estimator: str, seed: int, run_dir: Path):
    """(model, its saved path, the env keywords it needs): ``estimator``'s model of ``arm`` from 50 s of a noisy
    simulated Fourier excitation (:data:`~robotid_sim.studies.rl_training.DEMO_EXCITATION`,
    :data:`~robotid_sim.studies.rl_training.NOISE`), saved in ``run_dir/models``.

    Raises:
        ConfigError: a model the envs cannot step (:func:`check_training_model`).
    """
    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.plugins import get_estimator
    from robotid_sim.sim import simulate
    from robotid_sim.studies.rl_training import DEMO_EXCITATION, DEMO_SECONDS, NOISE

    fitter = get_estimator(estimator).from_options()
    data = simulate(arm, DEMO_EXCITATION, duration=DEMO_SECONDS, noise=NOISE, seed=seed)
    model = fitter.fit(IdentificationProblem(arm, data))
    check_training_model(model, estimator, arm)
    (run_dir / "models").mkdir()
    model_path = model.save(run_dir / "models" / f"{estimator}.json")
    # a model without the robot's structure (a feature library) takes the joint limits from the robot itself
    return model, model_path, ({"robot": arm} if getattr(model, "structure", None) is None else {})


def _train_and_evaluate(
    arm, estimator, timesteps, num_envs, episodes, seed, parameter_draws, run_dir: Path, report: Progress
):
    import gymnasium

    from robotid_sim.envs import IDENTIFIED_ARM_ID, PYBULLET_ARM_ID
    from robotid_sim.studies.rl_training import evaluate_policy, reach_options, train_on_model

    report("identify", 0, 1)
    model, model_path, with_robot = _training_model(arm, estimator, seed, run_dir)
    report("identify", 1, 1)
    limit = demo_torque_limit(arm)
    common = reach_options(limit)
    policy = train_on_model(arm, model, {**common, **with_robot}, parameter_draws, timesteps, num_envs, seed, report)
    result = DemoResult(arm.name, estimator, timesteps, policy.train_seconds, limit, parameter_draws)
    curves = {}
    envs = {
        "identified": lambda: gymnasium.make(IDENTIFIED_ARM_ID, model=model_path, **common, **with_robot),
        "pybullet": lambda: gymnasium.make(PYBULLET_ARM_ID, robot=arm, **common),
    }
    for k, (name, make_env) in enumerate(envs.items()):
        report("evaluate", k, len(envs))
        evaluation = evaluate_policy(policy, make_env, episodes, EVALUATION_SEED + seed)
        result.returns[name] = evaluation.returns.tolist()
        result.final_errors[name] = evaluation.final_errors.tolist()
        curves[name] = evaluation.first_curve
    report("evaluate", len(envs), len(envs))
    return result, curves


def _write_outputs(run_dir: Path, result: DemoResult, curves: dict[str, np.ndarray]) -> None:
    from robotid_sim.envs.spec import CONTROL_DT
    from robotid_sim.report.plots import new_figure, save_figure
    from robotid_sim.studies.rl_training import SUCCESS_ERROR

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
        f"| {env} | {s['success_rate']:.0%} | {s['median_final_error']:.4f} | {s['p90_final_error']:.4f} | "
        f"{s['mean_return']:.1f} |"
        for env, s in summary.items()
    ]
    text = "\n".join(
        [
            f"# RL sim-to-sim demo: {result.robot}",
            "",
            f"PPO trained for {result.timesteps:,} steps ({result.train_seconds:.0f} s) on `IdentifiedArm-v0` "
            f"(reach) of a `{result.estimator}` model identified from 50 s of noisy simulated data"
            + (", its parameters drawn from its covariance at every reset" if result.parameter_draws else "")
            + ", then evaluated "
            f"deterministically on {len(result.returns['identified'])} episodes of the identified env and of "
            "`PyBulletArm-v0` (the truth, friction on), same seeds: same starts and targets. Success: a final "
            f"joint error of at most {SUCCESS_ERROR} rad.",
            "",
            "| env | success | median final joint error [rad] | 90th percentile [rad] | mean return |",
            "|---|---|---|---|---|",
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
    (run_dir / "report.html").write_text(html_page(text))


def html_page(markdown: str, title: str = "RL demo") -> str:
    """A minimal HTML page of the demo's Markdown (headings, paragraphs, the table, images)."""
    import html
    import re

    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"]
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

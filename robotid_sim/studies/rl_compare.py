"""What identification is worth for RL (``robotid-sim rl-demo --compare``): policies trained on the truth, on
identified models and on a CAD model, all evaluated on the truth.

Every policy is trained with the same recipe (:mod:`robotid_sim.studies.rl_training`), the same number of env
steps and the same training seeds, then evaluated deterministically on the same episodes (same starts and
targets) of ``robotid_sim/PyBulletArm-v0``, the truth with its friction. The policies differ only in the
model they were trained on (:data:`POLICIES`):

- ``truth``, the oracle: the robot's true parameters in ``IdentifiedArm-v0``, which steps exactly as
  ``PyBulletArm-v0`` (the same equations, integrator and step: their observations agree to float32 rounding,
  ``tests/test_rl_compare.py``), at the identified env's speed. The report also gives what training on
  ``PyBulletArm-v0`` itself would take, from both envs' steps per second measured in the same process.
- ``identified``: the estimator's model (``lmi_wls`` by default) from the robot's default excitation simulated
  with measurement noise (:data:`~robotid_sim.studies.rl_training.NOISE`; 55 s for planar3r).
- ``cad``: a "CAD" model, the true inertial parameters with CAD-like errors (:func:`cad_parameters`,
  ±:data:`CAD_ERROR` on masses, first moments and inertias about the COM), no friction and no rotor inertia.
- ``identified+draws``: ``identified`` with ``parameter_draws="covariance"``, new parameters drawn from the
  model's covariance at every reset (domain randomisation by the identification's own uncertainty).
- ``poor``: the estimator's model from poor data, :data:`POOR_SECONDS` s of a Fourier excitation with stronger
  noise (:data:`POOR_NOISE`).
- ``poor+draws``: ``poor`` with ``parameter_draws="covariance"``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.progress import Progress

#: the policies compared, in the report's order
POLICIES = ("truth", "identified", "cad", "identified+draws", "poor", "poor+draws")
#: what each policy was trained on, for the report
TRAINED_ON = {
    "truth": "the true parameters (the oracle)",
    "identified": "{estimator} from {seconds:.0f} s of noisy data",
    "cad": "CAD: true inertials ±{cad:.0%}, no friction",
    "identified+draws": "identified, covariance draws",
    "poor": "{estimator} from {poor:.0f} s, strong noise",
    "poor+draws": "poor, covariance draws",
}
#: poor data: seconds of a Fourier excitation (one period), and stronger noise
POOR_SECONDS = 10.0
POOR_EXCITATION = {"type": "fourier", "harmonics": 5, "base_frequency": 1.0 / POOR_SECONDS}
POOR_NOISE = {"q": {"snr_db": 50}, "qd": {"snr_db": 30}, "qdd": {"snr_db": 15}, "tau": {"std": 0.5}}
#: relative error of the CAD model's masses, first moments and inertias (uniform in ±CAD_ERROR)
CAD_ERROR = 0.2
#: seed of the evaluation episodes (episode k is reset with EVALUATION_SEED + k)
EVALUATION_SEED = 10_000
#: env steps timed to project the oracle's training time on PyBullet itself (fewer for a shorter training)
PYBULLET_TIMING_STEPS = 2_000


def cad_parameters(robot, rng: np.random.Generator, error: float = CAD_ERROR) -> np.ndarray:
    """Standard parameters (p,) of a CAD model of ``robot``: each link's mass, first moments (m·c, per axis) and
    inertia about its centre of mass multiplied by independent factors uniform in [1 − error, 1 + error] (one
    factor for the inertia tensor, so it stays a rigid body's), friction and rotor inertia zero.

    Physically consistent by construction: a positive mass, and a scaled inertia about the COM keeps its
    positive principal moments and triangle inequalities."""
    from robotid_sim.dynamics.chain import inertial_parameters, split_inertial

    friction = robot.friction.values()
    blocks = []
    for j, joint in enumerate(robot.joints):
        m, c, inertia = split_inertial(np.asarray(joint.inertial, float))
        mass = m * (1.0 + rng.uniform(-error, error))
        first = m * c * (1.0 + rng.uniform(-error, error, 3))
        com = first / mass if mass > 0 else np.zeros(3)
        blocks.append(inertial_parameters(mass, com, inertia * (1.0 + rng.uniform(-error, error))))
        if robot.rotor_inertia is not None:
            blocks.append([0.0])
        blocks.append(np.zeros_like(friction[j]))
    return np.concatenate(blocks)


@dataclass
class PolicyResult:
    """One policy trained with one seed, evaluated on the truth."""

    policy: str
    seed: int
    train_seconds: float
    success_rate: float
    median_final_error: float
    p90_final_error: float
    mean_return: float
    final_errors: list[float]


@dataclass
class CompareResult:
    """What :func:`run_rl_compare` measured.

    Attributes:
        robot: robot name.
        estimator: the estimator of the identified models.
        timesteps: env steps per training.
        seeds: training seeds.
        episodes: evaluation episodes per policy.
        data_seconds: ``{"identified": s, "poor": s}`` the length of each model's identification data.
        pybullet_steps_per_second, identified_steps_per_second: one ``PyBulletArm-v0`` and one
            ``IdentifiedArm-v0`` of the true parameters, measured in this process (the oracle's projected time).
        results: one :class:`PolicyResult` per policy and seed.
    """

    robot: str
    estimator: str
    timesteps: int
    seeds: list[int]
    episodes: int
    data_seconds: dict[str, float]
    pybullet_steps_per_second: float
    identified_steps_per_second: float
    results: list[PolicyResult] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per policy, over seeds: mean success rate, median of the per-seed median final errors, their min and
        max, mean return and mean training seconds."""
        out = {}
        for name in POLICIES:
            rows = [r for r in self.results if r.policy == name]
            if not rows:
                continue
            medians = [r.median_final_error for r in rows]
            out[name] = {
                "success_rate": float(np.mean([r.success_rate for r in rows])),
                "median_final_error": float(np.median(medians)),
                "median_final_error_min": float(np.min(medians)),
                "median_final_error_max": float(np.max(medians)),
                "mean_return": float(np.mean([r.mean_return for r in rows])),
                "train_seconds": float(np.mean([r.train_seconds for r in rows])),
            }
        return out

    @property
    def pybullet_train_seconds(self) -> float:
        """The oracle's projected training time on ``PyBulletArm-v0`` itself: its training time with the
        identified env's steps replaced by PyBullet's (both speeds measured in the same process)."""
        truth = [r.train_seconds for r in self.results if r.policy == "truth"]
        env_seconds = self.timesteps * (1.0 / self.pybullet_steps_per_second - 1.0 / self.identified_steps_per_second)
        return float(np.mean(truth)) + env_seconds if truth else float("nan")


def load_compare_result(run_dir: str | Path) -> CompareResult:
    """The :class:`CompareResult` of a comparison's run folder (its ``metrics.json``)."""
    data = json.loads((Path(run_dir) / "metrics.json").read_text())
    fields = {k: data[k] for k in CompareResult.__dataclass_fields__ if k != "results"}
    return CompareResult(**fields, results=[PolicyResult(**r) for r in data["results"]])


def check_rl_compare(
    timesteps: int, seeds: int, episodes: int, seed: int, num_envs: int, allow_large: bool = False
) -> None:
    """Refuse options out of range, or a comparison above the time limit, before anything is imported or
    simulated (the training of :data:`POLICIES` × ``seeds`` policies estimated as in
    :func:`~robotid_sim.studies.rl_demo.check_rl_demo`).

    Raises:
        ConfigError: naming each option by its argument and its ``rl-demo`` flag.
    """
    from robotid_sim.studies.rl_demo import check_rl_demo

    if isinstance(seeds, bool) or not isinstance(seeds, int | np.integer) or seeds < 1:
        raise ConfigError(f"seeds (--seeds) must be a whole number >= 1, got {seeds!r}")
    trainings = len(POLICIES) * int(seeds)
    check_rl_demo(timesteps * trainings, num_envs, episodes * trainings, seed, allow_large)


def run_rl_compare(
    out_dir: str | Path | None = None,
    *,
    robot: str = "planar3r",
    estimator: str = "lmi_wls",
    timesteps: int = 1_000_000,
    seeds: int = 3,
    episodes: int = 50,
    seed: int = 0,
    num_envs: int | None = None,
    workers: int = 1,
    progress: Progress | None = None,
    allow_large: bool = False,
) -> Path:
    """Train every policy of :data:`POLICIES` with ``seeds`` training seeds (``seed, seed + 1, ...``), evaluate
    each on ``episodes`` episodes of the truth; returns the new run folder (under ``out_dir``, default ``./runs``)
    with ``metrics.json``, ``report.md``/``.html``, ``plots/`` and the training models in ``models/``.

    ``num_envs``: env copies per training (default the recipe's
    :data:`~robotid_sim.studies.rl_training.NUM_ENVS`); ``workers``: trainings run at once, each in a process of its
    own (one core each).

    Raises:
        ConfigError: an option out of range or a comparison above the limits, an estimator whose models the
            envs cannot step (no forward dynamics, or a mass matrix that is not positive definite), or
            Stable-Baselines3 not installed.
        PluginError: an unknown estimator.
    """
    from robotid_sim.plugins import get_estimator
    from robotid_sim.robot import load_robot
    from robotid_sim.run_folder import build_run_folder, output_root
    from robotid_sim.studies.rl_demo import require_sb3
    from robotid_sim.studies.rl_training import NUM_ENVS

    num_envs = NUM_ENVS if num_envs is None else num_envs
    check_rl_compare(timesteps, seeds, episodes, seed, num_envs, allow_large)
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer) or workers < 1:
        raise ConfigError(f"workers (--workers) must be a whole number >= 1, got {workers!r}")
    get_estimator(estimator).from_options()
    require_sb3()
    arm = load_robot(robot)
    root = output_root(out_dir)
    report = progress or (lambda *_: None)

    def write(run_dir: Path) -> None:
        models, data_seconds = _training_models(arm, estimator, seed, run_dir, report)
        pybullet_rate, identified_rate = _env_speeds(arm, models["truth"][0], min(timesteps, PYBULLET_TIMING_STEPS))
        result = CompareResult(
            arm.name,
            estimator,
            timesteps,
            [seed + k for k in range(seeds)],
            episodes,
            data_seconds,
            pybullet_rate,
            identified_rate,
        )
        tasks = [(name, s) for s in result.seeds for name in POLICIES]
        result.results = _train_all(arm, models, tasks, timesteps, num_envs, episodes, workers, report)
        _write_outputs(run_dir, result)

    return build_run_folder(root, f"rl_compare_{arm.name}", write)


def _training_models(arm, estimator: str, seed: int, run_dir: Path, report: Progress):
    """({policy: (model, parameter_draws)}, {data: seconds}); the models saved in ``run_dir/models``.

    Raises:
        ConfigError: an identified model the envs cannot step
            (:func:`~robotid_sim.studies.rl_demo.check_training_model`).
    """
    from robotid_sim.identification import IdentificationProblem, StandardParameterModel
    from robotid_sim.plugins import get_estimator
    from robotid_sim.sim import simulate
    from robotid_sim.studies.rl_demo import check_training_model
    from robotid_sim.studies.rl_training import NOISE

    report("identify", 0, 2)
    fitter = get_estimator(estimator).from_options()
    good = simulate(arm, "default", noise=NOISE, seed=seed)
    identified = check_training_model(fitter.fit(IdentificationProblem(arm, good)), estimator, arm)
    report("identify", 1, 2)
    poor_data = simulate(arm, POOR_EXCITATION, duration=POOR_SECONDS, noise=POOR_NOISE, seed=seed)
    poor = check_training_model(fitter.fit(IdentificationProblem(arm, poor_data)), estimator, arm)
    report("identify", 2, 2)
    truth = StandardParameterModel(arm.structure(), arm.true_parameters(), estimator="truth")
    cad = StandardParameterModel(
        arm.structure(), cad_parameters(arm, np.random.default_rng(seed)), estimator=f"cad_{CAD_ERROR:g}"
    )
    (run_dir / "models").mkdir()
    for name, model in (("identified", identified), ("poor", poor), ("cad", cad)):
        model.save(run_dir / "models" / f"{name}.json")
    models = {
        "truth": (truth, None),
        "identified": (identified, None),
        "cad": (cad, None),
        "identified+draws": (identified, "covariance"),
        "poor": (poor, None),
        "poor+draws": (poor, "covariance"),
    }
    seconds = {"identified": float(good.t[-1] - good.t[0]), "poor": float(poor_data.t[-1] - poor_data.t[0])}
    return models, seconds


def _env_speeds(arm, truth, steps: int) -> tuple[float, float]:
    """Steps per second of one ``PyBulletArm-v0`` and one ``IdentifiedArm-v0`` of ``truth`` (zero actions,
    ``steps`` each, reset when an episode ends)."""
    import gymnasium

    from robotid_sim.envs import IDENTIFIED_ARM_ID, PYBULLET_ARM_ID, register_envs
    from robotid_sim.studies.rl_demo import demo_torque_limit
    from robotid_sim.studies.rl_training import EPISODE_STEPS

    register_envs()
    limit = demo_torque_limit(arm)
    rates = []
    for env_id, kwargs in ((PYBULLET_ARM_ID, {"robot": arm}), (IDENTIFIED_ARM_ID, {"model": truth})):
        env = gymnasium.make(env_id, task="reach", torque_limit=limit, max_episode_steps=EPISODE_STEPS, **kwargs)
        action = np.zeros(arm.n_dof, np.float32)
        env.reset(seed=0)
        start = time.perf_counter()
        for _ in range(steps):
            if any(env.step(action)[2:4]):
                env.reset()
        rates.append(steps / (time.perf_counter() - start))
        env.close()
    return rates[0], rates[1]


def _train_all(arm, models, tasks, timesteps: int, num_envs: int, episodes: int, workers: int, report: Progress):
    """One :class:`PolicyResult` per (policy, seed) of ``tasks``, in that order; ``workers`` processes at once."""
    jobs = [(arm, *models[name], name, s, timesteps, num_envs, episodes) for name, s in tasks]
    report("train", 0, len(jobs))
    if workers == 1:
        results = []
        for k, job in enumerate(jobs):
            results.append(_train_and_evaluate(*job))
            report("train", k + 1, len(jobs))
        return results
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # torch and numba threads do not survive a fork
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(_train_and_evaluate, *job) for job in jobs]
        for k, future in enumerate(futures):
            future.result()
            report("train", k + 1, len(jobs))
        return [f.result() for f in futures]


def _train_and_evaluate(
    arm, model, draws, name: str, seed: int, timesteps: int, num_envs: int, episodes: int
) -> PolicyResult:
    """Train the recipe's PPO on ``model``'s reach env (with ``draws``), evaluate on the truth."""
    import gymnasium

    from robotid_sim.envs import PYBULLET_ARM_ID
    from robotid_sim.studies.rl_demo import demo_torque_limit
    from robotid_sim.studies.rl_training import evaluate_policy, reach_options, train_on_model

    options = {"robot": arm, **reach_options(demo_torque_limit(arm))}
    policy = train_on_model(arm, model, options, draws, timesteps, num_envs, seed)
    evaluation = evaluate_policy(policy, lambda: gymnasium.make(PYBULLET_ARM_ID, **options), episodes, EVALUATION_SEED)
    s = evaluation.summary()
    return PolicyResult(
        name,
        seed,
        policy.train_seconds,
        s["success_rate"],
        s["median_final_error"],
        s["p90_final_error"],
        s["mean_return"],
        evaluation.final_errors.tolist(),
    )


def _labels(result: CompareResult) -> dict[str, str]:
    """What each policy was trained on, with this run's figures."""
    values = {
        "estimator": result.estimator,
        "seconds": result.data_seconds["identified"],
        "poor": result.data_seconds["poor"],
        "cad": CAD_ERROR,
    }
    return {name: text.format(**values) for name, text in TRAINED_ON.items()}


def summary_rows(result: CompareResult) -> list[list[str]]:
    """The comparison table's rows: policy, success rate, median final error (range over seeds), mean return,
    training wall time (the oracle's also projected on PyBullet)."""
    rows = []
    for name, s in result.summary().items():
        seconds = f"{s['train_seconds']:.0f}"
        if name == "truth":
            seconds += f" ({result.pybullet_train_seconds:.0f} on PyBullet)"
        rows.append(
            [
                name,
                f"{s['success_rate']:.0%}",
                f"{s['median_final_error']:.3f} ({s['median_final_error_min']:.3f}–{s['median_final_error_max']:.3f})",
                f"{s['mean_return']:.0f}",
                seconds,
            ]
        )
    return rows


#: the comparison table's header
COLUMNS = ("policy", "success", "median final error [rad] (seeds' range)", "mean return", "training [s]")


def comparison_table(result: CompareResult):
    """The comparison as a rich ``Table`` (:data:`COLUMNS`, :func:`summary_rows`), for terminals."""
    from rich.table import Table

    table = Table(title=f"Policies evaluated on the truth ({result.robot}, {result.timesteps:,} steps each)")
    for column in COLUMNS:
        table.add_column(column)
    for row in summary_rows(result):
        table.add_row(*row)
    return table


def _write_outputs(run_dir: Path, result: CompareResult) -> None:
    from robotid_sim.report.plots import new_figure, save_figure
    from robotid_sim.studies.rl_demo import html_page
    from robotid_sim.studies.rl_training import SUCCESS_ERROR

    plots = run_dir / "plots"
    plots.mkdir()
    names = [name for name in POLICIES if any(r.policy == name for r in result.results)]
    fig = new_figure(8.0, 4.0)
    ax = fig.add_subplot()
    errors = [np.concatenate([r.final_errors for r in result.results if r.policy == name]) for name in names]
    ax.boxplot([np.maximum(e, 1e-4) for e in errors], tick_labels=names, whis=(10, 90), showfliers=False)
    for k, e in enumerate(errors):
        ax.scatter(
            np.full(len(e), k + 1) + np.random.default_rng(k).uniform(-0.2, 0.2, len(e)),
            np.maximum(e, 1e-4),
            s=4,
            alpha=0.4,
        )
    ax.axhline(SUCCESS_ERROR, color="k", ls="--", lw=0.8, label=f"success: {SUCCESS_ERROR} rad")
    ax.set_yscale("log")
    ax.set_ylabel("final joint error on PyBullet (truth) [rad]")
    ax.set_title(f"{result.robot}: every policy evaluated on the same {result.episodes} episodes of the truth")
    ax.legend()
    save_figure(fig, plots / "final_errors.png")
    fig = new_figure(8.0, 3.5)
    ax = fig.add_subplot()
    for k, name in enumerate(names):
        rates = [r.success_rate for r in result.results if r.policy == name]
        ax.bar(k, np.mean(rates), color=f"C{k}")
        ax.scatter(np.full(len(rates), k), rates, color="k", s=10, zorder=3)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate (bars: mean, dots: seeds)")
    save_figure(fig, plots / "success.png")
    summary = result.summary()
    metrics = {
        **asdict(result),
        "summary": summary,
        "pybullet_train_seconds": result.pybullet_train_seconds,
        "trained_on": _labels(result),
    }
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    labels = _labels(result)
    rows = [f"| {row[0]} | {labels[row[0]]} | " + " | ".join(row[1:]) + " |" for row in summary_rows(result)]
    text = "\n".join(
        [
            f"# What identification is worth for RL: {result.robot}",
            "",
            f"Every policy: the same PPO recipe, {result.timesteps:,} env steps, training seeds {result.seeds}; "
            f"evaluated deterministically on the same {result.episodes} episodes (same starts and targets) of "
            f"`PyBulletArm-v0`, the truth with friction. Success: final joint error <= {SUCCESS_ERROR} rad. "
            "Success rate and mean return are the mean over seeds; the median final error is the median of the "
            "seeds' medians, with their range.",
            "",
            "| policy | trained on | " + " | ".join(COLUMNS[1:]) + " |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            f"The oracle trained on the true parameters in `IdentifiedArm-v0`, which steps as `PyBulletArm-v0` "
            f"does; `PyBulletArm-v0` itself ran {result.pybullet_steps_per_second:,.0f} steps/s here against "
            f"{result.identified_steps_per_second:,.0f} for one `IdentifiedArm-v0`, so the same training on "
            f"PyBullet would take about {result.pybullet_train_seconds:,.0f} s.",
            "",
            "![final errors](plots/final_errors.png)",
            "",
            "![success rates](plots/success.png)",
            "",
        ]
    )
    (run_dir / "report.md").write_text(text)
    (run_dir / "report.html").write_text(html_page(text, "RL comparison"))

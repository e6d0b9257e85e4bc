"""``robotid-sim`` command line: parses arguments, calls the API, prints. No logic lives here.

Start-up is kept short (``robotid-sim --help`` must not wait for the numerical stack): this module imports
only the standard library and :mod:`robotid_sim.errors`; rich, NumPy and the rest of the package are imported
by the command that needs them.

Errors: a user error (a :class:`~robotid_sim.errors.RobotIdError`, an unreadable or unwritable path,
malformed JSON or YAML) prints one line ``error: ...`` naming the problem and the fix, and exits with
code 2; inputs and output paths are checked before any simulation or identification starts, so a bad
argument never costs a run and never leaves a half-written file. Anything else is a bug: one line says so
and exits with code 1; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import errno
import functools
import importlib
import json
import logging
import math
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robotid_sim.errors import ConfigError, DataError, RobotIdError
from robotid_sim.threads import quiet_thread_pools

#: exit code of a user error (bad input), as argparse uses for bad arguments
EXIT_USER_ERROR = 2
#: exit code of an unexpected exception (a bug)
EXIT_BUG = 1

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


@functools.cache
def _consoles() -> tuple[Console, Console]:
    """The stdout and stderr consoles, made on first use (importing rich is not free)."""
    from rich.console import Console

    # piped output (CI logs, files) gets a wide table instead of rich's 80-column default
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160
    return Console(width=width), Console(stderr=True, width=width)


def __getattr__(name: str) -> Any:
    # ``robotid_sim.cli.console`` / ``err_console`` stay available, built on first access
    if name == "console":
        return _consoles()[0]
    if name == "err_console":
        return _consoles()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _out() -> Console:
    return _consoles()[0]


def _err() -> Console:
    return _consoles()[1]


def _progress() -> Progress:
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description:<32}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=_err(),
        transient=False,
    )


class _Bars:
    """Maps the studies' progress(label, done, total) calls onto rich progress bars, one bar per label. A context
    manager: the bars appear with the first call, so a command refused before any work prints its error alone
    (no empty progress line before it)."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> _Bars:
        return self

    def __exit__(self, *exc) -> None:
        if self.tasks:
            self.progress.stop()

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.tasks:
            self.progress.start()
        if label not in self.tasks:
            self.tasks[label] = self.progress.add_task(label, total=total)
        self.progress.update(self.tasks[label], completed=done, total=total)


# ------------------------------------------------------------------------------------------- checks
def _check_output(value: str, suffixes: tuple[str, ...], flag: str, also: tuple[Path, ...] = ()) -> Path:
    """``value`` as a path that can be written now: known suffix, existing writable folder, no file there.

    ``also``: further files the command writes beside it (a model's ``.npz``); they must not exist either.

    Raises:
        ConfigError: naming the flag, the path and the fix.
    """
    path = Path(value)
    if path.suffix.lower() not in suffixes:
        shown = f"'{path.suffix}'" if path.suffix else "no suffix"
        raise ConfigError(f"{flag} '{path}' has {shown}; the suffix picks the format: use one of {', '.join(suffixes)}")
    if path.is_dir():
        raise ConfigError(f"{flag} '{path}' is a folder; give a file name inside it")
    folder = path.parent
    if not folder.exists():
        raise ConfigError(f"{flag} '{path}': folder '{folder}' does not exist; create it first or choose another path")
    if not folder.is_dir():
        raise ConfigError(f"{flag} '{path}': '{folder}' is not a folder; choose another path")
    for target in (path, *also):
        if target.exists() or target.is_symlink():
            raise ConfigError(
                f"{flag}: '{target}' already exists; refusing to overwrite it: choose another name or delete it first"
            )
    from robotid_sim.run_folder import check_writable_folder

    check_writable_folder(folder, f"{flag} '{path}'")
    return path


def _model_output(value: str) -> Path:
    """The JSON path ``identify --out`` writes, checked with its ``.npz``: ``m``, ``m.json`` and ``m.npz`` all
    write ``m.json`` and ``m.npz`` (:func:`robotid_sim.identification.model.model_files`)."""
    from robotid_sim.identification.model import model_files

    path = Path(value)
    if path.suffix.lower() in (".json", ".npz") and path.suffix not in (".json", ".npz"):
        raise ConfigError(f"--out '{path}': write the suffix in lower case ('{path.suffix.lower()}')")
    if path.suffix not in ("", ".json", ".npz") or not path.name:
        raise ConfigError(
            f"--out '{path}' has {f'{path.suffix!r}' if path.suffix else 'no file name'}; a model is written as "
            "NAME.json with its arrays in NAME.npz beside it: give NAME, NAME.json or NAME.npz"
        )
    json_path, npz = model_files(path)
    return _check_output(str(json_path), (".json",), "--out", also=(npz,))


def _positive(value: float | None, flag: str, unit: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{flag} must be a finite number > 0 {unit}, got {value:g}")


def _yaml_file(value: str, flag: str, what: str, example: str, empty_hint: str) -> dict:
    """The mapping in the YAML file ``value``; empty, non-mapping, binary or malformed files are ConfigErrors."""
    from robotid_sim.safety import load_yaml_file

    data = load_yaml_file(value, f"{flag} file")
    if data is None:
        raise ConfigError(f"{flag} file {value} is empty; write {what} (e.g. {example}){empty_hint}")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{flag} file {value} must hold a mapping ({what}, e.g. {example}), got {type(data).__name__}: {data!r:.80}"
        )
    return data


# ------------------------------------------------------------------------------------------- commands
def cmd_run(args) -> int:
    from robotid_sim.scenario import resolve_scenario_path
    from robotid_sim.studies import load_run_result, run_scenario

    path = resolve_scenario_path(args.scenario)
    _out().print(f"[bold]scenario[/] {path}")
    with _Bars(_progress()) as bars:
        run_dir = run_scenario(path, out_dir=args.out, progress=bars)
    _print_tables(load_run_result(run_dir))
    _print_run_folder(run_dir)
    return 0


def _print_run_folder(run_dir: Path) -> None:
    """The run folder a command wrote, and its two reports."""
    _out().print(f"[bold green]run folder[/] {run_dir}")
    _out().print(f"  report: {run_dir / 'report.html'}  |  {run_dir / 'report.md'}")


def _print_tables(result) -> None:
    """The comparison table of a study, and its closed-loop table when it has one."""
    from rich.markup import escape

    from robotid_sim.report.tables import rich_closed_loop_table, rich_compact_comparison

    if result.outcomes or not result.closed_loop:
        # the columns that separate the estimators and fit the terminal; the report has every column
        table, lines = rich_compact_comparison(result, _out().width)
        _out().print(table)
        for line in lines:
            _out().print(escape(line), highlight=False)
    if result.closed_loop:
        _out().print(rich_closed_loop_table(result))

    for failure in result.failures:
        line = f"{failure.kind} {failure.name}: {failure.error} (traceback in report.md)"
        _out().print(f"[bold red]failed[/] {escape(line)}", highlight=False, soft_wrap=True)


def cmd_simulate(args) -> int:
    # every argument and file is checked before the (long) simulation starts
    _positive(args.rate, "--rate", "Hz")
    _positive(args.duration, "--duration", "s")
    if args.seed < 0:
        raise ConfigError(f"--seed must be a whole number >= 0, got {args.seed}")
    from robotid_sim.sim.recordings import FORMATS

    out = _check_output(args.out, FORMATS, "--out")
    excitation: Any = "default"
    if args.excitation != "default":
        excitation = _yaml_file(
            args.excitation, "--excitation", "an excitation mapping with a 'type'", "'type: fourier'", ""
        )
    noise = None
    if args.noise is not None:
        noise = _yaml_file(
            args.noise, "--noise", "noise models", "'tau: {std: 0.5}'", ", or '{}' for no noise (or leave out --noise)"
        )

    import robotid_sim as rid

    simulate_module = importlib.import_module("robotid_sim.sim.simulate")  # the module; rid.simulate is its function

    if args.closed_loop is not None and (args.noise is not None or args.rate is not None):
        flag = "--noise" if args.noise is not None else "--rate"
        raise ConfigError(
            f"{flag} does not apply with --closed-loop: its noise is a BIRDy preset (--closed-loop "
            "highPositionNoise), its samples are 1 kHz"
        )
    args.rate = 200.0 if args.rate is None else args.rate
    dt = simulate_module.DEFAULT_DT
    decimation = round(1.0 / (args.rate * dt))
    if decimation < 1 or abs(decimation * args.rate * dt - 1.0) > 1e-9:
        raise ConfigError(
            f"--rate {args.rate:g} Hz must divide the physics rate {1 / dt:g} Hz (e.g. 100, 200, 500, 1000)"
        )
    robot = rid.load_robot(args.robot, sidecar=args.sidecar, lock_joints=_lock_joints(args.lock_joint) or None)
    if excitation != "default":
        excitation = simulate_module.resolve_excitation(robot, excitation)
    if args.closed_loop is not None:
        return _simulate_closed_loop(args, robot, excitation, out)
    if args.prefilter:
        raise ConfigError("--prefilter applies to --closed-loop data (BIRDy's '_f' preprocessing); add --closed-loop")
    chain = simulate_module.resolve_noise(robot, noise)
    chain.check_joints(robot.n_dof)
    with _Bars(_progress()) as bars:
        ds = rid.simulate(
            robot,
            excitation,
            duration=args.duration,
            noise=chain,
            seed=args.seed,
            rate_hz=args.rate,
            progress=bars,
            allow_large=args.allow_large,
        )
    written = ds.save(out)
    _out().print(f"wrote {written} ({ds.n_samples} samples, {ds.n_dof} joints)")
    return 0


def _simulate_closed_loop(args, robot, excitation, out) -> int:
    """``simulate --closed-loop PRESET``: BIRDy's closed loop on the PyBullet truth, prepared as BIRDy does."""
    from robotid_sim.sim.closed_loop_data import NOISE_PRESETS, birdy_dataset, closed_loop_record

    preset = args.closed_loop
    if preset != "none" and preset not in NOISE_PRESETS:
        raise ConfigError(f"--closed-loop must be one of BIRDy's noise presets ({', '.join(NOISE_PRESETS)}) or 'none'")
    with _Bars(_progress()) as bars:
        record = closed_loop_record(
            robot,
            excitation,
            noise=None if preset == "none" else preset,
            seed=args.seed,
            duration=10.0 if args.duration is None else args.duration,
            progress=bars,
        )
    ds = birdy_dataset(record, filtered=args.prefilter)
    written = ds.save(out)
    _out().print(f"wrote {written} ({ds.n_samples} samples, {ds.n_dof} joints, closed loop, {preset} noise)")
    return 0


def _estimator_options(text: str | None) -> dict:
    return _json_options(text, "--options", "estimator options", '{"threshold": 8}')


def _json_options(text: str | None, flag: str, what: str, example: str) -> dict:
    """A flag's JSON object of options ({} for none); malformed JSON or another JSON value is a ConfigError."""
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{flag} is not valid JSON ({exc.msg} at character {exc.pos + 1}): {text!r:.80}; write a JSON object "
            f"such as '{example}' (double quotes around names and strings)"
        ) from None
    if not isinstance(options, dict):
        raise ConfigError(f"{flag} must be a JSON object of {what}, e.g. '{example}', got {text!r:.80}")
    return options


def _lock_joints(values: list[str] | None) -> dict[str, float]:
    """``--lock-joint NAME=VALUE`` (repeatable) as a mapping; a malformed one names the flag and the form."""
    locks: dict[str, float] = {}
    for text in values or []:
        name, sep, value = text.partition("=")
        try:
            number = float(value) if sep and name else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise ConfigError(f"--lock-joint {text!r}: write NAME=VALUE with VALUE in rad or m, e.g. finger1=0.02")
        locks[name.strip()] = number
    return locks


def _existing_files(paths: list[str], flag: str) -> None:
    from robotid_sim.sim.rosbag import is_rosbag2_folder

    for value in paths:
        path = Path(value)
        if not path.is_file() and not is_rosbag2_folder(path):
            what = "is a folder, not a data file (nor a rosbag2 folder)" if path.is_dir() else "does not exist"
            raise DataError(
                f"{flag} '{value}' {what}; give an .npz, .csv or .mat recording, or a ROS bag (.bag, .mcap, .db3 or a "
                "rosbag2 folder)"
            )


def cmd_identify(args) -> int:
    if args.payload:
        return _identify_payload(args)
    layout = _identify_layout(args)
    drives = layout.get("drives")
    if args.payload_mass or (isinstance(drives, dict) and drives.get("gains") == "unknown"):
        return _identify_drive_gains(args, layout)
    options = _estimator_options(args.options)
    estimators = args.estimator or ["wls"]
    if options and len(estimators) > 1:
        raise ConfigError("--options applies to one estimator; give a single --estimator with it")
    study = bool(args.validate)  # held-out data: a whole study in a run folder under --out
    if args.online and study:
        raise ConfigError("--online prints the estimate as it converges; it runs no --validate study, drop one")
    out = _model_output(args.out) if args.out is not None and not study else None
    if out is not None and len(estimators) > 1:
        raise ConfigError("--out model.json holds one model; give a single --estimator, or --validate for a study")
    _existing_files(args.data, "--data")
    _existing_files(args.validate or [], "--validate")
    scenario = {
        "name": args.name,
        "robot": args.robot,
        "sidecar": args.sidecar,
        "lock_joints": _lock_joints(args.lock_joint),
        "data": {"identification": args.data, "validation": args.validate or [], "defaults": layout},
        "preprocessing": {"lowpass_hz": args.lowpass, "differentiate": args.differentiate},
        "identification": {"velocity_deadband": args.deadband},
        "estimators": [{"name": name, "options": options} for name in estimators],
    }
    if study:
        from robotid_sim.studies import load_run_result
        from robotid_sim.studies.identify import run_identify_study

        with _Bars(_progress()) as bars:
            run_dir = run_identify_study(scenario, out_dir=args.out, progress=bars)
        _print_tables(load_run_result(run_dir))
        _print_run_folder(run_dir)
        return 0

    from rich.table import Table

    from robotid_sim.studies.identify import prepare_recordings

    problem, fitters, notes = prepare_recordings(scenario)
    for note in notes:
        _out().print(f"[dim]{note}[/]")
    if args.online:
        return _identify_online(problem, fitters, out)
    for name, estimator in fitters:
        model = estimator.fit(problem)
        table = Table(title=f"{name} on {', '.join(args.data)}")
        for col in ("parameter", "value", "std"):
            table.add_column(col, justify="right" if col != "parameter" else "left")
        names, values, std = model.parameter_table()
        for k, (parameter, value) in enumerate(zip(names, values, strict=True)):
            table.add_row(parameter, f"{value:.6g}", "" if std is None else f"{std[k]:.3g}")
        _out().print(table)
        if out is not None:
            _out().print(f"wrote {model.save(out)}")
    return 0


def _identify_online(problem, fitters, out) -> int:
    """``identify --online``: each estimator consumes the samples one at a time (its ``stream``), the estimate
    printed at ten points of the stream as it converges (the numbers ``fit`` gives)."""
    from robotid_sim.identification.online import stream_estimates

    if out is not None:
        raise ConfigError("--online prints the estimate as it converges and saves no model; drop --out")
    names = problem.base_parameter_names
    shown = names if len(names) <= 8 else names[:8]
    for name, estimator in fitters:
        estimates = stream_estimates(problem, estimator)
        first = next(estimates)  # ConfigError before any output for an estimator that does not stream
        more = "  ..." if shown != names else ""
        _out().print(f"{name}, online: t (s) " + " ".join(f"{p:>10s}" for p in shown) + more)
        for t, values in (first, *estimates):
            _out().print(f"{t:>{len(name) + 14}.3f} " + " ".join(f"{v:10.4g}" for v in values[: len(shown)]))
    return 0


class _PayloadMass(argparse.Action):
    """``--payload-mass KG``: the ``--data`` recording that follows carries a payload of KG; kept as
    ``(index of that --data, KG)`` pairs."""

    def __call__(self, parser, namespace, values, option_string=None):
        marks = list(getattr(namespace, self.dest) or [])
        marks.append((len(getattr(namespace, "data", None) or []), values))
        setattr(namespace, self.dest, marks)


def _identify_layout(args) -> dict:
    """The LogSource fields ``identify`` gives every recording: the --layout file's, and --topic."""
    layout = _yaml_file(args.layout, "--layout", "LogSource fields", "'units: {q: deg}'", "") if args.layout else {}
    if args.topic:  # ROS bags: one topic, or several to merge
        layout = {**layout, "topic": args.topic[0] if len(args.topic) == 1 else args.topic}
    return layout


def _refuse_with(what: str, flags: dict[str, object]) -> None:
    """A ConfigError naming the first of ``flags`` (flag: value) that is given, which ``what`` does not take."""
    for flag, value in flags.items():
        if value:
            raise ConfigError(f"{flag} does not apply to {what}; leave it out")


def _identify_drive_gains(args, layout: dict) -> int:
    """``identify`` on current logs with unknown drive gains (``layout``: the recordings' LogSource fields): the
    gains and the base parameters together."""
    _refuse_with(
        "estimating unknown drive gains (Gautier & Briot's global least squares)",
        {"--validate": args.validate, "--estimator": args.estimator, "--options": args.options, "--model": args.model},
    )
    masses: dict[int, float] = {}
    for index, mass in args.payload_mass or []:
        _positive(mass, "--payload-mass", "kg")
        if index >= len(args.data) or index in masses:
            raise ConfigError(
                f"--payload-mass {mass:g} must come right before the --data recording it marks (one mass per "
                "recording), e.g. --data unloaded.csv --payload-mass 2.6 --data loaded.csv"
            )
        masses[index] = mass
    out = _model_output(args.out) if args.out is not None else None
    _existing_files(args.data, "--data")
    from robotid_sim.identification.drive_gains import identify_drive_gains
    from robotid_sim.robot import load_robot

    robot = load_robot(args.robot, sidecar=args.sidecar, lock_joints=_lock_joints(args.lock_joint) or None)
    fit = identify_drive_gains(
        robot.structure(),
        [{**layout, "path": path} for path in args.data],
        [masses.get(k) for k in range(len(args.data))],
        lowpass_hz=args.lowpass,
        differentiate=args.differentiate,
        velocity_deadband=args.deadband,
    )
    from rich.table import Table

    table = Table(title=f"drive gains on {', '.join(args.data)} (condition number {fit.condition_number:.3g})")
    for col in ("joint", "gain (N*m/A)", "std"):
        table.add_column(col, justify="right" if col != "joint" else "left")
    for joint, gain, std in zip(robot.joint_names, fit.gains, fit.gains_std, strict=True):
        table.add_row(joint, f"{gain:.6g}", f"{std:.3g}")
    _out().print(table)
    _out().print(f"gains: [{', '.join(f'{g:.6g}' for g in fit.gains)}]  (for the layout's drives.gains)")
    _out().print(f"{fit.model.values.size} base parameters identified with them")
    if out is not None:
        _out().print(f"wrote {fit.model.save(out)}")
    return 0


def _identify_payload(args) -> int:
    """``identify --payload``: a payload's inertial parameters at the flange, given the arm's model (--model)."""
    _refuse_with(
        "--payload (the payload's parameters, given the arm's --model)",
        {
            "--validate": args.validate,
            "--estimator": args.estimator,
            "--options": args.options,
            "--payload-mass": args.payload_mass,
            "--deadband": args.deadband,
        },
    )
    if not args.model:
        raise ConfigError("--payload needs --model arm.json: the arm's model identified without the payload")
    _existing_files(args.data, "--data")
    layout = _identify_layout(args)
    from robotid_sim.identification import load_model
    from robotid_sim.identification.payload import identify_payload_from_logs, write_payload_run
    from robotid_sim.robot import load_robot
    from robotid_sim.run_folder import output_root

    output_root(args.out)  # writable, before any work
    robot = load_robot(args.robot, sidecar=args.sidecar, lock_joints=_lock_joints(args.lock_joint) or None)
    model = load_model(args.model, robot)
    estimate = identify_payload_from_logs(
        model,
        [{**layout, "path": path} for path in args.data],
        robot.structure(),
        lowpass_hz=args.lowpass,
        differentiate=args.differentiate,
    )
    run_dir = write_payload_run(estimate, args.out, args.name, list(args.data), Path(args.model).name)
    com, std = estimate.center_of_mass, estimate.center_of_mass_std
    _out().print(f"payload mass: {estimate.mass:.6g} ± {estimate.std[9]:.2g} kg")
    shown = ", ".join(f"{c:.4g} ± {s:.2g}" for c, s in zip(com, std, strict=True))
    _out().print(f"centre of mass at the flange: ({shown}) m")
    violations = estimate.violations()
    _out().print("physically consistent" if not violations else "NOT physically consistent: " + "; ".join(violations))
    _out().print(estimate.result_summary())
    _out().print(f"[bold green]run folder[/] {run_dir}")
    return 0


#: the controllers ``closed-loop`` compares without ``--controller``
DEFAULT_CLOSED_LOOP_CONTROLLERS = ("pid", "feedforward", "computed_torque")


def _controller_entry(text: str) -> dict:
    """``--controller [LABEL=]NAME[:{json options}]`` as a closed-loop controller entry."""
    head, _, options = text.partition(":")
    label, equals, name = head.rpartition("=")
    if not name.strip() or (equals and not label.strip()):
        raise ConfigError(
            f"--controller {text!r}: write [LABEL=]NAME[:JSON], e.g. pid, 'pid:{{\"ki\": 0}}' or "
            "'pd_g=pd:{\"gravity_compensation\": true}'"
        )
    entry = {"name": name.strip(), "options": _json_options(options, f"--controller {head}", "options", '{"ki": 0}')}
    return entry | ({"label": label.strip()} if equals else {})


def cmd_closed_loop(args) -> int:
    # every argument is checked (and the study prepared) before the first step is simulated
    _positive(args.duration, "--duration", "s")
    reference: Any = "default"
    if args.reference != "default":
        reference = _yaml_file(
            args.reference, "--reference", "an excitation mapping with a 'type'", "'type: fourier'", ""
        )
    study = {
        "name": args.name,
        "robot": args.robot,
        "sidecar": args.sidecar,
        "lock_joints": _lock_joints(args.lock_joint),
        "closed_loop": {
            "controllers": [_controller_entry(text) for text in args.controller or DEFAULT_CLOSED_LOOP_CONTROLLERS],
            "model": args.model,
            "plant": args.plant,
            "friction": not args.no_friction,
            "reference": reference,
            "duration": args.duration,
        },
    }
    from robotid_sim.scenario import parse_closed_loop_study, prepare_closed_loop_study
    from robotid_sim.studies import load_run_result, run_closed_loop_study

    plan = prepare_closed_loop_study(parse_closed_loop_study(study, "closed-loop"))
    with _Bars(_progress()) as bars:
        run_dir = run_closed_loop_study(plan, out_dir=args.out, progress=bars)
    _print_tables(load_run_result(run_dir))
    _print_run_folder(run_dir)
    return 0


def cmd_rl_demo(args) -> int:
    # run_rl_demo / run_rl_compare check the numbers, the seed and the size (naming the flags), then the extra,
    # before any work
    if args.compare:
        return _rl_compare(args)
    from robotid_sim.studies import run_rl_demo

    with _Bars(_progress()) as bars:
        run_dir = run_rl_demo(
            args.out,
            robot=args.robot,
            estimator=args.estimator,
            **_given(timesteps=args.timesteps, num_envs=args.envs),
            episodes=args.episodes,
            seed=args.seed,
            parameter_draws=args.parameter_draws,
            progress=bars,
            allow_large=args.allow_large,
        )
    from rich.table import Table

    metrics = json.loads((run_dir / "metrics.json").read_text())
    table = Table(title=f"RL sim-to-sim demo ({metrics['robot']}, {metrics['timesteps']:,} PPO steps)")
    for column in ("env", "success", "median final error [rad]", "90th pct [rad]", "mean return"):
        table.add_column(column)
    for env, row in metrics["summary"].items():
        table.add_row(
            env,
            f"{row['success_rate']:.0%}",
            f"{row['median_final_error']:.4f}",
            f"{row['p90_final_error']:.4f}",
            f"{row['mean_return']:.1f}",
        )
    _out().print(table)
    _out().print(f"sim-to-sim gap (truth / identified, median final error): {metrics['gap']:.3f}x")
    _print_run_folder(run_dir)
    return 0


def _given(**options) -> dict:
    """The options given on the command line (not None): the others keep the study's defaults."""
    return {key: value for key, value in options.items() if value is not None}


def _rl_compare(args) -> int:
    from robotid_sim.studies.rl_compare import comparison_table, load_compare_result, run_rl_compare

    with _Bars(_progress()) as bars:
        run_dir = run_rl_compare(
            args.out,
            robot=args.robot,
            estimator=args.estimator,
            **_given(timesteps=args.timesteps, num_envs=args.envs),
            seeds=args.seeds,
            episodes=args.episodes,
            seed=args.seed,
            workers=args.workers,
            progress=bars,
            allow_large=args.allow_large,
        )
    _out().print(comparison_table(load_compare_result(run_dir)))
    _print_run_folder(run_dir)
    return 0


def cmd_export(args) -> int:
    from robotid_sim.identification import load_model
    from robotid_sim.identification.export import export_model

    model = load_model(args.model)  # export_model checks the targets before the program is solved
    done = export_model(model, args.urdf, args.mjcf, robot=args.robot, sidecar=args.sidecar, overwrite=args.overwrite)
    for path in done.paths:
        _out().print(f"wrote {path}")
    for note in done.notes:
        _out().print(f"[dim]{note}[/]")
    return 0


def cmd_plugins(args) -> int:
    from robotid_sim.plugins import list_plugins

    infos = list_plugins()
    if getattr(args, "json", False):
        print(json.dumps(_plugins_document(infos), indent=2))
        return 0

    from rich.table import Table

    from robotid_sim.hookspecs import PLUGIN_API_VERSION

    table = Table(title=f"robotid_sim plugins (plugin API {PLUGIN_API_VERSION})")
    for col in ("plugin", "package", "version", "api", "registers", "status"):
        table.add_column(col)
    for info in infos:
        status = "[green]ok[/]" if info.status == "ok" else "[red]broken[/]"
        table.add_row(
            info.name,
            info.distribution or "",
            info.version or "",
            info.api_version or "",
            _registers(info.registers),
            status,
        )
    _out().print(table)
    for info in infos:
        if not info.ok:
            _out().print(f"[red]broken[/] plugin '{info.name}' ({info.module}): {info.error}", soft_wrap=True)
    return 0


def _plugins_document(infos) -> dict:
    """``robotid-sim plugins --json``: the plugin API version and one object per plugin."""
    from robotid_sim.hookspecs import PLUGIN_API_VERSION

    rows = []
    for info in infos:
        registers: dict[str, list[str]] = {}
        for entry in info.registers:
            kind, _, name = entry.rpartition(" ")
            registers.setdefault(kind, []).append(name)
        rows.append(
            {
                "name": info.name,
                "kinds": list(registers),
                "registers": registers,
                "distribution": info.distribution,
                "version": info.version,
                "module": info.module,
                "path": info.path,
                "source": info.source,
                "builtin": info.builtin,
                "api_version": info.api_version,
                "hooks": list(info.hooks),
                "status": info.status,
                "error": info.error,
            }
        )
    return {"plugin_api_version": PLUGIN_API_VERSION, "plugins": rows}


def cmd_plugin_new(args) -> int:
    from robotid_sim.plugin_kit import new_plugin

    folder = new_plugin(args.name, kind=args.kind, out=args.out)
    _out().print(
        f"wrote the {args.kind} plugin '{args.name}' in {folder}", soft_wrap=True, highlight=False, markup=False
    )
    _out().print(
        f"  next: pip install -e '{folder}[test]' && robotid-sim plugins && python -m pytest {folder}",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )
    return 0


def _registers(entries) -> str:
    """'estimator ols', 'excitation fourier', ... grouped by kind: 'excitation: fourier, hold'."""
    kinds: dict[str, list[str]] = {}
    for entry in entries:
        kind, _, name = entry.rpartition(" ")
        kinds.setdefault(kind, []).append(name)
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in kinds.items())


def cmd_report(args) -> int:
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        what = "is a file, not a run folder" if run_dir.exists() else "does not exist"
        raise DataError(f"'{run_dir}' {what}; give a run folder written by 'robotid-sim run'")

    from robotid_sim.studies import load_run_result

    try:
        result = load_run_result(run_dir)
    except RobotIdError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, UnicodeDecodeError) as exc:
        # the files of a run folder are user input: a damaged one is named, not a crash
        raise DataError(
            f"run folder '{run_dir}' is damaged or was not written by this robotid_sim ({type(exc).__name__}: "
            f"{exc}); run the scenario again"
        ) from None
    _print_tables(result)
    for name in ("report.md", "report.html"):
        if (run_dir / name).exists():
            _out().print(f"  {run_dir / name}")
    return 0


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line ``error: ...`` naming the flag and the fix (exit code 2).

    argparse's own errors print the usage (5–8 lines) and ``robotid-sim identify: error: ...``; here the
    message names the command's ``--help`` instead. ``--help`` itself is unchanged.
    """

    def error(self, message: str):
        message = re.sub(r"invalid (\w+) value: ", lambda m: f"expected {_TYPE_WORDS.get(m[1], m[1])}, got ", message)
        if message.startswith("the following arguments are required:"):
            for action in self._actions:  # a missing command is named by its choices, not by its dest
                if isinstance(action.choices, dict) and action.dest:
                    message = message.replace(action.dest, f"a command ({', '.join(action.choices)})")
        _print_error(f"{message}; see '{self.prog} --help'")
        sys.exit(EXIT_USER_ERROR)

    def parse_known_args(self, args=None, namespace=None):
        # the innermost command parser records itself, so that leftover arguments are named with its --help
        namespace, extras = super().parse_known_args(args, namespace)
        if not hasattr(namespace, _COMMAND_PARSER):
            setattr(namespace, _COMMAND_PARSER, self)
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        command_parser = vars(namespace).pop(_COMMAND_PARSER, self)
        if extras:
            command_parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace


#: the attribute of the parsed namespace naming the parser of the command given (removed before it is returned)
_COMMAND_PARSER = "command_parser"
#: argparse's type names, as an error message says them
_TYPE_WORDS = {"int": "a whole number", "float": "a number"}


def _deadband(text: str) -> float:
    """``--deadband``: one finite number >= 0 (rad/s or m/s), the same for every joint."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            f"expected one finite number >= 0 in rad/s (m/s for a prismatic joint), the same for every joint, "
            f"got {text!r}; per-joint values go in a scenario's identification.velocity_deadband"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="robotid-sim",
        description="Robot dynamic-parameter identification, simulation first.",
        epilog="A user error prints one line 'error: ...' and exits with code 2; --debug shows tracebacks.",
    )
    _global_flags(parser, False)
    # the same flags after the command name ('robotid-sim simulate ... --debug'); SUPPRESS keeps the global value
    common = _Parser(add_help=False)
    _global_flags(common, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser = functools.partial(sub.add_parser, parents=[common])

    _add_run_and_simulate(add_parser)
    _add_identify(add_parser)
    _add_closed_loop(add_parser)
    _add_rl_demo(add_parser)
    _add_export(add_parser)
    _add_plugins_and_report(add_parser, common)
    add_sweep_parser(sub, parents=[common])
    return parser


def _add_run_and_simulate(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add the ``run`` and ``simulate`` commands."""
    p = add_parser("run", help="run a scenario (default: the bundled prrrp_seed004)")
    p.add_argument("scenario", nargs="?", help="scenario YAML path or bundled scenario name")
    p.add_argument("--out", default="runs", help="parent folder of the run folder (default: runs)")
    p.set_defaults(func=cmd_run)

    p = add_parser("simulate", help="simulate a robot and save the dataset (.npz, .csv or .mat)")
    _robot_flags(p)
    p.add_argument("--excitation", default="default", help="'default' or a YAML file with an excitation mapping")
    p.add_argument(
        "--noise",
        help="YAML file with a noise mapping, e.g. 'tau: {std: 0.5}'; without --noise there is no noise. An empty "
        "file is an error (a forgotten file must not mean 'no noise'): write '{}' for no noise explicitly",
    )
    p.add_argument("--duration", type=float, help="seconds to simulate, > 0 (default: the excitation's duration)")
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="recording rate in Hz, dividing the 1000 Hz physics rate (default 200)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the noise, a whole number >= 0 (default 0)")
    p.add_argument(
        "--closed-loop",
        metavar="PRESET",
        help="BIRDy's closed loop instead: the robot's PID (tx40, tx40_coupled) at 5 kHz on the noisy encoder, "
        "1 kHz samples, BIRDy's preprocessing; PRESET is a BIRDy noise preset (lowPositionNoise, standardNoise, "
        "highPositionNoise, ...) or 'none'; --duration defaults to 10 s",
    )
    p.add_argument(
        "--prefilter",
        action="store_true",
        help="with --closed-loop: the zero-phase 4th-order Butterworth at 50 Hz first (BIRDy's '_f' variants)",
    )
    p.add_argument(
        "--allow-large",
        action="store_true",
        help="run a simulation estimated above 2 hours or half of this machine's RAM (never above the RAM)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output file (.npz, .csv or .mat; the suffix picks the format) in an existing folder; never overwritten",
    )
    p.set_defaults(func=cmd_simulate)


def _add_identify(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add the ``identify`` command."""
    p = add_parser(
        "identify",
        help="identify from recordings (simulated or a real robot's logs); with --validate, a whole study",
        description="Identify from one or more recordings, stacked as separate experiments. With --validate the "
        "models are evaluated on held-out recordings and a run folder with metrics, plots and a report is written "
        "under --out (default ./runs), like 'robotid-sim run' on a scenario with 'data:'.",
    )
    p.add_argument(
        "--data",
        action="append",
        required=True,
        help="identification recording (.npz/.csv/.mat, or a ROS bag: .bag/.mcap/.db3 or a rosbag2 folder); repeat",
    )
    p.add_argument("--validate", action="append", help="held-out recording for validation; repeat")
    _robot_flags(p)
    p.add_argument(
        "--layout",
        help="YAML of the recordings' layout, shared by every file: keys, units, joint_names, trim, decimate "
        "(robotid_sim.sim.logs.LogSource)",
    )
    p.add_argument(
        "--topic",
        action="append",
        help="ROS bags: the sensor_msgs/JointState topic (default: the bag's only one); repeat to merge topics, e.g. "
        "efforts published apart (each signal from the first topic that carries it)",
    )
    p.add_argument("--estimator", action="append", help="estimator name (default wls); repeat to compare")
    p.add_argument("--options", help="estimator options as JSON, e.g. '{\"threshold\": 8}'")
    p.add_argument("--lowpass", type=float, help="zero-phase low-pass (Hz) on q, qd, tau within each recording")
    p.add_argument("--differentiate", action="store_true", help="qd, qdd from q by central differences")
    p.add_argument("--deadband", type=_deadband, help="velocity dead-band (rad/s or m/s) of the Coulomb terms")
    p.add_argument(
        "--payload-mass",
        type=float,
        action=_PayloadMass,
        metavar="KG",
        help="the --data that follows carries a payload of this known mass: with a layout of 'drives: {gains: "
        "unknown}', the drive gains are estimated with the parameters (Gautier & Briot); repeat per loaded recording",
    )
    p.add_argument(
        "--payload",
        action="store_true",
        help="identify the payload the --data recordings carry (mass, COM, inertia at the flange), given --model",
    )
    p.add_argument("--model", help="with --payload: the arm's saved model (identify --out), identified without it")
    p.add_argument("--name", default="identify", help="study name, used in the run folder's name")
    p.add_argument(
        "--online",
        action="store_true",
        help="filters (ekf, ukf, cdkf, sr_*, pf): consume the samples one at a time and print the estimate as it "
        "converges",
    )
    p.add_argument(
        "--out",
        help="with --validate or --payload: parent folder of the run folder (default ./runs); without: save the "
        "model as JSON here (its arrays go to the .npz beside it; neither file may exist)",
    )
    p.set_defaults(func=cmd_identify)


def _add_closed_loop(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add the ``closed-loop`` command."""
    p = add_parser(
        "closed-loop",
        help="track a reference with controllers on the PyBullet truth or a model; η = mean |e| per joint",
        description="Drive the robot (PyBullet, friction included) or an identified model along a reference with "
        "each controller, and compare the tracking error η_i = mean |q_ref - q| per joint in degrees (seed 000 "
        "Fig. 15). Writes a run folder under --out with metrics.json, a tracking-error plot and a report.",
    )
    _robot_flags(p)
    p.add_argument(
        "--controller",
        action="append",
        metavar="[LABEL=]NAME[:JSON]",
        help='controller and its options, e.g. pid or \'feedforward:{"model": "m.json", "ki": 0}\'; LABEL= names it '
        "in the table (to compare one controller under two settings); repeat to compare (default: "
        f"{', '.join(DEFAULT_CLOSED_LOOP_CONTROLLERS)})",
    )
    p.add_argument(
        "--model",
        help="saved model (identify --out) of every controller that takes a model and names none; 'CAD' for the "
        "robot's own parameters (default: the plant's own model, i.e. the truth)",
    )
    p.add_argument("--plant", default="pybullet", help="'pybullet' (default), or a saved model to close the loop on")
    p.add_argument("--no-friction", action="store_true", help="simulate the PyBullet plant without its friction")
    p.add_argument("--reference", default="default", help="'default' or a YAML file with an excitation mapping")
    p.add_argument("--duration", type=float, help="seconds per controller, > 0 (default: the reference's duration)")
    p.add_argument("--name", default="closed_loop", help="study name, used in the run folder's name")
    p.add_argument("--out", default="runs", help="parent folder of the run folder (default: runs)")
    p.set_defaults(func=cmd_closed_loop)


def _add_rl_demo(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add the ``rl-demo`` command."""
    p = add_parser(
        "rl-demo",
        help="train PPO on an identified model's reach env, evaluate it on the PyBullet truth (needs the rl extra)",
        description="Identify a model from noisy simulated data, train Stable-Baselines3's PPO on "
        "robotid_sim/IdentifiedArm-v0 (reach) and evaluate the policy on the identified env and on "
        "robotid_sim/PyBulletArm-v0: success rate, return and final joint error on both, i.e. the sim-to-sim "
        "gap. With --compare, policies trained on the truth, on identified models and on a CAD model are all "
        "evaluated on the truth. Needs pip install 'robotid-sim[rl]'. Writes a run folder under --out with "
        "metrics.json, plots and a report.",
    )
    p.add_argument("--robot", default="planar3r", help="bundled robot name or URDF path (default: planar3r)")
    p.add_argument("--estimator", default="lmi_wls", help="estimator of the training model (default: lmi_wls)")
    p.add_argument(
        "--timesteps",
        type=int,
        default=None,
        help="PPO environment steps per policy (default: 2,500,000; with --compare 1,000,000)",
    )
    p.add_argument("--envs", type=int, default=None, help="copies in the vector env (default: the recipe's 64)")
    p.add_argument("--episodes", type=int, default=50, help="evaluation episodes per env or policy (default: 50)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the data, the training and the episodes, a whole number >= 0"
    )
    p.add_argument(
        "--parameter-draws",
        choices=["covariance"],
        default=None,
        help="train with the identified parameters drawn from the model's covariance at every reset",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="train policies on the truth, identified models (with and without covariance draws, good and poor "
        "data) and a CAD model, evaluate all on the truth",
    )
    p.add_argument("--seeds", type=int, default=3, help="with --compare: training seeds per policy (default: 3)")
    p.add_argument(
        "--workers", type=int, default=1, help="with --compare: trainings at once, one process each (default: 1)"
    )
    p.add_argument(
        "--allow-large",
        action="store_true",
        help="run a demo estimated above 2 hours or half of this machine's RAM (never above the RAM)",
    )
    p.add_argument("--out", default="runs", help="parent folder of the run folder (default: runs)")
    p.set_defaults(func=cmd_rl_demo)


def _add_export(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add the ``export`` command."""
    p = add_parser(
        "export",
        help="write an identified model as URDF (with its sidecar) and/or MuJoCo MJCF",
        description="Write a saved model (identify --out) for other simulators: a physically consistent full "
        "standard parameter set (a base-parameter model: the one closest to the robot's CAD values that "
        "reproduces its base parameters) as URDF, with a sidecar OUT.yaml beside it for what URDF cannot hold "
        "(rotor inertia, the whole friction law, limits), and/or as MJCF. Existing files are never overwritten "
        "without --overwrite.",
    )
    p.add_argument("model", help="saved model (.json, its .npz beside it)")
    p.add_argument("--urdf", help="URDF file to write (.urdf); its sidecar goes beside it (.yaml)")
    p.add_argument("--mjcf", help="MuJoCo MJCF file to write (.xml)")
    p.add_argument(
        "--robot",
        help="the robot's CAD model (bundled name or URDF path) a base-parameter model stays closest to "
        "(default: the bundled robot the model was identified on)",
    )
    p.add_argument("--sidecar", help="YAML sidecar of the --robot URDF")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.set_defaults(func=cmd_export)


def _add_plugins_and_report(
    add_parser: Callable[..., argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``plugins``, ``plugin new`` and ``report`` commands."""
    from robotid_sim.plugin_kit import PLUGIN_KINDS  # the standard library only

    p = add_parser("plugins", help="list installed plugins, their package, plugin-API version and status")
    p.add_argument(
        "--json",
        action="store_true",
        help="print JSON for tools: {plugin_api_version, plugins: [{name, kinds, registers, distribution, version, "
        "module, path, source, builtin, api_version, hooks, status, error}]}",
    )
    p.set_defaults(func=cmd_plugins)

    p = add_parser("plugin", help="plugin development kit: 'plugin new NAME' writes a ready-to-install plugin package")
    plugin_sub = p.add_subparsers(dest="plugin_command", required=True)
    p = plugin_sub.add_parser(
        "new",
        parents=[common],
        help="write a new plugin package (pyproject with the entry point, a working skeleton, tests, README)",
        description="Write the folder robotid-sim-NAME/ under --out: a pip-installable robotid_sim plugin package "
        "with its entry point, a skeleton that already works (an estimator: least squares; a controller: PD with "
        "gravity compensation; an excitation: a random Fourier series; a noise model: offset plus white noise), "
        "tests that pass and a README. An existing folder is never overwritten.",
    )
    p.add_argument("name", help="plugin name: lower-case letters, digits and '_', starting with a letter (my_ridge)")
    p.add_argument(
        "--kind",
        choices=list(PLUGIN_KINDS),
        default="estimator",
        help="what the plugin provides (default: estimator)",
    )
    p.add_argument("--out", default=".", help="folder to write robotid-sim-NAME/ in (default: the current folder)")
    p.set_defaults(func=cmd_plugin_new)

    p = add_parser("report", help="show the results of a run folder")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_report)


def add_sweep_parser(subparsers, parents: Sequence[argparse.ArgumentParser] = ()) -> argparse.ArgumentParser:
    """Add the ``sweep`` command to ``subparsers`` (the result of ``parser.add_subparsers()``)."""
    p = subparsers.add_parser(
        "sweep",
        parents=list(parents),
        help="Monte Carlo sweep: robots × excitations × noise × estimators × repetitions (resumable)",
        description=(
            "Run a sweep file (or a bundled sweep: small, birdy) into <out>/<output>; running it again, or with "
            "--resume RUN_DIR, runs only the tasks not yet done. Writes results.parquet/.csv, summary.csv, "
            "crb.csv, box plots and report.md/.html. Ctrl-C or SIGTERM stops it, keeping every finished task, and "
            "prints the --resume command that finishes it."
        ),
    )
    p.add_argument("sweep", nargs="?", help="sweep YAML file or bundled sweep name (omit with --resume)")
    p.add_argument("--out", default=None, help="parent folder of the sweep's folder (default: runs/sweeps)")
    p.add_argument("--resume", metavar="RUN_DIR", default=None, help="complete the sweep in this folder")
    p.add_argument("--executor", choices=("local", "dask"), default="local", help="local processes (default) or Dask")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--address", default=None, help="Dask scheduler address (tcp://host:8786); default: a local cluster")
    p.add_argument("--max-tasks", type=int, default=None, help="run at most this many tasks now (resume later)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_sweep_command)
    return p


def run_sweep_command(args: argparse.Namespace) -> int:
    """``robotid-sim sweep``: run the sweep the arguments name (:func:`robotid_sim.studies.run_sweep`) and print
    where the results are. A user error prints one line ``error: ...``; returns the exit code."""
    if args.sweep is None and args.resume is None:
        _print_error("give a sweep file or a bundled sweep name (small, birdy), or --resume RUN_DIR")
        return EXIT_USER_ERROR
    from robotid_sim.sweep import SweepInterrupted

    try:
        outcome = _run_sweep(args)
    except (RobotIdError, OSError) as exc:
        _print_error(_user_error_message(exc) or str(exc))
        return EXIT_USER_ERROR
    except SweepInterrupted as stop:
        import signal

        for signum in (signal.SIGINT, signal.SIGTERM):  # the command is ending: a late Ctrl-C cannot cut it short
            signal.signal(signum, signal.SIG_IGN)
        print(str(stop), file=sys.stderr, flush=True)
        return stop.status
    table = outcome.tables.get("results_parquet", outcome.tables["results"])
    print(
        f"sweep folder: {outcome.run_dir}\n"
        f"tasks: {outcome.tasks} ({outcome.reused} done before, {outcome.ran} run now in {outcome.seconds:.1f} s, "
        f"{outcome.failed} failed, {outcome.missing} still to run)\n"
        f"report: {outcome.tables['markdown']}  table: {table}"
    )
    if "results_parquet" not in outcome.tables:
        from robotid_sim.sweep.aggregate import PARQUET_HINT

        print(f"note: CSV only; {PARQUET_HINT}")
    return 0


def _run_sweep(args: argparse.Namespace):
    from robotid_sim.studies import run_sweep

    kwargs = {
        "resume": args.resume,
        "executor": args.executor,
        "workers": args.workers,
        "address": args.address,
        "max_tasks": args.max_tasks,
    }
    if args.no_progress or not sys.stderr.isatty():
        return run_sweep(args.sweep, args.out, **kwargs)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=_err(),
        transient=False,
    )
    with _Bars(bar) as bars:
        return run_sweep(args.sweep, args.out, progress=bars, **kwargs)


def _robot_flags(parser: argparse.ArgumentParser) -> None:
    """--robot, --sidecar and --lock-joint, as every command that loads a robot takes them."""
    parser.add_argument("--robot", required=True, help="bundled robot name or URDF path")
    parser.add_argument(
        "--sidecar",
        help="YAML sidecar for the URDF (friction, rotor inertia, limits); default: the robot's own; 'none': none",
    )
    parser.add_argument(
        "--lock-joint", action="append", metavar="NAME=VALUE", help="make a joint fixed at VALUE (rad or m); repeat"
    )


def _global_flags(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="log progress details and show PyBullet's console output",
    )
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show the full traceback of any error (for bug reports)"
    )


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _print_error(message: str) -> None:
    line = _one_line(message)
    if sys.stderr.isatty():
        from rich.markup import escape

        _err().print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
    else:
        print(f"error: {line}", file=sys.stderr, flush=True)


#: the fix an OSError's errno calls for, after its own words
_OS_ERROR_FIXES = {
    errno.ENOSPC: "; free some space or choose another output folder (--out)",
    errno.EACCES: "; choose a folder you may write in (--out), or a file you may read",
    errno.EPERM: "; choose a folder you may write in (--out), or a file you may read",
    errno.EROFS: "; the file system is read-only: choose another output folder (--out)",
    errno.ENOENT: "; check the path (its folder must exist)",
}


def _user_error_message(exc: BaseException) -> str | None:
    """The one-line message of an exception that is the user's input, not a bug; None for a bug."""
    if isinstance(exc, RobotIdError):
        return str(exc)
    if isinstance(exc, OSError):  # a path given by the user: missing, unreadable, unwritable, disk full
        where = f" '{exc.filename}'" if exc.filename else ""
        fix = _OS_ERROR_FIXES.get(exc.errno, "")
        return f"cannot access{where}: {exc.strerror or exc}{fix}"
    if isinstance(exc, MemoryError):
        return "ran out of memory; use a shorter duration, a lower rate or a smaller robot"
    return None


def main(argv: list[str] | None = None) -> int:
    quiet_thread_pools()  # before NumPy and numba start their thread pools
    args = build_parser().parse_args(argv)
    debug = bool(getattr(args, "debug", False))
    verbose = bool(getattr(args, "verbose", False))
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        if verbose:  # PyBullet's console output is silenced unless asked for
            from robotid_sim.sim.pybullet_sim import set_verbose

            set_verbose(True)
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        message = _user_error_message(exc)
        if debug:
            traceback.print_exc()
        if message is not None:
            _print_error(message)
            return EXIT_USER_ERROR
        hint = "" if debug else "; run again with --debug to see the traceback"
        _print_error(
            f"internal error, this is a bug in robotid-sim ({type(exc).__name__}: {exc}); please report it{hint}"
        )
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())

"""``robotid-sim`` command line: parses arguments, calls the API, prints. No logic lives here.

Start-up is kept short (``robotid-sim --help`` must not wait for the numerical stack): this module imports
only the standard library and :mod:`robotid_sim.errors`; rich, NumPy and the rest of the package are imported
by the command that needs them.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robotid_sim.errors import RobotIdError

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
    """Maps the runner's progress(task, done, total) calls onto rich progress bars."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.tasks: dict[str, int] = {}

    def __call__(self, label: str, done: int, total: int) -> None:
        if label not in self.tasks:
            self.tasks[label] = self.progress.add_task(label, total=total)
        self.progress.update(self.tasks[label], completed=done, total=total)


def cmd_run(args) -> int:
    from robotid_sim.report.tables import rich_comparison_table
    from robotid_sim.scenario import load_run_result, resolve_scenario_path, run_scenario

    path = resolve_scenario_path(args.scenario)
    _out().print(f"[bold]scenario[/] {path}")
    with _progress() as progress:
        run_dir = run_scenario(path, out_dir=args.out, progress=_Bars(progress))
    _out().print(rich_comparison_table(load_run_result(run_dir)))
    _out().print(f"[bold green]run folder[/] {run_dir}")
    _out().print(f"  report: {run_dir / 'report.html'}  |  {run_dir / 'report.md'}")
    return 0


def cmd_simulate(args) -> int:
    import yaml

    import robotid_sim as rid

    robot = rid.load_robot(args.robot)
    excitation = "default" if args.excitation == "default" else yaml.safe_load(Path(args.excitation).read_text())
    noise = yaml.safe_load(Path(args.noise).read_text()) if args.noise else None
    with _progress() as progress:
        bars = _Bars(progress)
        ds = rid.simulate(
            robot,
            excitation,
            duration=args.duration,
            noise=noise,
            seed=args.seed,
            rate_hz=args.rate,
            progress=lambda done, total: bars("simulate", done, total),
        )
    out = ds.save(args.out)
    _out().print(f"wrote {out} ({ds.n_samples} samples, {ds.n_dof} joints)")
    return 0


def cmd_identify(args) -> int:
    from rich.table import Table

    import robotid_sim as rid

    options = json.loads(args.options) if args.options else {}
    ds = rid.load_dataset(args.data)
    model = rid.identify(ds, args.robot, estimator=args.estimator, **options)
    table = Table(title=f"{args.estimator} on {args.data}")
    for col in ("parameter", "value", "std"):
        table.add_column(col, justify="right" if col != "parameter" else "left")
    names, values, std = model.parameter_table()
    for k, (name, value) in enumerate(zip(names, values, strict=True)):
        table.add_row(name, f"{value:.6g}", "" if std is None else f"{std[k]:.3g}")
    _out().print(table)
    if args.out:
        _out().print(f"wrote {model.save(args.out)}")
    return 0


def cmd_plugins(args) -> int:
    from rich.table import Table

    from robotid_sim.plugins import list_plugins

    table = Table(title="robotid_sim plugins")
    for col in ("plugin", "package", "version", "registers", "status"):
        table.add_column(col)
    infos = list_plugins()
    for info in infos:
        status = "[green]ok[/]" if info.status == "ok" else "[red]broken[/]"
        table.add_row(info.name, info.distribution or "", info.version or "", _registers(info.registers), status)
    _out().print(table)
    for info in infos:
        if not info.ok:
            _out().print(f"[red]broken[/] plugin '{info.name}' ({info.module}): {info.error}", soft_wrap=True)
    return 0


def _registers(entries) -> str:
    """'estimator ols', 'excitation fourier', ... grouped by kind: 'excitation: fourier, hold'."""
    kinds: dict[str, list[str]] = {}
    for entry in entries:
        kind, _, name = entry.rpartition(" ")
        kinds.setdefault(kind, []).append(name)
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in kinds.items())


def cmd_report(args) -> int:
    from robotid_sim.report.tables import rich_comparison_table
    from robotid_sim.scenario import load_run_result

    run_dir = Path(args.run_dir)
    _out().print(rich_comparison_table(load_run_result(run_dir)))
    for name in ("report.md", "report.html"):
        if (run_dir / name).exists():
            _out().print(f"  {run_dir / name}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="robotid-sim", description="Robot dynamic-parameter identification, simulation first."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a scenario (default: the bundled prrrp_seed004)")
    p.add_argument("scenario", nargs="?", help="scenario YAML path or bundled scenario name")
    p.add_argument("--out", default="runs", help="parent folder of the run folder (default: runs)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("simulate", help="simulate a robot and save the dataset (.npz, .csv or .mat)")
    p.add_argument("--robot", required=True, help="bundled robot name or URDF path")
    p.add_argument("--excitation", default="default", help="'default' or a YAML file with an excitation mapping")
    p.add_argument("--noise", help="YAML file with a noise mapping")
    p.add_argument("--duration", type=float)
    p.add_argument("--rate", type=float, default=200.0, help="recording rate in Hz")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output file; the suffix picks the format")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("identify", help="identify a model from a data file")
    p.add_argument("--data", required=True, help=".npz, .csv or .mat dataset")
    p.add_argument("--robot", required=True, help="bundled robot name or URDF path")
    p.add_argument("--estimator", default="wls")
    p.add_argument("--options", help="estimator options as JSON, e.g. '{\"threshold\": 8}'")
    p.add_argument("--out", help="save the model as JSON here")
    p.set_defaults(func=cmd_identify)

    p = sub.add_parser("plugins", help="list installed plugins, their package and status")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("report", help="show the results of a run folder")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return args.func(args)
    except RobotIdError as exc:
        _err().print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        _err().print("[red]interrupted[/]")
        return 130


if __name__ == "__main__":
    sys.exit(main())

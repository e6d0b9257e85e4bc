"""Start-up cost: ``import robotid_sim`` and ``robotid-sim --help``, each in fresh processes.

    python benchmarks/startup.py [--runs 15] [--stages] [--src DIR] [--json]

Figures (medians over ``--runs`` fresh processes, after one discarded warm-up run):

- ``import robotid_sim`` (importtime): the cumulative time of the top-level ``robotid_sim`` line of
  ``python -X importtime -c "import robotid_sim"``, i.e. the import alone, without interpreter start-up;
- ``import robotid_sim`` (wall): the whole ``python -c "import robotid_sim"`` process, next to the
  wall time of ``python -c pass`` (the interpreter and site start-up every process pays anyway);
- ``robotid-sim --help`` (wall): the installed console script (``python -m robotid_sim.cli --help``
  when the script is not installed).

``--stages`` adds the importtime of the modules a worker loads on first use (``robotid_sim.robot`` for
``load_robot``, ``robotid_sim.sim.simulate`` for ``simulate``, ...) and the third-party packages inside them,
to show where the remaining cost is. ``--src DIR`` puts DIR first on PYTHONPATH, to measure another
checkout of the project (e.g. ``git worktree add /tmp/old <commit>``) with this environment.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|( *)(\S+)\s*$")

#: modules loaded on first use of a stage, as a worker process would
STAGES = {
    "robotid_sim.robot (load_robot)": "robotid_sim.robot",
    "robotid_sim.sim.dataset (Dataset, load_dataset)": "robotid_sim.sim.dataset",
    "robotid_sim.sim.simulate (simulate)": "robotid_sim.sim.simulate",
    "robotid_sim.identification (identify)": "robotid_sim.identification",
    "robotid_sim.plugins (get_estimator)": "robotid_sim.plugins",
    "robotid_sim.excitation.optimize (optimize_fourier)": "robotid_sim.excitation.optimize",
    "robotid_sim.report (write_report, no figure yet)": "robotid_sim.report",
    "robotid_sim.studies.run (run_scenario)": "robotid_sim.studies.run",
}
#: third-party imports worth naming when they appear in a stage
HEAVY = (
    "numpy",
    "scipy",
    "scipy.linalg",
    "scipy.io",
    "scipy.optimize",
    "scipy.signal",
    "scipy.stats",
    "sympy",
    "pydantic",
    "yaml",
    "pybullet",
    "matplotlib",
    "torch",
    "cvxpy",
    "sklearn",
    "numba",
    "gymnasium",
    "rich",
)


def _env(src: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    # from a neutral folder: with ``-c`` the working directory comes first on sys.path, before --src
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, proc.stderr


def importtime(stderr: str) -> dict[str, tuple[float, int]]:
    """Module -> (cumulative seconds, nesting depth) from a ``-X importtime`` report (first import only)."""
    out: dict[str, tuple[float, int]] = {}
    for line in stderr.splitlines():
        m = _LINE.match(line)
        if m and m.group(4) not in out:
            out[m.group(4)] = (int(m.group(2)) * 1e-6, (len(m.group(3)) - 1) // 2)
    return out


def _median(fn, runs: int) -> float:
    fn()  # warm-up: byte-compiles what changed, fills the OS file cache
    return statistics.median(fn() for _ in range(runs))


def _help_command() -> list[str]:
    script = Path(sys.executable).with_name("robotid-sim")
    if script.is_file():
        return [str(script), "--help"]
    found = shutil.which("robotid-sim")
    return [found, "--help"] if found else [sys.executable, "-m", "robotid_sim.cli", "--help"]


def measure(runs: int, src: Path | None) -> dict[str, float]:
    env = _env(src)
    py = sys.executable

    def import_cumulative() -> float:
        _, err = _run([py, "-X", "importtime", "-c", "import robotid_sim"], env)
        return importtime(err)["robotid_sim"][0]

    help_cmd = _help_command()
    return {
        "import_robotid_sim_importtime_s": _median(import_cumulative, runs),
        "import_robotid_sim_wall_s": _median(lambda: _run([py, "-c", "import robotid_sim"], env)[0], runs),
        "python_pass_wall_s": _median(lambda: _run([py, "-c", "pass"], env)[0], runs),
        "cli_help_wall_s": _median(lambda: _run(help_cmd, env)[0], runs),
        "cli_help_command": " ".join(Path(help_cmd[0]).name if k == 0 else c for k, c in enumerate(help_cmd)),
    }


def stages(runs: int, src: Path | None) -> dict[str, dict]:
    """Importtime of each stage's module imported right after ``import robotid_sim``, in a fresh process."""
    env = _env(src)
    out = {}
    for label, module in STAGES.items():
        reports = []
        for _ in range(runs + 1):
            _, err = _run([sys.executable, "-X", "importtime", "-c", f"import robotid_sim; import {module}"], env)
            reports.append(importtime(err))
        reports = reports[1:]
        total = statistics.median(r[module][0] for r in reports)
        inside = {
            name: statistics.median(r[name][0] for r in reports if name in r)
            for name in HEAVY
            if all(name in r for r in reports)
        }
        out[label] = {"module": module, "importtime_s": total, "third_party_s": inside}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per figure (median)")
    parser.add_argument("--stages", action="store_true", help="also time the first use of each stage")
    parser.add_argument("--src", type=Path, help="measure the checkout in this folder instead (PYTHONPATH)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    figures = measure(args.runs, args.src)
    if args.stages:
        figures["stages"] = stages(max(3, args.runs // 3), args.src)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"python {sys.version.split()[0]}, medians of {args.runs} fresh processes"
        + (f", source {args.src}" if args.src else "")
    )
    print(
        f"  import robotid_sim   importtime {figures['import_robotid_sim_importtime_s'] * 1e3:8.1f} ms   "
        f"(python -X importtime -c 'import robotid_sim', cumulative of the robotid_sim line)"
    )
    print(
        f"  import robotid_sim   wall       {figures['import_robotid_sim_wall_s'] * 1e3:8.1f} ms   "
        f"(python -c pass: {figures['python_pass_wall_s'] * 1e3:.1f} ms)"
    )
    print(f"  {figures['cli_help_command']:<20} wall       {figures['cli_help_wall_s'] * 1e3:8.1f} ms")
    for label, stage in figures.get("stages", {}).items():
        inside = ", ".join(
            f"{name} {t * 1e3:.0f}"
            for name, t in sorted(stage["third_party_s"].items(), key=lambda kv: -kv[1])
            if t >= 0.005
        )
        print(f"  then import {label:<52} {stage['importtime_s'] * 1e3:8.1f} ms   [{inside}]")


if __name__ == "__main__":
    main()

"""What identification is worth for RL (issue 28): ``robotid-sim rl-demo --compare`` at its full budget.

    python benchmarks/rl_compare.py [--timesteps 1000000] [--seeds 3] [--episodes 50] [--workers 2] [--out runs]

Trains PPO (the recipe of ``robotid_sim/studies/rl_training.py``) on planar3r's reach task with the same number
of env steps and the same seeds for each policy of ``robotid_sim.studies.rl_compare.POLICIES`` (the oracle on
the truth's own parameters; ``lmi_wls`` from 55 s of noisy data, with and without covariance draws; a CAD model
±20 %; ``lmi_wls`` from 10 s of poor data, with and without draws), evaluates each on the same episodes of
``PyBulletArm-v0`` with friction, and prints the table (mean success rate over seeds, median of the seeds'
median final errors with their range, mean return, training wall time; the oracle's projected on PyBullet
itself). The run folder (metrics, report, plots) is written under ``--out``. With ``--workers 2`` two trainings
run at once on the 2-core machine: their wall times are those of two trainings sharing the machine.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console

from robotid_sim.progress import Progress
from robotid_sim.studies.rl_compare import comparison_table, load_compare_result, run_rl_compare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="runs")
    args = parser.parse_args()
    start = time.perf_counter()

    def progress(stage: str, done: int, total: int) -> None:
        print(f"[{time.perf_counter() - start:6.0f} s] {stage} {done}/{total}", flush=True)

    report: Progress = progress
    run_dir = run_rl_compare(
        args.out,
        timesteps=args.timesteps,
        seeds=args.seeds,
        episodes=args.episodes,
        workers=args.workers,
        progress=report,
        allow_large=True,
    )
    Console(width=120).print(comparison_table(load_compare_result(run_dir)))
    print(f"run folder: {run_dir} ({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()

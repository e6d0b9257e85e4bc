"""A hyper9 recording on a jittery clock identifies like the same recording on an even one (issue 29, deliver 3).

    python benchmarks/jitter.py [--duration 25] [--lowpass 2] [--seed 0] [--differentiate] [--noise study|none]

hyper9 follows its default excitation (one 25 s period), simulated once noise-free at 1 kHz. Two logs are
taken from that one trajectory, both with N samples at 100 Hz on average and both written as CSV with only
``t``, ``q`` and ``tau`` columns:

* even: every 10th sample (10 ms steps);
* jittery: sample k is taken 10·k ms + L_k late, L_k a latency in whole ms: 0 to 3 ms mostly and, for 3 %
  of the samples, a delay of 10 to 20 ms that drains by at most 8 ms a sample (the queued samples then come
  2 ms apart), so the steps run from 2 to 30 ms, median 10 ms, and the log spans the same time.

Both get the same noise draws, sample for sample: the noise of the hyper9 study (scenarios/hyper9_seed001.yaml:
q, qd, qdd at 70/50/30 dB SNR, current noise, 0.5 % torque outliers), so that the two logs differ only by their
clocks; ``--noise none`` leaves it out (``simulate``'s default). Each is loaded with
:func:`robotid_sim.sim.logs.load_log` (qd and qdd derived on the stamps), low-passed (``--lowpass``, Hz;
``identify --lowpass``; the derived qd and qdd derived again from the filtered q), optionally differentiated
again (``--differentiate``) and identified with OLS.

Printed: the number of experiments each log loads as (1 each, else the gap rule failed), and over the base
parameters whose relative standard deviation is below 5 % the largest and the median relative difference to
the even log's estimate (the issue's acceptance: at most 2 %), also without the Stribeck fs parameters, for the
jittery log, for its naive treatment (its stamps replaced by an even 10 ms grid, i.e. a filter and differences
that count samples), and for the even log with another noise draw (how far two estimates from the same clock
differ by noise alone). Last, each estimate's relative error against the true base parameters, over the same
parameters: the jittery log is treated as well as an even one when it lands as close to the truth.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import yaml

import robotid_sim as rid
from robotid_sim.identification.evaluation import true_values_by_name
from robotid_sim.signal.preprocess import preprocess
from robotid_sim.sim.logs import experiments, load_log, per_experiment
from robotid_sim.sim.recordings import native_csv_header
from robotid_sim.sim.simulate import resolve_noise

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "hyper9_seed001.yaml"
#: the fine simulation's rate and the logs' mean step, in samples of it
FINE_HZ, STEP = 1000, 10


def jittery_indices(n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """Indices into the 1 kHz record of n_samples samples taken every 10 ms + a latency (module docstring)."""
    base = rng.integers(0, 4, n_samples)
    spikes = rng.random(n_samples) < 0.03
    base[spikes] = rng.integers(10, 21, int(spikes.sum()))
    base[[0, -1]] = 0
    drain = (STEP - 2) * np.arange(n_samples)  # L_k = max(L_{k-1} - 8, base_k), in closed form
    latency = np.maximum.accumulate(base + drain) - drain
    return STEP * np.arange(n_samples) + latency


def write_log(path: Path, t: np.ndarray, q: np.ndarray, tau: np.ndarray, joints: list[str]) -> Path:
    header = [h for h in native_csv_header(joints, False) if h == "t" or h.startswith(("q_", "tau_"))]
    np.savetxt(path, np.column_stack([t, q, tau]), delimiter=",", header=",".join(header), comments="")
    return path


def identified(path: Path, robot, lowpass: float, differentiate: bool):
    ds = load_log(path, robot)
    parts = len(experiments(ds))
    ds, _ = preprocess(
        ds, per_experiment=per_experiment, experiments=experiments, lowpass_hz=lowpass, differentiate=differentiate
    )
    return rid.identify(ds, robot, "ols"), parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=25.0)
    parser.add_argument("--lowpass", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--differentiate", action="store_true")
    parser.add_argument("--noise", choices=("study", "none"), default="study")
    args = parser.parse_args()
    robot = rid.load_robot("hyper9")
    start = time.perf_counter()
    fine = rid.simulate(robot, "default", duration=args.duration, rate_hz=FINE_HZ)
    n = (fine.n_samples - 1 - 20) // STEP  # room for the last latency
    even = STEP * np.arange(n)
    jittery = jittery_indices(n, np.random.default_rng(args.seed))
    steps_ms = np.diff(jittery)
    print(
        f"hyper9, {args.duration:g} s, {n} samples at 100 Hz; jittery steps {steps_ms.min()} to {steps_ms.max()} ms, "
        f"median {np.median(steps_ms):g} ms ({np.mean(steps_ms != STEP):.0%} not 10 ms); simulated in "
        f"{time.perf_counter() - start:.1f} s"
    )
    chain = resolve_noise(robot, yaml.safe_load(SCENARIO.read_text())["noise"] if args.noise == "study" else None)
    fit = functools.partial(identified, robot=robot, lowpass=args.lowpass, differentiate=args.differentiate)
    logs = [("even", even, even, 0), ("jittery", jittery, jittery, 0), ("jittery, stamps ignored", jittery, even, 0)]
    if args.noise == "study":
        logs.append(("even, another noise draw", even, even, 1))
    with TemporaryDirectory() as tmp:
        models = {}
        for k, (name, rows, stamps, draw) in enumerate(logs):
            truth = {s: getattr(fine.truth, s)[rows] for s in ("q", "qd", "qdd", "tau")}
            noisy = chain.apply(truth, np.random.default_rng(args.seed + draw))
            path = write_log(Path(tmp) / f"log{k}.csv", stamps / FINE_HZ, noisy["q"], noisy["tau"], robot.joint_names)
            models[name], parts = fit(path)
            print(f"{name}: {parts} experiment(s)")
    compare(models, args)
    against_truth(models, robot)


def against_truth(models: dict, robot) -> None:
    """How far each log's estimate is from the true base parameters, over the same parameters as :func:`compare`:
    the clock's treatment is as good as the even clock's when the jittery log lands as close to the truth."""
    reference = models["even"]
    kept = reference.std / np.abs(reference.values) < 0.05
    true = true_values_by_name(robot.base_parameters(), reference.parameter_names)
    for name, model in models.items():
        error = np.abs(model.values - true) / np.abs(true)
        worst = int(np.flatnonzero(kept)[np.argmax(error[kept])])
        print(
            f"{name} against the truth: largest relative error {error[kept].max():.2%} "
            f"({reference.parameter_names[worst]}), median {np.median(error[kept]):.3%}"
        )


def compare(models: dict, args) -> None:
    """The largest and median relative differences to the even log's estimate, over its base parameters with a
    relative standard deviation below 5 %, and over those without the Stribeck fs (the most sensitive: their
    regressor columns change by their whole size within 0.01 rad/s of rest)."""
    reference = models["even"]
    rel_std = reference.std / np.abs(reference.values)
    kept = rel_std < 0.05
    inertial = kept & np.array([not name.startswith("fs") for name in reference.parameter_names])
    print(
        f"low-pass {args.lowpass:g} Hz{', qd/qdd differentiated again' if args.differentiate else ''}; "
        f"{int(kept.sum())} of {kept.size} base parameters with relative std < 5 % on the even log "
        f"({int(inertial.sum())} without fs)"
    )
    for name, model in models.items():
        if name == "even":
            continue
        diff = np.abs(model.values - reference.values) / np.abs(reference.values)
        worst = int(np.flatnonzero(kept)[np.argmax(diff[kept])])
        print(
            f"{name}: largest relative difference {diff[kept].max():.2%} ({reference.parameter_names[worst]}, "
            f"relative std {rel_std[worst]:.2%}), median {np.median(diff[kept]):.3%}; without fs: largest "
            f"{diff[inertial].max():.2%}, median {np.median(diff[inertial]):.3%}"
        )


if __name__ == "__main__":
    main()

"""Velocity dead-band for the Coulomb terms, and IRLS before/after its exact Gram update (issue 9).

    python benchmarks/deadband.py [--section coulomb|irls|all] [--seeds 10] [--repeats 3]
    OPENBLAS_NUM_THREADS=1 python benchmarks/deadband.py --section irls --repeats 5   # stable timings

``coulomb``: planar3r, its default sequential-sine excitation (each joint rests ~70 % of the
time), velocity noise at 30 dB SNR (about 0.02 rad/s) and torque noise 0.02 N·m; OLS and WLS
with no dead-band and with several thresholds. Prints, per threshold, the median over the seeds
of |fc_j - fc_j true| per Coulomb parameter (and in % of the true value), the rows the
dead-band removed, and the share of each joint's rows that IRLS (defaults) rejects.

``irls``: a ~200k-row problem (hyper9: 22,300 samples × 9 joints × 91 base parameters;
planar3r: 66,700 samples × 3 joints × 18), exact multi-sine data with 5 % Gaussian torque noise
and 1 % outliers of 10 std. Median fit time of the IRLS loop before (a full QR per iteration,
the code before issue 9, copied below) and after (Gram matrices formed once, rejected rows
subtracted, iterative refinement), without and with ``check_excitation`` (before: two SVDs of
the stacked regressor; after: one QR and b×b SVDs), and the largest difference of the results.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
from robotid_sim_plugins.irls import IRLSEstimator
from robotid_sim_plugins.ols import OLSEstimator
from robotid_sim_plugins.wls import WLSEstimator

import robotid_sim as rid
from robotid_sim.identification import IdentificationProblem, weighted_least_squares
from robotid_sim.identification.metrics import condition_number
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.simulate import resolve_noise
from robotid_sim.testing import exact_multisine

NOISE = {"qd": {"snr_db": 30}, "tau": {"std": 0.02}}
THRESHOLDS = (None, 0.02, 0.05, 0.1, 0.2)


# ------------------------------------------------------------------------------------ coulomb
def coulomb(seeds: int) -> None:
    robot = rid.load_robot("planar3r")
    clean = rid.simulate(robot, "default")
    chain = resolve_noise(robot, NOISE)
    truth = dict(zip(robot.base_parameters().names, robot.base_parameters().true_values(), strict=True))
    fc = sorted(k for k in truth if k.startswith("fc"))
    datasets = [
        dataclasses.replace(clean, **chain.apply(clean.truth.as_dict(), np.random.default_rng(seed)))
        for seed in range(seeds)
    ]
    noise_std = np.median([np.std(ds.qd - clean.truth.qd, axis=0) for ds in datasets], axis=0)
    print(
        f"planar3r sequential sine, {clean.n_samples} samples, noise {NOISE} "
        f"(qd noise std {np.round(noise_std, 4).tolist()} rad/s); medians over {seeds} seeds; "
        f"true {', '.join(f'{k} = {truth[k]:g}' for k in fc)} N·m"
    )
    header = " ".join(f"{k + ' err':>10} {'%':>6}" for k in fc)
    print(f"{'estimator':>9} {'dead-band':>10} {header} {'rows removed/joint':>22} {'irls rejected %/joint':>24}")
    for name, cls in (("ols", OLSEstimator), ("wls", WLSEstimator)):
        for threshold in THRESHOLDS:
            errors, removed, rejected = [], [], []
            for ds in datasets:
                problem = IdentificationProblem(robot, ds, velocity_deadband=threshold)
                model = cls().fit(problem)
                values = dict(zip(model.parameter_names, model.values, strict=True))
                errors.append([abs(values[k] - truth[k]) for k in fc])
                removed.append(model.diagnostics["deadband_rows_removed"])
                if name == "ols":
                    irls = IRLSEstimator().fit(problem)
                    rejected.append(irls.diagnostics["rejected_fraction_per_joint"])
            med = np.median(errors, axis=0)
            cells = " ".join(f"{e:10.4f} {100 * e / truth[k]:6.2f}" for e, k in zip(med, fc, strict=True))
            rows = str(np.median(removed, axis=0).astype(int).tolist())
            rej = str(np.round(100 * np.median(rejected, axis=0), 2).tolist()) if rejected else ""
            print(f"{name:>9} {str(threshold):>10} {cells} {rows:>22} {rej:>24}")


# ------------------------------------------------------------------------------------ irls
def _per_joint_variance_before(residual, W, n_dof, mask):
    r = residual.reshape(-1, n_dof)
    Wj = W.reshape(-1, n_dof, W.shape[1])
    use = mask.reshape(-1, n_dof)
    var = np.empty(n_dof)
    for j in range(n_dof):
        rows = use[:, j]
        n_j = int(np.count_nonzero(np.abs(Wj[rows, j]).max(axis=0) > 0)) if rows.any() else 0
        var[j] = float(r[rows, j] @ r[rows, j]) / max(int(rows.sum()) - n_j, 1)
    return np.maximum(var, 1e-12 * max(var.max(), 1e-300))


def irls_before(problem, k_sigma=3.0, max_iterations=50):
    """plugins/irls.py before issue 9: a QR of the whole stacked regressor per iteration."""
    W, y, n, N = problem.base_regressor(), problem.torque_vector(), problem.n_dof, problem.n_samples
    fit = weighted_least_squares(W, y)
    keep = np.ones_like(y, dtype=bool)
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        variance = _per_joint_variance_before(fit.residual, W, n, keep)
        r, k = fit.residual.reshape(-1, n), keep.reshape(-1, n)
        limits = np.empty(n)
        for j in range(n):
            rj = r[k[:, j], j]
            limits[j] = k_sigma * 1.4826 * np.median(np.abs(rj - np.median(rj)))
        new_keep = (np.abs(fit.residual).reshape(-1, n) < np.maximum(limits, 1e-12)).reshape(-1)
        fit = weighted_least_squares(W, y, np.tile(1.0 / variance, N) * new_keep)
        changed = int(np.count_nonzero(new_keep != keep))
        keep = new_keep
        if changed == 0:
            break
    return fit.beta, iterations


def check_excitation_before(problem) -> float:
    """IdentificationProblem.check_excitation before issue 9: an SVD of the scaled regressor, one of W."""
    W = problem.base_regressor()
    scale = np.linalg.norm(W, axis=0)
    _, s, _ = np.linalg.svd(W / scale, full_matrices=False)
    assert s[0] / s[-1] < 1e10
    return condition_number(W)


def _problem(name: str, samples: int) -> IdentificationProblem:
    robot = rid.load_robot(name)
    t, q, qd, qdd = exact_multisine(robot, 0, samples / 100.0, 100.0)
    tau = robot.inverse_dynamics(q, qd, qdd)
    rng = np.random.default_rng(0)
    std = np.std(tau, axis=0)
    tau = tau + 0.05 * std * rng.standard_normal(tau.shape) + 10 * std * (rng.random(tau.shape) < 0.01)
    problem = IdentificationProblem(robot, Dataset(t, q, qd, qdd, tau, joint_names=robot.joint_names))
    problem.base_regressor()  # formed once, outside the timings (both versions share it)
    return problem


def _median_time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def irls(repeats: int) -> None:
    print(f"IRLS fit time, median of {repeats} (s)")
    print(
        f"{'problem':>28} {'iter':>4} {'loop before':>12} {'loop after':>11} {'speed-up':>8} "
        f"{'+check before':>14} {'+check after':>13} {'speed-up':>8} {'max rel diff':>12}"
    )
    for name, samples in (("hyper9", 22_300), ("planar3r", 66_700)):
        problem = _problem(name, samples)
        m, b = problem.base_regressor().shape
        t_old, (beta_old, iterations) = _median_time(lambda: irls_before(problem), repeats)  # noqa: B023
        t_new, model = _median_time(lambda: IRLSEstimator(check_excitation=False).fit(problem), repeats)  # noqa: B023
        checks_old, checks_new = [], []
        for _ in range(repeats):
            fresh = IdentificationProblem(problem.structure, problem.dataset)
            fresh.__dict__["_base_regressor"] = problem._base_regressor  # share the formed regressor
            t0 = time.perf_counter()
            check_excitation_before(fresh)
            checks_old.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fresh.check_excitation()
            checks_new.append(time.perf_counter() - t0)
        c_old, c_new = statistics.median(checks_old), statistics.median(checks_new)
        assert model.diagnostics["iterations"] == iterations
        diff = float(np.max(np.abs(model.values - beta_old)) / np.max(np.abs(beta_old)))
        label = f"{name} {m}×{b}"
        print(
            f"{label:>28} {iterations:>4} {t_old:12.2f} {t_new:11.2f} {t_old / t_new:7.1f}× "
            f"{t_old + c_old:14.2f} {t_new + c_new:13.2f} {(t_old + c_old) / (t_new + c_new):7.1f}× {diff:12.1e}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=("coulomb", "irls", "all"), default="all")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.section in ("coulomb", "all"):
        coulomb(args.seeds)
    if args.section in ("irls", "all"):
        irls(args.repeats)


if __name__ == "__main__":
    main()

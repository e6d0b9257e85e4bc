"""BIRDy's optimised excitation for the TX40: 20 harmonics, 10 s, min cond(W) + 100/σ_min under the limits.

    python benchmarks/tx40_excitation.py [--seed 0] [--starts 64] [--rate 10] [--margin 0.1] [--maxiter 300]
                                         [--efforts]

BIRDy optimises the finite Fourier series of its TX40 benchmark (20 harmonics, base frequency 0.1 Hz, one
10 s period) for the criterion cond(W) + 100/σ_min(W) of the stacked base regressor W under the joint position,
velocity and acceleration limits. Here the coefficients live in the start/stop subspace of
:func:`~robotid_sim.excitation.fourier.start_stop_basis` (the arm starts and ends at rest: 2·19 coordinates
per joint, plus one placing the start pose, 234 in all) and every candidate is scaled onto the limits shrunk by
``--margin`` (:func:`~robotid_sim.excitation.fourier.fit_coefficients_into_limits`), so each is feasible by
construction; the margin leaves room for the tracking error of BIRDy's PID, which has no gravity compensation.
The best of ``--starts`` random feasible starts is refined by SciPy's L-BFGS-B on a ``--rate`` Hz grid, with
the gradient by forward differences computed in one batched base-regressor call (235 trajectories).
``--efforts`` then runs the 10 s closed loop (5 kHz, PyBullet, BIRDy's gains) noise-free along the result and
prints the peak control torque per joint and 1.5 × that, rounded up: the URDF effort limits of tx40.

Prints the criterion and cond(W) of the start and of the optimum (also on a 100 Hz grid over the period), the
time, and the sidecar's ``default_excitation`` block.

Result of ``python benchmarks/tx40_excitation.py --efforts`` (seed 0, 64 starts, 10 Hz, margin 0.1, 300
iterations; 233 s on the shared 2-core machine, load ~8), the ``default_excitation`` of robots/tx40/robot.yaml:

    start: criterion 133.08 (10 Hz)  cond 112.59   at 100 Hz: cond 108.70, criterion 115.12
    final: criterion  39.56 (10 Hz)  cond  24.13   at 100 Hz: cond  24.71, criterion  29.72
    closed loop 10 s at 5 kHz (PyBullet): 21.1 s wall (load ~8; 7-9 s of CPU time)
    peak control torque [N m]: [79.27, 67.33, 20.22, 8.33, 11.67, 5.38]
    max tracking error [rad]:  [0.2312, 0.1786, 0.1061, 0.0553, 0.0637, 0.015]
    effort = ceil(1.5 x peak): [119, 101, 31, 13, 18, 9]

The criterion was still falling slowly (39.7 → 39.6 over the last iterations); BIRDy's MATLAB optimiser is not
reproduced, only its criterion and constraints.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize

import robotid_sim as rid
from robotid_sim.excitation import condition_number
from robotid_sim.excitation.base import JointLimits
from robotid_sim.excitation.fourier import (
    FourierExcitation,
    fit_coefficients_into_limits,
    fourier_excursion,
    start_stop_basis,
)
from robotid_sim.threads import one_blas_thread

HARMONICS = 20
BASE_FREQUENCY = 0.1
#: BIRDy's weight of 1/σ_min in the criterion
SIGMA_WEIGHT = 100.0
#: peak-search points per harmonic while optimising (the final excitation is fitted on 1000)
SEARCH_POINTS = 32
#: forward-difference step of the gradient, in the coordinates (each in [-1, 1] or [0, 1])
STEP = 1e-6


class Criterion:
    """cond(W) + 100/σ_min(W) of decoded coordinate vectors, batched over candidates."""

    def __init__(self, robot, limits: JointLimits, rate_hz: float):
        self.base = robot.base_parameters()
        self.limits = limits
        self.n = robot.n_dof
        self.omega_f = 2 * np.pi * BASE_FREQUENCY
        self.Na, self.Nb = start_stop_basis(HARMONICS)
        samples = int(round(rate_hz / BASE_FREQUENCY))
        self.t = np.arange(samples) / rate_hz
        self.k = HARMONICS - 1
        self.evaluations = 0

    @property
    def dimension(self) -> int:
        return self.n * (2 * self.k + 1)

    def bounds(self) -> list[tuple[float, float]]:
        return ([(-1.0, 1.0)] * (2 * self.k) + [(0.0, 1.0)]) * self.n

    def decode(self, x: np.ndarray, points: int):
        """x (D, M) → q0 (M, n), a, b (M, n, L), ok (M,)."""
        z = x.T.reshape(x.shape[1], self.n, 2 * self.k + 1)
        a = z[..., : self.k] @ self.Na.T
        b = z[..., self.k : 2 * self.k] @ self.Nb.T
        return fit_coefficients_into_limits(
            a, b, self.omega_f, self.limits, centre=z[..., -1], points_per_harmonic=points
        )

    def excitation(self, x: np.ndarray) -> FourierExcitation:
        q0, a, b, _ = self.decode(np.asarray(x, float)[:, None], points=1000)
        return FourierExcitation(q0[0], a[0], b[0], self.omega_f, 1)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Criterion (M,) of candidates x (D, M); inf where a joint does not move or W is rank deficient."""
        q0, a, b, ok = self.decode(x, SEARCH_POINTS)
        M, K = x.shape[1], self.t.size
        self.evaluations += M
        p, pd, pdd = fourier_excursion(a, b, self.omega_f, self.t)  # (M, n, K)
        q = (q0[..., None] + p).transpose(0, 2, 1).reshape(M * K, self.n)
        Y = self.base.regressor(
            q, pd.transpose(0, 2, 1).reshape(M * K, self.n), pdd.transpose(0, 2, 1).reshape(-1, self.n)
        )
        Y = Y.reshape(M, K * self.n, -1)
        with one_blas_thread():
            lam = np.linalg.eigvalsh(np.stack([y.T @ y for y in Y]))
        lo, hi = lam[:, 0], lam[:, -1]
        good = ok & (lo > hi * 1e-24)
        lo = np.where(good, lo, 1.0)
        return np.where(good, np.sqrt(hi / lo) + SIGMA_WEIGHT / np.sqrt(lo), np.inf)

    def value_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """The criterion at x (D,) and its forward-difference gradient, in one batched call."""
        X = np.repeat(x[:, None], self.dimension + 1, axis=1)
        X[np.arange(self.dimension), np.arange(1, self.dimension + 1)] += STEP
        f = self(X)
        if not np.isfinite(f[0]):
            return 1e12, np.zeros_like(x)
        g = np.where(np.isfinite(f[1:]), (f[1:] - f[0]) / STEP, 0.0)
        return float(f[0]), g


def dense_criterion(robot, exc: FourierExcitation, rate_hz: float = 100.0) -> tuple[float, float]:
    """(cond(W), cond(W) + 100/σ_min) on a ``rate_hz`` grid over the period, by an SVD."""
    t = np.arange(int(round(exc.period * rate_hz))) / rate_hz
    W = robot.base_parameters().regressor(*exc.evaluate(t))
    s = np.linalg.svd(W.reshape(-1, W.shape[-1]), compute_uv=False)
    return float(s[0] / s[-1]), float(s[0] / s[-1] + SIGMA_WEIGHT / s[-1])


def sidecar_block(exc: FourierExcitation) -> str:
    """The ``default_excitation`` mapping as the sidecar writes it (12 significant digits)."""

    def row(values) -> str:
        return "[" + ", ".join(f"{v:.12g}" for v in values) + "]"

    lines = ["default_excitation:", "  type: fourier", f"  q0: {row(exc.q0)}", "  a:"]
    lines += [f"    - {row(r)}" for r in exc.a]
    lines += ["  b:"] + [f"    - {row(r)}" for r in exc.b]
    lines += [f"  omega_f: {exc.omega_f!r}", "  periods: 1"]
    return "\n".join(lines)


def efforts(robot, exc: FourierExcitation) -> None:
    """Run the 10 s closed loop noise-free along ``exc`` and print the peak torques and the efforts."""
    from robotid_sim.sim.closed_loop_data import closed_loop_record

    began = time.perf_counter()
    rec = closed_loop_record(robot, exc.describe())
    elapsed = time.perf_counter() - began
    peak = np.abs(rec.truth.tau).max(axis=0)
    error = np.abs(rec.truth.q - exc.evaluate(rec.t)[0]).max(axis=0)
    print(f"closed loop 10 s at 5 kHz (PyBullet): {elapsed:.1f} s wall")
    print("peak control torque [N m]:", np.round(peak, 2).tolist())
    print("max tracking error [rad]: ", np.round(error, 4).tolist())
    print("effort = ceil(1.5 x peak):", np.ceil(1.5 * peak).astype(int).tolist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--starts", type=int, default=64, help="random feasible starts; the best is refined")
    parser.add_argument("--rate", type=float, default=10.0, help="regressor samples per second while optimising")
    parser.add_argument("--margin", type=float, default=0.1, help="fraction of every limit kept free")
    parser.add_argument("--maxiter", type=int, default=300, help="L-BFGS-B iterations at most")
    parser.add_argument("--efforts", action="store_true", help="run the closed loop and print the efforts")
    args = parser.parse_args()

    robot = rid.load_robot("tx40")
    criterion = Criterion(robot, JointLimits.of(robot).shrunk(args.margin), args.rate)
    rng = np.random.default_rng(args.seed)
    began = time.perf_counter()
    starts = rng.uniform(-1.0, 1.0, size=(args.starts, robot.n_dof, 2 * criterion.k + 1))
    starts[..., -1] = 0.5
    starts = starts.reshape(args.starts, -1).T
    scores = criterion(starts)
    x0 = starts[:, int(np.argmin(scores))]
    history: list[float] = []
    result = minimize(
        criterion.value_and_gradient,
        x0,
        jac=True,
        method="L-BFGS-B",
        bounds=criterion.bounds(),
        options={"maxiter": args.maxiter},
        callback=lambda intermediate_result: history.append(float(intermediate_result.fun)),
    )
    elapsed = time.perf_counter() - began
    start, final = criterion.excitation(x0), criterion.excitation(result.x)
    final.check_limits(robot)
    print(
        f"tx40: {robot.n_dof} joints, {robot.base_parameters().count} base parameters; {HARMONICS} harmonics at "
        f"{BASE_FREQUENCY} Hz, {criterion.dimension} coordinates, margin {args.margin}, {args.rate:g} Hz grid"
    )
    for name, exc, value in (("start", start, float(np.min(scores))), ("final", final, float(result.fun))):
        cond, crit = dense_criterion(robot, exc)
        print(
            f"{name}: criterion {value:10.2f} ({args.rate:g} Hz)  cond {condition_number(robot, exc, args.rate):8.2f}"
            f"   at 100 Hz: cond {cond:8.2f}, criterion {crit:8.2f}"
        )
    print(
        f"best of {args.starts} starts, then {result.nit} L-BFGS-B iterations ({result.message}); "
        f"{criterion.evaluations} trajectories scored in {elapsed:.1f} s"
    )
    print("criterion per iteration:", " ".join(f"{h:.1f}" for h in history[:: max(1, len(history) // 20)]))
    print(sidecar_block(final))
    if args.efforts:
        efforts(robot, final)


if __name__ == "__main__":
    main()

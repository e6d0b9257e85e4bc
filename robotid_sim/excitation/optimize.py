"""Optimal Fourier excitation: minimise cond(base regressor) under the limits (seed 001 Eq. 11–12).

Seed 001 optimises the coefficients of its five-harmonic Fourier series (Eq. 10) with a genetic
algorithm, minimising the condition number of the stacked regressor (Eq. 12) subject to the
position, velocity, acceleration and start/stop constraints of Eq. 11. Here
:func:`scipy.optimize.differential_evolution` plays the genetic algorithm (SPEC §6), and the
constraints are met exactly instead of by penalties:

- start/stop (Σ_l a_l = 0, Σ_l l·b_l = 0): the search runs in coordinates of the constraint
  subspace (:func:`~robotid_sim.excitation.fourier.start_stop_basis`), 2(L−1) per joint;
- limits: every candidate is scaled per joint onto its tightest limit and its start pose placed
  by one more coordinate per joint (:func:`~robotid_sim.excitation.fourier.fit_coefficients_into_limits`),
  so each candidate is feasible by construction;
- a candidate in which some joint does not move gets the penalty :data:`PENALTY` instead of a
  condition number.

The objective is vectorised: one generation's whole population is evaluated with one batched
base-regressor call (in chunks of :data:`CHUNK_SAMPLES` samples) and the condition numbers come
from the eigenvalues of the Gram matrices YᵀY (cond(Y) = sqrt(λ_max/λ_min)); the reported start
and final values are recomputed with an SVD of Y.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.excitation.base import Excitation, JointLimits, time_grid
from robotid_sim.excitation.fourier import (
    FourierExcitation,
    fit_coefficients_into_limits,
    fourier_excursion,
    start_stop_basis,
)
from robotid_sim.threads import one_blas_thread

logger = logging.getLogger(__name__)

#: objective value of a candidate whose regressor is rank deficient or where a joint is idle
PENALTY = 1e12
#: regressor samples evaluated per batched call (bounds the memory of one call)
CHUNK_SAMPLES = 4000
#: grid points per period and harmonic for the peaks while optimising (final result: 1000)
SEARCH_POINTS_PER_HARMONIC = 64


@dataclass(frozen=True, eq=False)
class OptimizationResult:
    """Outcome of :func:`optimize_fourier`.

    Attributes:
        excitation: the optimised excitation (inside the limits, start/stop constraints met).
        start_excitation: the deterministic start point the search was seeded with.
        start_condition: cond of the base regressor along ``start_excitation``.
        final_condition: cond of the base regressor along ``excitation``.
        history: best cond of the population after each generation (G,), for a convergence plot.
        n_evaluations: objective evaluations (trajectories scored).
        n_generations: generations run.
        elapsed_s: wall time of the optimisation (s).
        message: the optimiser's stop reason.
        sample_rate_hz: rate of the samples the condition numbers were computed on.
    """

    excitation: FourierExcitation
    start_excitation: FourierExcitation
    start_condition: float
    final_condition: float
    history: np.ndarray = field(repr=False)
    n_evaluations: int = 0
    n_generations: int = 0
    elapsed_s: float = 0.0
    message: str = ""
    sample_rate_hz: float = 20.0

    def summary(self) -> dict:
        """JSON-able summary (no trajectory)."""
        return {
            "start_condition": self.start_condition,
            "final_condition": self.final_condition,
            "n_evaluations": self.n_evaluations,
            "n_generations": self.n_generations,
            "elapsed_s": self.elapsed_s,
            "message": self.message,
            "history": [float(h) for h in self.history],
        }


def condition_number(robot, excitation: Excitation, sample_rate_hz: float = 20.0, one_period: bool = True) -> float:
    """cond of the stacked base regressor along an excitation (seed 001 Eq. 12).

    Args:
        robot: the Robot whose base regressor (``robot.base_parameters().regressor``) is used.
        excitation: any excitation with ``excitation.n_dof == robot.n_dof``.
        sample_rate_hz: samples per second of the stacked regressor.
        one_period: for a :class:`FourierExcitation`, use one period without its end point
            (repeats add nothing); the grid the optimiser scores.

    Returns:
        σ_max/σ_min of the (N·n, b) stacked base regressor (inf if rank deficient).
    """
    if one_period and isinstance(excitation, FourierExcitation):
        t = _period_grid(excitation.period, sample_rate_hz)
    else:
        t = time_grid(excitation.duration, sample_rate_hz)
    Y = robot.base_parameters().regressor(*excitation.evaluate(t))
    return float(np.linalg.cond(Y.reshape(-1, Y.shape[-1])))


def _period_grid(period: float, sample_rate_hz: float) -> np.ndarray:
    """round(T·rate) equally spaced times (K,) covering one period, end point excluded."""
    n_samples = max(int(round(period * sample_rate_hz)), 1)
    return np.arange(n_samples) * (period / n_samples)


class _Objective:
    """cond(base regressor) of a population of decoded Fourier coefficient vectors."""

    def __init__(self, robot, limits: JointLimits, harmonics: int, omega_f: float, sample_rate_hz: float):
        self.robot = robot
        self.base = robot.base_parameters()
        self.limits = limits
        self.n = limits.n_dof
        self.L = harmonics
        self.omega_f = omega_f
        self.Na, self.Nb = start_stop_basis(harmonics)
        self.t = _period_grid(2 * np.pi / omega_f, sample_rate_hz)
        n_samples = self.t.shape[0]
        self.n_evaluations = 0
        if n_samples * self.n < self.base.count:
            raise ConfigError(
                f"{n_samples} samples × {self.n} joints give fewer rows than the {self.base.count} "
                f"base parameters; raise sample_rate_hz above {sample_rate_hz}"
            )

    @property
    def dimension(self) -> int:
        return self.n * (2 * (self.L - 1) + 1)

    def bounds(self) -> list[tuple[float, float]]:
        per_joint = [(-1.0, 1.0)] * (2 * (self.L - 1)) + [(0.0, 1.0)]
        return per_joint * self.n

    def decode(self, x: np.ndarray, points_per_harmonic: int):
        """x (D, M) → q0 (M, n), a (M, n, L), b (M, n, L), ok (M,)."""
        M = x.shape[1]
        k = self.L - 1
        z = x.T.reshape(M, self.n, 2 * k + 1)
        a = z[..., :k] @ self.Na.T
        b = z[..., k : 2 * k] @ self.Nb.T
        centre = z[..., 2 * k]
        return fit_coefficients_into_limits(
            a, b, self.omega_f, self.limits, centre=centre, points_per_harmonic=points_per_harmonic
        )

    def excitation(self, x: np.ndarray, periods: int = 1) -> FourierExcitation:
        q0, a, b, _ = self.decode(np.asarray(x, float)[:, None], points_per_harmonic=1000)
        return FourierExcitation(q0[0], a[0], b[0], self.omega_f, periods)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, float)
        if x.ndim == 1:
            return self(x[:, None])[0]
        with one_blas_thread():  # small BLAS calls run faster on one thread, above all on shared cores
            return self._score(x)

    def _score(self, x: np.ndarray) -> np.ndarray:
        q0, a, b, ok = self.decode(x, SEARCH_POINTS_PER_HARMONIC)
        M, K = x.shape[1], self.t.shape[0]
        self.n_evaluations += M
        p, pd, pdd = fourier_excursion(a, b, self.omega_f, self.t)  # (M, n, K)
        q = (q0[..., None] + p).transpose(0, 2, 1).reshape(M * K, self.n)
        qd = pd.transpose(0, 2, 1).reshape(M * K, self.n)
        qdd = pdd.transpose(0, 2, 1).reshape(M * K, self.n)
        out = np.full(M, PENALTY)
        per_call = max(CHUNK_SAMPLES // K, 1)
        for start in range(0, M, per_call):
            sl = slice(start, min(start + per_call, M))
            rows = slice(sl.start * K, sl.stop * K)
            Y = self.base.regressor(q[rows], qd[rows], qdd[rows])
            Y = Y.reshape(sl.stop - sl.start, K * self.n, -1)
            gram = np.stack([y.T @ y for y in Y])  # a BLAS call each: faster than matmul
            lam = np.linalg.eigvalsh(gram)
            lo, hi = lam[:, 0], lam[:, -1]
            good = lo > hi * 1e-24
            cond = np.where(good, np.sqrt(np.abs(hi) / np.where(good, lo, 1.0)), PENALTY)
            out[sl] = np.minimum(cond, PENALTY)
        out[~ok] = PENALTY
        return out


def _evolve(objective: _Objective, x0: np.ndarray, rng, de_options: dict, recombination, max_time_s):
    """SciPy's differential evolution of ``objective`` from ``x0``: (its result, best cond per generation, seconds).

    ``de_options`` holds maxiter, popsize, tol and mutation; ``max_time_s`` stops it (checked once per generation).
    """
    history: list[float] = []
    from scipy.optimize import differential_evolution  # SciPy's optimiser loads only when optimising

    began = time.perf_counter()

    def callback(intermediate_result):
        history.append(float(intermediate_result.fun))
        logger.debug("generation %d: best cond %.4g", len(history), history[-1])
        if max_time_s is not None and time.perf_counter() - began > max_time_s:
            raise StopIteration

    result = differential_evolution(
        objective,
        objective.bounds(),
        maxiter=de_options["maxiter"],
        popsize=de_options["popsize"],
        tol=de_options["tol"],
        mutation=de_options["mutation"],
        recombination=recombination,
        seed=rng,
        callback=callback,
        polish=False,
        init="latinhypercube",
        x0=x0,
        vectorized=True,
        updating="deferred",
    )
    return result, history, time.perf_counter() - began


def _start_and_final(robot, objective: _Objective, x0, x, periods, sample_rate_hz):
    """(start excitation, its cond, final excitation, its cond); the start is kept if the final is worse."""
    start = objective.excitation(x0, periods)
    final = objective.excitation(x, periods)
    start_cond = condition_number(robot, start, sample_rate_hz)
    final_cond = condition_number(robot, final, sample_rate_hz)
    if final_cond > start_cond:  # only possible through the last-digit rescaling: keep the start
        final, final_cond = start, start_cond
    return start, start_cond, final, final_cond


def optimize_fourier(
    robot,
    harmonics: int = 5,
    base_frequency: float = 0.04,
    *,
    periods: int = 1,
    margin: float = 0.0,
    seed: int | None = 0,
    maxiter: int = 50,
    popsize: int = 2,
    sample_rate_hz: float = 20.0,
    tol: float = 1e-3,
    mutation: float | tuple[float, float] = (0.5, 1.0),
    recombination: float = 0.9,
    max_time_s: float | None = None,
) -> OptimizationResult:
    """Fourier excitation minimising cond(base regressor) under the limits (seed 001 Eq. 10–12).

    Args:
        robot: the Robot (its limits and base regressor are used).
        harmonics: L, harmonics per joint (seed 001: 5).
        base_frequency: f (Hz), ω_f = 2π f (seed 001: 0.04 Hz, a 25 s period).
        periods: periods of the returned excitation (the objective uses one period).
        margin: fraction of every limit kept free (see ``JointLimits.shrunk``).
        seed: seeds the start point and the optimiser; same seed, same result.
        maxiter: generations of differential evolution at most.
        popsize: population = popsize × the number of unknowns, n·(2L − 1).
        sample_rate_hz: samples per second of the stacked regressor (one period).
        tol: relative spread of the population's objective at which to stop.
        mutation: differential weight (or dithering range) of differential evolution.
        recombination: crossover probability.
        max_time_s: stop after this wall time (checked once per generation).

    Returns:
        :class:`OptimizationResult`; ``final_condition <= start_condition`` because the start
        point is part of the first population and selection is elitist.

    Cost: each generation scores popsize·n·(2L − 1) trajectories of round(T·sample_rate_hz) samples with one
    batched base-regressor call. For hyper9 (81 unknowns, T = 25 s): popsize 1 at 4 Hz ≈ 0.5–0.8 s per
    generation on 2 cores, popsize 2 at 10 Hz ≈ 2 s.
    """
    limits = JointLimits.of(robot).shrunk(margin)
    if robot.n_dof != limits.n_dof:
        raise ConfigError("robot and limits disagree on the number of joints")
    omega_f = 2 * np.pi * float(base_frequency)
    if not omega_f > 0:
        raise ConfigError(f"base_frequency must be positive (Hz), got {base_frequency}")
    objective = _Objective(robot, limits, int(harmonics), omega_f, sample_rate_hz)
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(-1.0, 1.0, size=(objective.n, 2 * (harmonics - 1) + 1))
    x0[:, -1] = 0.5  # start centred in the position ranges
    x0 = x0.ravel()
    de_options = {"maxiter": int(maxiter), "popsize": int(popsize), "tol": tol, "mutation": mutation}
    result, history, elapsed = _evolve(objective, x0, rng, de_options, recombination, max_time_s)
    start, start_cond, final, final_cond = _start_and_final(robot, objective, x0, result.x, periods, sample_rate_hz)
    logger.info(
        "Fourier excitation for %s: cond %.4g -> %.4g in %d generations (%.1f s, %s)",
        getattr(robot, "name", "robot"),
        start_cond,
        final_cond,
        len(history),
        elapsed,
        result.message,
    )
    return OptimizationResult(
        excitation=final,
        start_excitation=start,
        start_condition=start_cond,
        final_condition=final_cond,
        history=np.asarray(history),
        n_evaluations=objective.n_evaluations,
        n_generations=len(history),
        elapsed_s=elapsed,
        message=str(result.message),
        sample_rate_hz=float(sample_rate_hz),
    )

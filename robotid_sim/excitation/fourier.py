"""Finite Fourier series excitation (Swevers et al. 1997; seed 001 Eq. 10–11; SPEC §6).

For joint i with L harmonics of the base pulsation ω_f = 2π f (rad/s), period T = 2π/ω_f:

    q_i(t)   = q0_i + Σ_l [ a_il/(ω_f l) · sin(ω_f l t) − b_il/(ω_f l) · (cos(ω_f l t) − 1) ]
    qd_i(t)  = Σ_l [ a_il · cos(ω_f l t) + b_il · sin(ω_f l t) ]
    qdd_i(t) = Σ_l [ −a_il ω_f l · sin(ω_f l t) + b_il ω_f l · cos(ω_f l t) ]

This is the form of SPEC §6 / seed 001 Eq. 10 (whose qd and qdd lines are exactly the first and
second derivatives of the q line written with ``− b/(ω_f l) · cos``) with one change of constant:
the ``+ b_il/(ω_f l)`` term, i.e. ``cos − 1`` instead of ``cos``, makes **q(0) = q0**, so q0 is
the start (and end) pose and the arm starts at rest exactly there. Written with the SPEC's
constant, the offset would be ``q0 + Σ_l b_il/(ω_f l)``; :meth:`FourierExcitation.offset` gives it.

Start/stop constraints (seed 001 Eq. 11): at t = 0 and t = kT, qd_i = Σ_l a_il and
qdd_i = ω_f Σ_l l·b_il, so zero velocity and acceleration at both ends need
``Σ_l a_il = 0`` and ``Σ_l l·b_il = 0`` for every joint; :func:`project_start_stop` enforces
them exactly by orthogonal projection. The trajectory is periodic with period T, so
``periods = K`` repeats it K times (seed 001 §5 averages over 5 periods).

Position/velocity/acceleration limits (seed 001 Eq. 11) are met by **exact per-joint scaling**
(:func:`fit_coefficients_into_limits`): q − q0, qd and qdd are linear in (a, b), so scaling
joint i's coefficients by s_i scales its excursion, velocity and acceleration by s_i. Peaks are
taken on a grid with a rigorous correction: by Bernstein's inequality a trigonometric
polynomial f of degree L satisfies |f''| ≤ (Lω)²‖f‖, so its true maximum exceeds the maximum
on a grid of G points per period by at most ε‖f‖ with ε = (πL/G)²/2.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.excitation.base import Excitation, JointLimits, as_float_list

logger = logging.getLogger(__name__)

#: grid points per period and per harmonic used to find the peaks when fitting into the limits
DENSE_POINTS_PER_HARMONIC = 1000


def harmonic_pulsations(omega_f: float, harmonics: int) -> np.ndarray:
    """ω_f·l for l = 1..L, shape (L,)."""
    return omega_f * np.arange(1, harmonics + 1)


def fourier_terms(t: np.ndarray, omega_f: float, harmonics: int):
    """Basis functions at the times t (N,).

    Returns:
        ``(sin, cosm1, cos, w)``: sin(ω_f l t), cos(ω_f l t) − 1 and cos(ω_f l t), each (N, L),
        and the pulsations w = ω_f l (L,).
    """
    w = harmonic_pulsations(omega_f, harmonics)
    phase = np.outer(np.asarray(t, float), w)
    s, c = np.sin(phase), np.cos(phase)
    return s, c - 1.0, c, w


def fourier_excursion(a: np.ndarray, b: np.ndarray, omega_f: float, t: np.ndarray):
    """Excursion q − q0, velocity and acceleration of Eq. 10, batched over leading axes.

    Args:
        a: sine coefficients (..., n, L) in rad/s (velocity amplitudes).
        b: cosine coefficients (..., n, L) in rad/s.
        omega_f: base pulsation ω_f (rad/s).
        t: times (N,).

    Returns:
        ``(p, pd, pdd)`` each (..., n, N): q − q0, qd and qdd.
    """
    L = a.shape[-1]
    s, cm1, c, w = fourier_terms(t, omega_f, L)
    p = (a / w) @ s.T - (b / w) @ cm1.T
    pd = a @ c.T + b @ s.T
    pdd = (-a * w) @ s.T + (b * w) @ c.T
    return p, pd, pdd


def project_start_stop(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthogonal projection of the coefficients onto the start/stop constraints (Eq. 11).

    Args:
        a: (..., n, L); b: (..., n, L).

    Returns:
        ``(a', b')`` with Σ_l a'_l = 0 and Σ_l l·b'_l = 0 per joint, the nearest such pair in
        the Euclidean norm.
    """
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    ell = np.arange(1, a.shape[-1] + 1, dtype=float)
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - (b @ ell)[..., None] * ell / (ell @ ell)
    return a, b


def start_stop_basis(harmonics: int) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases (L, L−1) of {a: Σ a_l = 0} and {b: Σ l·b_l = 0}.

    Coefficients ``a = Na @ x`` and ``b = Nb @ y`` satisfy the start/stop constraints for any
    x, y (L−1,): the optimiser searches in these coordinates.
    """
    if harmonics < 2:
        raise ConfigError(
            f"a Fourier excitation with start/stop constraints needs at least 2 harmonics, got {harmonics}"
        )
    ell = np.arange(1, harmonics + 1, dtype=float)
    bases = []
    for v in (np.ones(harmonics), ell):
        u, _, _ = np.linalg.svd(v[:, None], full_matrices=True)
        bases.append(u[:, 1:])
    return bases[0], bases[1]


def fit_coefficients_into_limits(
    a: np.ndarray,
    b: np.ndarray,
    omega_f: float,
    limits: JointLimits,
    centre: np.ndarray | float = 0.5,
    fill: bool = True,
    points_per_harmonic: int = DENSE_POINTS_PER_HARMONIC,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Scale each joint's coefficients into the limits and place its start pose q0.

    Batched over leading axes. Joint i gets one factor s_i: the largest for which the peak
    velocity, the peak acceleration and the position range fit (``fill=True``), or
    ``min(1, that)`` (``fill=False``, only shrink). The start pose then places the range
    ``[q0 + s·min p, q0 + s·max p]`` inside ``[lower, upper]``: ``centre`` 0 puts it against the
    lower limit, 1 against the upper, 0.5 in the middle of the free room. Continuous joints
    (infinite limits) are centred on 0.

    Args:
        a: (..., n, L) sine coefficients (rad/s). b: (..., n, L) cosine coefficients.
        omega_f: base pulsation (rad/s).
        limits: the limits to respect (shrink them first for a margin).
        centre: (..., n) or scalar in [0, 1].
        fill: scale up to the limits as well as down.
        points_per_harmonic: grid points per period per harmonic for the peaks.

    Returns:
        ``(q0, a', b', ok)``: q0 (..., n), scaled a', b' (..., n, L), and ok (...,) False where
        some joint does not move at all (its coefficients are zero).
    """
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    L = a.shape[-1]
    G = max(int(points_per_harmonic) * L, 8 * L)
    t = np.arange(G) * (2 * np.pi / omega_f / G)
    p, pd, pdd = fourier_excursion(a, b, omega_f, t)
    eps = 0.5 * (np.pi * L / G) ** 2
    grow = 1.0 / (1.0 - eps)  # true peak <= grid peak / (1 - eps)
    v_peak = np.abs(pd).max(-1) * grow
    a_peak = np.abs(pdd).max(-1) * grow
    w = harmonic_pulsations(omega_f, L)
    mean = (b / w).sum(-1)  # constant term of p: p = mean + (zero-mean trig polynomial)
    dev = p - mean[..., None]
    slack = np.abs(dev).max(-1) * (grow - 1.0)
    p_lo = p.min(-1) - slack
    p_hi = p.max(-1) + slack
    tiny = 1e-300
    ok = (v_peak > 1e-12 * limits.velocity).all(-1)
    width = limits.upper - limits.lower
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.minimum(limits.velocity / np.maximum(v_peak, tiny), limits.acceleration / np.maximum(a_peak, tiny))
        s = np.minimum(s, np.where(np.isfinite(width), width / np.maximum(p_hi - p_lo, tiny), np.inf))
    if not fill:
        s = np.minimum(s, 1.0)
    s = np.where(np.isfinite(s), s, 0.0)
    centre = np.clip(np.asarray(centre, float), 0.0, 1.0)
    room = np.where(np.isfinite(width), width - s * (p_hi - p_lo), 0.0)
    room = np.maximum(room, 0.0)
    q0_bounded = limits.lower - s * p_lo + centre * room
    q0_free = -0.5 * s * (p_lo + p_hi)
    q0 = np.where(np.isfinite(width), q0_bounded, q0_free)
    return q0, a * s[..., None], b * s[..., None], ok


@dataclass(frozen=True, eq=False)
class FourierExcitation(Excitation):
    """Finite Fourier series excitation of seed 001 Eq. 10 (module docstring for the form).

    Attributes:
        q0: start pose (n,), q(0) = q(kT) = q0.
        a: sine coefficients (n, L), rad/s (velocity amplitudes of the cosine terms of qd).
        b: cosine coefficients (n, L), rad/s.
        omega_f: base pulsation ω_f = 2π f (rad/s); seed 001 uses 2π·0.04 (T = 25 s).
        periods: number of periods K played; duration = K·2π/ω_f.
        seed: the seed the coefficients were drawn with (:meth:`random`, or a recipe's optimisation), None when
            given explicitly or drawn from fresh entropy: a record only, kept by :meth:`describe` (it does not
            change the trajectory).
    """

    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray
    omega_f: float
    periods: int = 1
    seed: int | None = None
    type_name = "fourier"

    def __post_init__(self):
        q0 = np.atleast_1d(np.asarray(self.q0, float))
        a = np.atleast_2d(np.asarray(self.a, float))
        b = np.atleast_2d(np.asarray(self.b, float))
        if q0.ndim != 1 or a.shape != (q0.shape[0], a.shape[-1]) or b.shape != a.shape:
            raise ConfigError(
                f"Fourier excitation needs q0 (n,), a (n, L) and b (n, L) with the "
                f"same n and L; got {q0.shape}, {a.shape}, {b.shape}"
            )
        if not (np.isfinite(q0).all() and np.isfinite(a).all() and np.isfinite(b).all()):
            raise ConfigError("Fourier coefficients contain NaN or inf")
        if not (np.isfinite(self.omega_f) and self.omega_f > 0):
            raise ConfigError(f"omega_f must be a positive pulsation (rad/s), got {self.omega_f}")
        if int(self.periods) != self.periods or self.periods < 1:
            raise ConfigError(f"periods must be a whole number >= 1, got {self.periods}")
        object.__setattr__(self, "q0", q0)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "omega_f", float(self.omega_f))
        object.__setattr__(self, "periods", int(self.periods))

    # ------------------------------------------------------------------ description
    @property
    def n_dof(self) -> int:
        return self.q0.shape[0]

    @property
    def harmonics(self) -> int:
        """Number of harmonics L."""
        return self.a.shape[1]

    @property
    def period(self) -> float:
        """T = 2π/ω_f (s)."""
        return 2 * np.pi / self.omega_f

    @property
    def duration(self) -> float:
        return self.periods * self.period

    @property
    def base_frequency(self) -> float:
        """f = ω_f/2π (Hz)."""
        return self.omega_f / (2 * np.pi)

    def offset(self) -> np.ndarray:
        """The constant of the SPEC §6 form, q0 + Σ_l b_l/(ω_f l) (n,): the mean position."""
        return self.q0 + (self.b / harmonic_pulsations(self.omega_f, self.harmonics)).sum(1)

    def describe(self) -> dict:
        return {
            "type": "fourier",
            "q0": as_float_list(self.q0),
            "a": as_float_list(self.a),
            "b": as_float_list(self.b),
            "omega_f": self.omega_f,
            "periods": self.periods,
        } | ({} if self.seed is None else {"seed": self.seed})

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self, t):
        p, pd, pdd = fourier_excursion(self.a, self.b, self.omega_f, t)
        return self.q0 + p.T, pd.T, pdd.T

    def start_stop_residual(self) -> tuple[np.ndarray, np.ndarray]:
        """(Σ_l a_l, Σ_l l·b_l) per joint, each (n,): both zero when Eq. 11 holds."""
        ell = np.arange(1, self.harmonics + 1)
        return self.a.sum(1), self.b @ ell

    # ------------------------------------------------------------------ changed copies
    def project_start_stop(self) -> FourierExcitation:
        """Copy whose coefficients satisfy the start/stop constraints exactly (same q0)."""
        a, b = project_start_stop(self.a, self.b)
        return FourierExcitation(self.q0, a, b, self.omega_f, self.periods, self.seed)

    def repeat(self, k: int) -> FourierExcitation:
        """The same trajectory played ``k`` times as often (periods × k)."""
        return FourierExcitation(self.q0, self.a, self.b, self.omega_f, self.periods * int(k), self.seed)

    def fit_into_limits(self, robot, margin: float = 0.0, centre=0.5, fill: bool = True) -> FourierExcitation:
        """Copy scaled per joint into the limits of ``robot`` (see
        :func:`fit_coefficients_into_limits`); the start pose is re-placed by ``centre``."""
        limits = JointLimits.of(robot).shrunk(margin)
        q0, a, b, ok = fit_coefficients_into_limits(self.a, self.b, self.omega_f, limits, centre=centre, fill=fill)
        if not ok:
            logger.warning("some joints of the Fourier excitation do not move (zero coefficients)")
        return FourierExcitation(q0, a, b, self.omega_f, self.periods, self.seed)

    @classmethod
    def random(
        cls,
        robot,
        harmonics: int = 5,
        base_frequency: float = 0.04,
        seed: int | None = 0,
        periods: int = 1,
        margin: float = 0.0,
    ) -> FourierExcitation:
        """A random excitation meeting Eq. 11: start/stop constraints, scaled into the limits.

        Coefficients are drawn uniformly in [−1, 1] in the constraint-satisfying coordinates
        (:func:`start_stop_basis`), then each joint is scaled to touch its tightest limit and
        centred in its position range.

        Args:
            robot: a Robot or :class:`JointLimits`.
            harmonics: L (>= 2).
            base_frequency: f in Hz (ω_f = 2π f); seed 001 uses 0.04 Hz.
            seed: random seed.
            periods: number of periods.
            margin: fraction of each limit kept free.
        """
        limits = JointLimits.of(robot)
        rng = np.random.default_rng(seed)
        Na, Nb = start_stop_basis(harmonics)
        x = rng.uniform(-1, 1, size=(limits.n_dof, 2, harmonics - 1))
        a, b = x[:, 0] @ Na.T, x[:, 1] @ Nb.T
        recorded = int(seed) if isinstance(seed, int | np.integer) else None  # a Generator is not recorded
        return cls(np.zeros(limits.n_dof), a, b, 2 * np.pi * base_frequency, periods, recorded).fit_into_limits(
            limits, margin=margin
        )

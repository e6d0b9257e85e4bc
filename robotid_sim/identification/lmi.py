"""Physically consistent least squares: linear matrix inequalities on the standard parameters.

Seed 001 (Eq. 17–23, 30) solves its weighted least squares over the base parameters *and* the
dependent ones together, subject to physical feasibility. Here the decision variable is the full
standard parameter vector θ (p,) of the robot structure; the data enter through the base values
β = K θ only, and every link's parameters must describe a rigid body:

- per link, the 4×4 pseudo-inertia J(θ_link) ⪰ ``margin``·E (Wensing, Kim & Slotine 2017; see
  :func:`robotid_sim.robot.physical.pseudo_inertia`). J ≻ 0 implies positive mass, a positive
  definite inertia about the COM and the triangle inequality of its principal moments, which is
  stronger than seed 001's D_i ≻ 0 (Eq. 18) and than FloBaRoID's check after the fact;
- rotor inertia Ia ≥ 0, and the friction coefficients fc, fs, fv ≥ 0 (the offset S is free);
- optional prior knowledge: mass ranges per link, and the COM inside a box per link
  (m·lo ≤ m·c ≤ m·hi, linear in θ);
- an optional regulariser toward a prior parameter set (the CAD values of a URDF): Euclidean
  ‖θ − θ₀‖², the geometric (log-det) divergence of Lee et al. 2020,
  Σ_links −log det(J₀⁻¹ J) + tr(J₀⁻¹ J) − 4, or its constant pullback approximation (the
  affine-invariant metric of the pseudo-inertias frozen at the prior, Lee, Wensing and Park 2020;
  BIRDy's third PC-IDIM regulariser), Σ_links ‖L⁻¹ (J − J₀) L⁻ᵀ‖_F² with J₀ = L Lᵀ, a convex quadratic.

The weighted least-squares term Σ w_r (y_r − W_r β)² is taken from the normal equations of the
streamed solver (:meth:`JointWeightedLeastSquares.normal_equations`): with G = V diag(s) Vᵀ it is
‖diag(√s) Vᵀ z − diag(1/√s) Vᵀ c‖² plus a constant, a b-row least squares whatever the number of
samples. The conic program is built once with cvxpy parameters, so a re-weighted solve (IRLS) only
refactors it; Clarabel solves it (SCS on request). When no regulariser is set and the solution lies
inside the feasible set, a *polish* step moves it onto the unconstrained optimum along a feasible
line (the solver's tolerance would otherwise leave ~1e-6 relative error on weak directions).

:func:`consistency` reports, for any model linear in the parameters, whether it is physically
consistent: for a standard set the smallest pseudo-inertia eigenvalue of each link; for base values
the largest common margin t such that some standard set with these base values has every J ⪰ t·E
(a semidefinite feasibility problem: base values whose best t is ≤ 0 are physically impossible).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from robotid_sim.errors import ConfigError, IdentificationError, ModelError, RobotIdError
from robotid_sim.identification.estimator import EstimatorOptions
from robotid_sim.identification.least_squares import LeastSquaresFit
from robotid_sim.robot.physical import pseudo_inertia

#: friction coefficients that must be ≥ 0 (by their suffix; the offset S is free)
NONNEGATIVE_FRICTION = ("fc", "fs", "fv")
#: relative eigenvalue cut of the Gram matrix: directions below it carry no information from the data
GRAM_RANK_CUT = 1e-9
#: relative smallest eigenvalue of the Gram matrix above which the data determine every base value
FULL_RANK = 1e-13
#: cap of the margin of :func:`consistency` (a link the data do not determine could grow J without bound)
MARGIN_CAP = 1.0


class PhysicalOptions(EstimatorOptions):
    """Options of the physical-consistency constraints (``lmi_wls``, ``irls`` with ``physical``, ``two_loop``)."""

    margin: float = Field(
        1e-6,
        gt=0,
        description="smallest eigenvalue every link's pseudo-inertia must keep (kg·m² / kg): J ⪰ margin·E",
    )
    mass_bounds: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="prior mass range per link, {link number (1 = first moving link): [min, max]} in kg",
    )
    com_box: dict[str, tuple[tuple[float, float], tuple[float, float], tuple[float, float]]] = Field(
        default_factory=dict,
        description="prior COM box per link in its frame, {link number: [[x_min, x_max], [y_min, y_max], "
        "[z_min, z_max]]} in m",
    )
    regularization: Literal["none", "euclidean", "log_det", "constant_pullback"] = Field(
        "none",
        description="pull toward the prior's parameters: 'euclidean' ‖θ − θ₀‖², 'log_det' the geometric "
        "divergence of the pseudo-inertias (Lee et al. 2020), 'constant_pullback' its quadratic approximation "
        "at the prior, Σ_links ‖L⁻¹ (J − J₀) L⁻ᵀ‖_F² with J₀ = L Lᵀ (Lee, Wensing and Park 2020)",
    )
    regularization_weight: float = Field(
        0.0,
        ge=0,
        description="weight of the regulariser against the weighted squared residual (a sum over rows, each "
        "row's weight 1/σ² for WLS, so the data term grows with the number of samples)",
    )
    prior: str | None = Field(
        None,
        description="the prior (CAD) parameters: a bundled robot name or a URDF path (its sidecar beside it) "
        "with the same parameters as the identified robot; required by a regulariser",
    )
    solver: Literal["CLARABEL", "SCS"] = Field("CLARABEL", description="cvxpy conic solver")

    @field_validator("mass_bounds")
    @classmethod
    def _ordered_mass(cls, value):
        for link, (lo, hi) in value.items():
            if not (np.isfinite(lo) and np.isfinite(hi) and 0 <= lo < hi):
                raise ValueError(f"link {link}: mass bounds must be finite with 0 <= min < max, got [{lo}, {hi}]")
        return value

    @field_validator("com_box")
    @classmethod
    def _ordered_box(cls, value):
        for link, box in value.items():
            for axis, (lo, hi) in zip("xyz", box, strict=True):
                if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
                    raise ValueError(f"link {link}: COM {axis} range must be finite with min < max, got [{lo}, {hi}]")
        return value

    def needs_prior(self) -> bool:
        return self.regularization != "none" and self.regularization_weight > 0


def physical_options(estimator) -> PhysicalOptions:
    """The :class:`PhysicalOptions` fields of an estimator's options (which subclass them)."""
    return PhysicalOptions(**{k: getattr(estimator, k) for k in PhysicalOptions.model_fields})


# ------------------------------------------------------------------------------ structure layout
@dataclass(frozen=True)
class _Layout:
    """Where each constrained quantity sits in θ."""

    links: np.ndarray  # (n, 10) indices of each link's inertial parameters
    nonnegative: np.ndarray  # indices of Ia and of the nonnegative friction coefficients
    names: list[str]

    @classmethod
    def of(cls, structure) -> _Layout:
        names = structure.parameter_names
        slices = structure.parameter_slices()
        links = np.asarray(slices["inertial"]).reshape(-1, 10)
        friction = [int(i) for i in slices["friction"] if names[i].rstrip("0123456789") in NONNEGATIVE_FRICTION]
        nonnegative = np.array(sorted([*map(int, slices["rotor"]), *friction]), dtype=int)
        return cls(links, nonnegative, names)

    def link_index(self, key: str, what: str) -> int:
        n = len(self.links)
        try:
            k = int(key)
        except (TypeError, ValueError):
            k = 0
        if not 1 <= k <= n:
            raise ConfigError(f"option '{what}': link {key!r} is not a link number from 1 to {n}")
        return k - 1

    def min_eigenvalues(self, theta) -> np.ndarray:
        """Smallest pseudo-inertia eigenvalue (n,) of each link of ``theta`` (p,)."""
        return np.linalg.eigvalsh(pseudo_inertia(np.asarray(theta, float)[self.links]))[:, 0]

    def pseudo_inertia_constraints(self, theta, lower) -> tuple[list, list]:
        """(J per link, constraints J = J(θ_link) ⪰ ``lower``·E) for the cvxpy variable ``theta``."""
        import cvxpy as cp

        Js, constraints = [], []
        for k, idx in enumerate(self.links):
            J = cp.Variable((4, 4), symmetric=True, name=f"J{k + 1}")
            constraints += [cp.vec(J, order="C") == _J_MAP @ theta[idx], J >> lower * np.eye(4)]
            Js.append(J)
        return Js, constraints


#: vec(J) (row-major, 16) = _J_MAP @ phi (10): the pseudo-inertia is linear in the link's parameters
_J_MAP = np.stack([pseudo_inertia(e).reshape(16) for e in np.eye(10)], axis=1)


def link_min_eigenvalues(structure, theta) -> np.ndarray:
    """Smallest pseudo-inertia eigenvalue (n,) of each link of the standard parameters ``theta`` (p,)."""
    return _Layout.of(structure).min_eigenvalues(theta)


def load_prior(prior: str, structure) -> np.ndarray:
    """The standard parameters (p,) of a bundled robot or URDF, checked to have ``structure``'s parameters."""
    from robotid_sim.robot import load_robot

    try:
        robot = load_robot(prior if not str(prior).endswith(".urdf") else Path(prior))
    except RobotIdError as exc:
        raise ConfigError(f"option 'prior': {exc}") from None
    if robot.parameter_names != structure.parameter_names:
        raise ConfigError(
            f"option 'prior': robot '{robot.name}' has other standard parameters than '{structure.name}' "
            f"({robot.n_parameters} vs {structure.n_parameters}); give the CAD model of the same robot"
        )
    theta = robot.true_parameters()
    if np.any(link_min_eigenvalues(structure, theta) <= 0):
        raise ConfigError(f"option 'prior': robot '{robot.name}' is itself not physically consistent")
    return theta


# ------------------------------------------------------------------------------ the solver
class ConsistentLeastSquares:
    """min_θ ‖A (D K θ) − t‖² + regulariser, subject to the physical constraints (a cvxpy program).

    Args:
        structure: the robot structure (parameter layout; the friction law's constants do not matter).
        K: (b, p) base map β = K θ.
        options: :class:`PhysicalOptions`.

    Call :meth:`solve` with a scaled normal-equation system (G, c) and its column scale D as many times
    as needed: the program is compiled once.
    """

    def __init__(self, structure, K: np.ndarray, options: PhysicalOptions):
        import cvxpy as cp

        self.structure, self.options = structure, options
        self.K = np.asarray(K, float)
        self._K_pinv = np.linalg.pinv(self.K)
        b, p = self.K.shape
        layout = _Layout.of(structure)
        self.layout = layout
        if options.needs_prior() and options.prior is None:
            raise ConfigError("option 'prior' is required by a regulariser: a bundled robot name or a URDF path")
        self.prior = load_prior(options.prior, structure) if options.needs_prior() else None
        self.theta = cp.Variable(p, name="theta")
        self.A = cp.Parameter((b, p), name="A")
        self.t = cp.Parameter(b, name="t")
        objective = cp.sum_squares(self.A @ self.theta - self.t)
        # prior knowledge as index rows, for the program and for :meth:`feasible`: (mass, min, max) and
        # (first moment, mass, min, max), i.e. min·m <= m·c <= max·m
        self._masses = [
            (layout.links[layout.link_index(key, "mass_bounds"), 9], lo, hi)
            for key, (lo, hi) in options.mass_bounds.items()
        ]
        self._moments = []
        for key, box in options.com_box.items():
            idx = layout.links[layout.link_index(key, "com_box")]
            self._moments += [(idx[6 + axis], idx[9], lo, hi) for axis, (lo, hi) in enumerate(box)]
        self._J, constraints = layout.pseudo_inertia_constraints(self.theta, options.margin)
        if layout.nonnegative.size:
            constraints.append(self.theta[layout.nonnegative] >= 0)
        for i, lo, hi in self._masses:
            constraints += [self.theta[i] >= lo, self.theta[i] <= hi]
        for h, m, lo, hi in self._moments:
            constraints += [self.theta[h] >= lo * self.theta[m], self.theta[h] <= hi * self.theta[m]]
        weight = self.weight = cp.Parameter(nonneg=True, name="weight")  # the regulariser's, over the data's scale
        if self.prior is not None and options.regularization == "euclidean":
            objective = objective + weight * cp.sum_squares(self.theta - self.prior)
        elif self.prior is not None and options.regularization == "log_det":
            J0 = pseudo_inertia(self.prior[layout.links])
            for J, J0_k in zip(self._J, J0, strict=True):
                objective = objective + weight * (-cp.log_det(J) + cp.trace(np.linalg.inv(J0_k) @ J) - 4.0)
        elif self.prior is not None and options.regularization == "constant_pullback":
            J0 = pseudo_inertia(self.prior[layout.links])
            for J, J0_k in zip(self._J, J0, strict=True):
                L_inv = np.linalg.inv(np.linalg.cholesky(J0_k))  # the prior is consistent: J₀ ≻ 0
                objective = objective + weight * cp.sum_squares(L_inv @ (J - J0_k) @ L_inv.T)
        self.problem = cp.Problem(cp.Minimize(objective), constraints)
        self.status = ""

    def solve(
        self,
        G: np.ndarray,
        c: np.ndarray,
        scale: np.ndarray,
        unconstrained: Callable[[], np.ndarray] | None = None,
    ) -> np.ndarray:
        """θ (p,) minimising ‖W β − y‖²_w (scaled normal equations ``G z = c``, z = scale·β) under the constraints.

        Args:
            G, c: the scaled weighted normal equations of the rows in use.
            scale: (b,) their column scale.
            unconstrained: returns the unconstrained optimum z* of the same system; the polish step moves
                toward it. Called only without a regulariser and when the data determine every base value
                (every eigenvalue of G above :data:`FULL_RANK` of the largest).

        Raises:
            IdentificationError: the constraints cannot be met (contradictory bounds) or the solver failed.
        """
        import cvxpy as cp

        s, V = np.linalg.eigh(0.5 * (G + G.T))
        keep = s > GRAM_RANK_CUT * max(s[-1], 1e-300)
        root = np.zeros_like(G)
        # the data term divided by its largest curvature (Gautier weights of near-exact data are huge), the
        # regulariser's weight with it: the same minimiser, numbers the conic solver handles
        size = max(s[-1], 1e-300)
        self.weight.value = self.options.regularization_weight / size
        s = s / size
        root[: keep.sum()] = np.sqrt(s[keep])[:, None] * V[:, keep].T
        t = np.zeros(len(c))
        t[: keep.sum()] = (V[:, keep].T @ (c / size)) / np.sqrt(s[keep])
        DK = np.asarray(scale, float)[:, None] * self.K
        self.A.value = root @ DK
        self.t.value = t
        solvers = [self.options.solver, *(other for other in ("CLARABEL", "SCS") if other != self.options.solver)]
        for k, name in enumerate(solvers):  # a numerical breakdown of one solver: the other one
            try:
                with warnings.catch_warnings():  # an inaccurate solution is reported in ``status``, not on the terminal
                    warnings.simplefilter("ignore", UserWarning)
                    self.problem.solve(solver=getattr(cp, name))
                break
            except cp.error.SolverError as exc:
                if k == len(solvers) - 1:
                    raise IdentificationError(f"the LMI least squares failed in {solvers}: {exc}") from None
        status = self.problem.status
        self.status = status if name == self.options.solver else f"{status} ({name}: {self.options.solver} failed)"
        if status in ("infeasible", "infeasible_inaccurate"):
            raise IdentificationError(
                "no physically consistent parameters meet the constraints: check 'mass_bounds', 'com_box' and "
                f"'margin' (now {self.options.margin:g}) against the robot"
            )
        if self.theta.value is None or status not in ("optimal", "optimal_inaccurate"):
            raise IdentificationError(f"the LMI least squares ended with solver status '{status}'")
        theta = np.array(self.theta.value, float)
        if unconstrained is not None and self.prior is None and s[0] > FULL_RANK:
            theta = self._polish(theta, np.asarray(unconstrained(), float), G, c, DK, scale)
        return self._restore_feasibility(theta)

    def _restore_feasibility(self, theta: np.ndarray) -> np.ndarray:
        """θ, or where the solver's tolerance left it short of the constraints (an inaccurate solve: BIRDy's TX40
        with a Euclidean pull toward the prior ended 2e-6 below the margin on link 6), the point nearest θ on
        the segment toward the prior that meets them. The constraints are linear in θ and the prior meets them
        (it is consistent), so that point exists and is found by bisection. Without a prior θ is left as it is
        (its consistency is reported)."""
        if self.prior is None or self.feasible(theta) or not self.feasible(self.prior):
            return theta
        lo, hi = 0.0, 1.0  # infeasible at lo, feasible at hi
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            if self.feasible((1.0 - mid) * theta + mid * self.prior):
                hi = mid
            else:
                lo = mid
        return (1.0 - hi) * theta + hi * self.prior

    def feasible(self, theta: np.ndarray, slack: float = 0.0) -> bool:
        """Whether ``theta`` meets every constraint (eigenvalues against ``margin·(1 − slack)``)."""
        layout = self.layout
        if np.any(layout.min_eigenvalues(theta) < self.options.margin * (1.0 - slack)):
            return False
        if layout.nonnegative.size and np.any(theta[layout.nonnegative] < 0):
            return False
        return all(lo <= theta[i] <= hi for i, lo, hi in self._masses) and all(
            lo * theta[m] <= theta[h] <= hi * theta[m] for h, m, lo, hi in self._moments
        )

    def _polish(
        self, theta: np.ndarray, z_star: np.ndarray, G: np.ndarray, c: np.ndarray, DK: np.ndarray, scale: np.ndarray
    ) -> np.ndarray:
        """Move from the solver's θ toward the unconstrained optimum as far as the constraints allow.

        The step is the least-norm change of θ that gives the base values of ``z_star``; the
        objective is convex and smallest at ``z_star``, so every step along it lowers the objective.
        """
        if not self.feasible(theta, slack=1e-3):
            return theta
        step = self._K_pinv @ ((z_star - DK @ theta) / scale)  # K has full row rank: (D K)⁺ = K⁺ D⁻¹

        def cost(th):
            z = DK @ th
            return float(z @ G @ z - 2 * c @ z)

        if self.feasible(theta + step):
            return theta + step
        lo, hi = 0.0, 1.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self.feasible(theta + mid * step) else (lo, mid)
        best = theta + lo * step
        return best if cost(best) <= cost(theta) else theta


# ------------------------------------------------------------------------------ consistency of any model
@dataclass(frozen=True)
class Consistency:
    """Whether a parameter set is physically consistent.

    Attributes:
        consistent: every link's pseudo-inertia ≻ 0, rotor inertia and friction coefficients ≥ 0.
        link_min_eigenvalue: (n,) smallest pseudo-inertia eigenvalue per link: of the standard set
            itself, or (for base values) of the standard set found with the largest common margin.
        source: ``"standard"`` (a full standard set) or ``"base"`` (the best set with these base values).
        note: what failed, in words ("" when consistent).
    """

    consistent: bool
    link_min_eigenvalue: np.ndarray
    source: str
    note: str = ""


def standard_consistency(structure, theta) -> Consistency:
    """The consistency of a full standard parameter set (p,)."""
    theta = np.asarray(theta, float)
    layout = _Layout.of(structure)
    eig = layout.min_eigenvalues(theta)
    notes = [f"link {k + 1} pseudo-inertia eigenvalue {e:.3g} <= 0" for k, e in enumerate(eig) if e <= 0]
    notes += [f"{layout.names[i]} = {theta[i]:.3g} < 0" for i in layout.nonnegative if theta[i] < 0]
    return Consistency(not notes, eig, "standard", "; ".join(notes))


def base_consistency(structure, K: np.ndarray, beta: np.ndarray) -> Consistency:
    """Whether some standard set θ with K θ = ``beta`` is physically consistent (a semidefinite program).

    Maximises the common margin t ≤ :data:`MARGIN_CAP` with every link's J(θ) ⪰ t·E, rotor inertia and
    friction coefficients ≥ 0; the base values are consistent when t > 0.
    """
    import cvxpy as cp

    layout = _Layout.of(structure)
    K = np.asarray(K, float)
    beta = np.asarray(beta, float)
    scale = np.maximum(np.abs(beta), 1e-3)  # equality rows scaled to unit size
    theta = cp.Variable(K.shape[1])
    margin = cp.Variable()
    _, constraints = layout.pseudo_inertia_constraints(theta, margin)
    constraints += [(K / scale[:, None]) @ theta == beta / scale, margin <= MARGIN_CAP]
    if layout.nonnegative.size:
        constraints.append(theta[layout.nonnegative] >= 0)
    problem = cp.Problem(cp.Maximize(margin), constraints)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError as exc:  # pragma: no cover - solver breakdown
        return Consistency(False, np.full(len(layout.links), np.nan), "base", f"the feasibility check failed: {exc}")
    if problem.status in ("infeasible", "infeasible_inaccurate") or theta.value is None:
        return Consistency(
            False,
            np.full(len(layout.links), np.nan),
            "base",
            "no standard set with these base values has its rotor inertias and friction coefficients >= 0",
        )
    eig = layout.min_eigenvalues(theta.value)
    ok = bool(margin.value > 0 and np.all(eig > 0))
    best = float(margin.value)
    note = "" if ok else f"no standard set with these base values has every pseudo-inertia > 0 (best margin {best:.3g})"
    return Consistency(ok, eig, "base", note)


def closest_consistent_standard(structure, K: np.ndarray, beta: np.ndarray, prior: np.ndarray, margin: float = 1e-6):
    """The physically consistent standard set θ (p,) closest to ``prior`` that has the base values ``beta``.

    FloBaRoID's "closest to CAD" recovery as a semidefinite program: minimise ‖θ − θ₀‖² subject to K θ = β
    (rows scaled to unit size), every link's pseudo-inertia J(θ) ⪰ ``margin``·E (or half the largest margin
    :func:`base_consistency` finds, if smaller) and rotor inertias and friction coefficients ≥ 0. The
    solver's θ is then moved by the least-norm step onto K θ = β exactly (over the parameters not held at a
    bound), so the torque of θ is the base model's to rounding.

    Raises:
        ModelError: no consistent standard set has these base values, naming the link (or the friction or
            rotor parameter) that cannot be made consistent.
    """
    import cvxpy as cp

    layout = _Layout.of(structure)
    K, beta, prior = (np.asarray(x, float) for x in (K, beta, prior))
    scale = np.maximum(np.abs(beta), 1e-3)
    theta, lower = cp.Variable(K.shape[1]), cp.Parameter(nonneg=True)
    _, constraints = layout.pseudo_inertia_constraints(theta, lower)
    constraints.append((K / scale[:, None]) @ theta == beta / scale)
    if layout.nonnegative.size:
        constraints.append(theta[layout.nonnegative] >= 0)
    # the norm, not its square: the same minimiser, and a solver tolerance on it is one on θ (not on θ²)
    problem = cp.Problem(cp.Minimize(cp.norm(theta - prior, 2)), constraints)
    for attempt in range(2):
        lower.value = margin
        if attempt:  # consistent only with a smaller margin than asked: half the largest one possible
            check = base_consistency(structure, K, beta)
            if not check.consistent:
                raise ModelError(_no_consistent_set(structure, layout, check, K, beta))
            lower.value = min(margin, 0.5 * float(np.min(check.link_min_eigenvalue)))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                problem.solve(solver=cp.CLARABEL)
        except cp.error.SolverError as exc:  # pragma: no cover - solver breakdown
            raise ModelError(f"the closest consistent standard set was not found (Clarabel failed: {exc})") from None
        if problem.status in ("optimal", "optimal_inaccurate") and theta.value is not None:
            break
    else:
        raise ModelError(f"the closest consistent standard set was not found (solver status '{problem.status}')")
    solution = np.array(theta.value, float)
    held = np.zeros(len(solution), bool)
    held[layout.nonnegative] = solution[layout.nonnegative] <= 1e-9 * max(1.0, float(np.abs(solution).max()))
    solution[held] = 0.0
    free = ~held
    solution[free] += np.linalg.pinv(K[:, free]) @ (beta - K @ solution)
    final = standard_consistency(structure, solution)
    if not final.consistent:
        raise ModelError(f"the closest consistent standard set lost its consistency in the last step: {final.note}")
    return solution


def _no_consistent_set(structure, layout: _Layout, check: Consistency, K: np.ndarray, beta: np.ndarray) -> str:
    """The message of :func:`closest_consistent_standard` when no consistent set exists, naming the culprit."""
    for r in range(len(beta)):  # a base value that is one nonnegative parameter alone, and negative
        (cols,) = np.nonzero(K[r])
        if len(cols) == 1 and cols[0] in layout.nonnegative and beta[r] / K[r, cols[0]] < 0:
            name = layout.names[cols[0]]
            return (
                f"no physically consistent standard parameter set reproduces the model's base parameters: "
                f"{name} = {beta[r] / K[r, cols[0]]:.4g} must be >= 0 (identify again, e.g. with lmi_wls)"
            )
    eig = check.link_min_eigenvalue
    k = int(np.nanargmin(eig)) if np.any(np.isfinite(eig)) else 0
    joint = structure.joints[k]
    return (
        f"no physically consistent standard parameter set reproduces the model's base parameters: link {k + 1} "
        f"('{joint.link_name}', carried by joint '{joint.name}') cannot be a rigid body ({check.note}); identify "
        "again with more or better data, or with lmi_wls (physically consistent by construction)"
    )


def model_consistency(model) -> Consistency | None:
    """:func:`standard_consistency` or :func:`base_consistency` of a model linear in inertial parameters
    (a residual model: of its base model); None for a model without inertial parameters.

    Told apart by what they hold, not by class (the model kinds' modules import this one, through
    :mod:`robotid_sim.identification.export`): a model over a robot structure whose parameters are the
    structure's full standard set is a standard set; one with base values, a base-parameter model."""
    while getattr(model, "kind", None) == "residual":
        model = model.base
    structure = getattr(model, "structure", None)
    if structure is None or not hasattr(model, "base_values"):
        return None
    if list(model.parameter_names) == list(structure.parameter_names):
        return standard_consistency(structure, model.values)
    base = structure.base_parameters()
    return base_consistency(structure, base.K, model.base_values())


# ------------------------------------------------------------------------------ on a problem
class PhysicalLeastSquares:
    """The constrained counterpart of :meth:`JointWeightedLeastSquares.solve` on a problem's rows in use.

    Args:
        problem: the :class:`~robotid_sim.identification.IdentificationProblem`.
        options: :class:`PhysicalOptions`.
        program: a :class:`ConsistentLeastSquares` of the same parameter layout and base map to reuse
            (``two_loop`` solves one per friction exponent); default: a new one.
    """

    def __init__(self, problem, options: PhysicalOptions, program: ConsistentLeastSquares | None = None):
        self.problem = problem
        self.ls = problem.least_squares()
        self.program = program or ConsistentLeastSquares(problem.structure, problem.base.K, options)

    def solve(self, weights=None, keep: np.ndarray | None = None) -> tuple[np.ndarray, LeastSquaresFit]:
        """(θ (p,), fit of its base values β = K θ with the residual of every row in use)."""
        G, c = self.ls.normal_equations(weights, keep)

        def unconstrained() -> np.ndarray:
            return self.ls.solve(weights, keep, covariance=False).beta * self.ls.scale

        theta = self.program.solve(G, c, self.ls.scale, unconstrained)
        beta = self.problem.base.K @ theta
        return theta, LeastSquaresFit(beta=beta, covariance=None, residual=self.ls.y - self.ls.source.predict(beta))

"""The Lagrangian feature basis of a revolute arm (seed 002, Petersen; SPEC §8), what ``lagrangian_features`` uses.

The model kind :class:`~robotid_sim.identification.models.lagrangian.LagrangianFeatureModel` evaluates this
basis; the ``auto_features`` estimator (``robotid_sim_plugins.auto_features``: LOOCV smoothing,
differentiation, the least-squares fit) builds it and fits its coefficients.

Seed 002 writes the dynamics of an n-R arm as

    A(q) qdd + B(q) [qd qd] + C(q) [qd²] + G(q) = τ                                   (seed 002, p. 1)

with A the mass (inertia) matrix, [qd qd] the n(n−1)/2 products qd_j qd_k (j < k), [qd²] the n squares,
B and C the Coriolis and centrifugal matrices, both made of the Christoffel symbols of A,

    b_ijk = ½ (∂a_ij/∂q_k + ∂a_ik/∂q_j − ∂a_jk/∂q_i),   B[i, (j,k)] = 2 b_ijk,   C[i, j] = b_ijj   (seed 002, p. 2)

and G(q) the gravity torque. Its feature vector fills every entry of A with f(q_i, …, q_n) =
C + a1 cos(q_i) + a2 cos(q_i + q_i+1) + … and G with cosine sums, each entry fitted on its own, which left
A non-symmetric (seed 002, "Further work"). Here, as the seed's further work proposes, only A(q) is
parameterised, **once per entry of its upper triangle** (so A is symmetric by construction), B and C are
its derivatives (the Christoffel symbols above), and G is the gradient of a potential energy U(q). The
torque is then linear in the coefficients θ of A, U and the friction terms:

    τ_i = Σ_j a_ij qdd_j + Σ_j ȧ_ij qd_j − ½ Σ_jk ∂a_jk/∂q_i qd_j qd_k + ∂U/∂q_i + friction_i

(the Lagrange equations, ȧ_ij = Σ_l ∂a_ij/∂q_l qd_l), so one least-squares fit over every joint's equation
gives θ. Nothing of the robot's description is used but its joint count (and that every joint is revolute).

**Trigonometric terms.** Every function of q is 1, cos(k·q) or sin(k·q) for an integer frequency vector k
(the first non-zero entry of k positive). :func:`planar_terms` gives the terms of a chain of parallel
revolute axes (a planar arm, seed 002's case): with φ_a = q_1 + … + q_a the absolute angle of link a and
S_ab = φ_b − φ_a = q_a+1 + … + q_b (a < b),

* a_ij (i ≤ j) ∈ span{1, cos S_ab, sin S_ab : i ≤ a < b ≤ n, b ≥ j}: the kinetic energy of link c is
  m_c |v_c|² + I_c φ̇_c², and v_c·v_c holds cos(φ_a − φ_b + δ) for the links a, b ≤ c that move with
  joints i and j; δ, a centre of mass off the link's line, brings the sines (the seed's cosines only hold
  for centres of mass on that line, and its sums only start at q_i: it misses cos(q_3) in a_11 of a 3R arm);
* U ∈ span{cos φ_a, sin φ_a : a = 1 … n} (any direction of gravity in the plane of motion; none gives 0).

:func:`general_terms` gives, for any revolute arm, every frequency vector up to an ``order`` (sum of |k_l|),
with |k_l| ≤ 2 in A (products of two rotations) and ≤ 1 in U (one rotation per joint) — a far larger
basis, practical for a few joints only.

Friction terms per joint (seed 002 has none; planar3r's truth has them): viscous qd_j, Coulomb sign(qd_j)
and a constant offset.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

import numpy as np

from robotid_sim.errors import ConfigError, ModelError

#: the trigonometric function names of a term
FUNCTIONS = ("1", "cos", "sin")
#: the friction terms, by name: viscous qd_j, Coulomb sign(qd_j), constant offset
FRICTION_TERMS = ("viscous", "coulomb", "offset")
#: the friction term sets an estimator may ask for
FRICTION_SETS: dict[str, tuple[str, ...]] = {
    "none": (),
    "viscous": ("viscous",),
    "coulomb_viscous": ("viscous", "coulomb", "offset"),
}
#: largest number of terms :func:`general_terms` builds before refusing (the fit grows with its square)
MAX_TERMS = 2000


@dataclass(frozen=True)
class TrigTerm:
    """One function of q: ``1``, ``cos(k·q)`` or ``sin(k·q)``.

    Attributes:
        function: ``"1"``, ``"cos"`` or ``"sin"``.
        frequency: integer vector k (n,), the first non-zero entry positive; all zeros for ``"1"``.
    """

    function: str
    frequency: tuple[int, ...]

    def __str__(self) -> str:
        if self.function == "1":
            return "1"
        parts = []
        for j, k in enumerate(self.frequency):
            if k == 0:
                continue
            sign = "-" if k < 0 else ("+" if parts else "")
            parts.append(f"{sign}{abs(k) if abs(k) != 1 else ''}q{j + 1}")
        return f"{self.function}({''.join(parts)})"

    def to_list(self) -> list:
        return [self.function, list(self.frequency)]

    @classmethod
    def from_list(cls, value, n_dof: int) -> TrigTerm:
        """From ``[function, [k_1, …, k_n]]`` as :meth:`to_list` writes it.

        Raises:
            ModelError: a malformed term, naming it.
        """
        if (
            not isinstance(value, list | tuple)
            or len(value) != 2
            or value[0] not in FUNCTIONS
            or not isinstance(value[1], list | tuple)
            or len(value[1]) != n_dof
            or not all(isinstance(k, int) and not isinstance(k, bool) for k in value[1])
        ):
            raise ModelError(
                f"a trigonometric term must be [function, [k_1, …, k_{n_dof}]] with function in {FUNCTIONS} and "
                f"whole-number frequencies, got {value!r:.120}"
            )
        term = cls(value[0], tuple(value[1]))
        nonzero = [k for k in term.frequency if k]
        if (term.function == "1") != (not nonzero) or (nonzero and nonzero[0] < 0):
            raise ModelError(
                f"term {value!r:.120}: '1' takes the zero frequency, cos/sin a non-zero one whose first entry is > 0"
            )
        return term


def _pair(k) -> list[TrigTerm]:
    k = tuple(int(x) for x in k)
    return [TrigTerm("cos", k), TrigTerm("sin", k)]


def _contiguous_sum(n: int, a: int, b: int) -> tuple[int, ...]:
    """k of S_ab = q_{a+1} + … + q_b (0-based joints a+1 … b)."""
    return tuple(1 if a < j <= b else 0 for j in range(n))


def planar_terms(n: int) -> tuple[dict[tuple[int, int], list[TrigTerm]], list[TrigTerm]]:
    """The terms of a planar n-R arm (parallel axes): ``(mass, potential)`` (module docstring).

    Returns:
        mass: for every (i, j), i ≤ j (0-based), the terms of a_ij.
        potential: the terms of U(q).
    """
    mass = {}
    for i in range(n):
        for j in range(i, n):
            terms = [TrigTerm("1", (0,) * n)]
            for a in range(i, n):
                for b in range(max(a + 1, j), n):
                    terms += _pair(_contiguous_sum(n, a, b))
            mass[i, j] = terms
    potential = [t for a in range(n) for t in _pair(_contiguous_sum(n, -1, a))]
    return mass, potential


def _frequencies(n: int, support: range, per_joint: int, order: int) -> list[tuple[int, ...]]:
    """Non-zero integer vectors on ``support`` with |k_l| ≤ per_joint and Σ|k_l| ≤ order, first non-zero > 0."""
    out = []
    for values in itertools.product(range(-per_joint, per_joint + 1), repeat=len(support)):
        nonzero = [v for v in values if v]
        if not nonzero or nonzero[0] < 0 or sum(abs(v) for v in values) > order:
            continue
        k = [0] * n
        for joint, v in zip(support, values, strict=True):
            k[joint] = v
        out.append(tuple(k))
    return sorted(out, key=lambda k: (sum(abs(x) for x in k), [-abs(x) for x in k], k))


def general_terms(n: int, order: int) -> tuple[dict[tuple[int, int], list[TrigTerm]], list[TrigTerm]]:
    """The terms of any revolute arm up to ``order``: ``(mass, potential)`` (module docstring).

    a_ij (i ≤ j) uses the joints after i (seed 002: "the i-th row and column of the mass matrix can not
    contain joint angles at or below the i-th joint angle"), |k_l| ≤ 2; U uses every joint, |k_l| ≤ 1.

    Raises:
        ConfigError: ``order`` below 1, or more than :data:`MAX_TERMS` terms.
    """
    if order < 1:
        raise ConfigError(f"auto_features: order must be >= 1, got {order}")
    mass = {}
    for i in range(n):
        freqs = _frequencies(n, range(i + 1, n), 2, order)
        for j in range(i, n):
            mass[i, j] = [TrigTerm("1", (0,) * n)] + [t for k in freqs for t in _pair(k)]
    potential = [t for k in _frequencies(n, range(n), 1, order) for t in _pair(k)]
    count = sum(len(t) for t in mass.values()) + len(potential)
    if count > MAX_TERMS:
        raise ConfigError(
            f"auto_features: features='general' with order {order} on {n} joints gives {count} terms (more than "
            f"{MAX_TERMS}); lower the order, or use features='planar' for an arm with parallel axes"
        )
    return mass, potential


@dataclass(frozen=True, eq=False)
class TermValues:
    """Values (N, T) and gradients (N, T, n) of a list of terms at q (N, n)."""

    values: np.ndarray
    gradients: np.ndarray


def evaluate_terms(terms: list[TrigTerm], q: np.ndarray) -> TermValues:
    """Each term and its gradient ∂/∂q at every sample; cos and sin of each frequency computed once."""
    N, n = q.shape
    frequencies = sorted({t.frequency for t in terms if t.function != "1"})
    index = {k: f for f, k in enumerate(frequencies)}
    K = np.array(frequencies, dtype=float).reshape(len(frequencies), n)
    angles = q @ K.T  # (N, F)
    cos, sin = np.cos(angles), np.sin(angles)
    values = np.empty((N, len(terms)))
    gradients = np.zeros((N, len(terms), n))
    for p, term in enumerate(terms):
        if term.function == "1":
            values[:, p] = 1.0
            continue
        f = index[term.frequency]
        k = K[f]
        if term.function == "cos":  # ∂cos(k·q)/∂q = −sin(k·q) k
            values[:, p] = cos[:, f]
            gradients[:, p, :] = -sin[:, f, None] * k
        else:  # ∂sin(k·q)/∂q = cos(k·q) k
            values[:, p] = sin[:, f]
            gradients[:, p, :] = cos[:, f, None] * k
    return TermValues(values, gradients)


@dataclass(frozen=True, eq=False)
class LagrangianBasis:
    """The parameterisation of A(q), U(q) and the friction of an n-R arm (module docstring).

    Parameter layout θ = [mass coefficients, potential coefficients, friction coefficients]:

    * mass parameter p is (row, col, term): a_row,col = a_col,row += θ_p term(q), row ≤ col;
    * potential parameter p is a term: U += θ_p term(q);
    * friction parameter p is (kind, joint): τ_joint += θ_p · {qd_joint, sign(qd_joint), 1}.

    Attributes:
        n_dof: n.
        mass_terms: (row, col, term) of each mass parameter (0-based joints).
        potential_terms: the terms of U.
        friction_terms: (kind, joint) of each friction parameter.
    """

    n_dof: int
    mass_terms: tuple[tuple[int, int, TrigTerm], ...]
    potential_terms: tuple[TrigTerm, ...]
    friction_terms: tuple[tuple[str, int], ...]

    def __post_init__(self):
        n = self.n_dof
        for row, col, term in self.mass_terms:
            if not (0 <= row <= col < n) or len(term.frequency) != n:
                raise ModelError(f"mass term ({row}, {col}, {term}) is not an upper-triangle entry of a {n}-joint arm")
        for kind, joint in self.friction_terms:
            if kind not in FRICTION_TERMS or not 0 <= joint < n:
                raise ModelError(
                    f"friction term ({kind!r}, {joint}) must be one of {FRICTION_TERMS} on a joint 0..{n - 1}"
                )
        for term in self.potential_terms:
            if term.function == "1" or len(term.frequency) != n:
                raise ModelError(f"potential term {term} must be cos or sin of a frequency of {n} joints")
        keys = [(r, c, t) for r, c, t in self.mass_terms] + list(self.potential_terms) + list(self.friction_terms)
        if len(set(keys)) != len(keys):
            raise ModelError("the basis lists a term twice")

    @classmethod
    def build(
        cls,
        n_dof: int,
        features: Literal["planar", "general"] = "planar",
        order: int = 2,
        friction: str = "coulomb_viscous",
    ) -> LagrangianBasis:
        """The basis of :func:`planar_terms` or :func:`general_terms` and the friction set ``friction``."""
        if friction not in FRICTION_SETS:
            raise ConfigError(f"auto_features: friction must be one of {sorted(FRICTION_SETS)}, got {friction!r}")
        mass, potential = planar_terms(n_dof) if features == "planar" else general_terms(n_dof, order)
        return cls(
            n_dof,
            tuple((i, j, t) for (i, j), terms in mass.items() for t in terms),
            tuple(potential),
            tuple((kind, j) for kind in FRICTION_SETS[friction] for j in range(n_dof)),
        )

    # ------------------------------------------------------------------ sizes and names
    @property
    def sizes(self) -> tuple[int, int, int]:
        """Numbers of mass, potential and friction parameters."""
        return len(self.mass_terms), len(self.potential_terms), len(self.friction_terms)

    def __len__(self) -> int:
        return sum(self.sizes)

    @property
    def names(self) -> list[str]:
        """One readable name per parameter: ``A12:cos(q2)``, ``U:sin(q1+q2)``, ``viscous2``."""
        return (
            [f"A{r + 1}{c + 1}:{t}" for r, c, t in self.mass_terms]
            + [f"U:{t}" for t in self.potential_terms]
            + [f"{kind}{j + 1}" for kind, j in self.friction_terms]
        )

    def split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, b, _ = self.sizes
        return theta[:a], theta[a : a + b], theta[a + b :]

    # ------------------------------------------------------------------ evaluation
    def _mass_selectors(self) -> np.ndarray:
        """(P_A, n, n): E_p = e_r e_cᵀ + e_c e_rᵀ (or e_r e_rᵀ on the diagonal) of each mass parameter."""
        E = np.zeros((len(self.mass_terms), self.n_dof, self.n_dof))
        for p, (r, c, _) in enumerate(self.mass_terms):
            E[p, r, c] = E[p, c, r] = 1.0
        return E

    def mass_values(self, q: np.ndarray) -> TermValues:
        return evaluate_terms([t for _, _, t in self.mass_terms], q)

    def mass_matrix(self, theta_mass: np.ndarray, q: np.ndarray) -> np.ndarray:
        """A(q) (N, n, n), symmetric by construction."""
        values = self.mass_values(q).values
        return np.einsum("np,pij->nij", values, theta_mass[:, None, None] * self._mass_selectors())

    def mass_gradient(self, theta_mass: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A(q) (N, n, n) and ∂A/∂q (N, n, n, n), index [sample, i, j, l] = ∂a_ij/∂q_l."""
        tv = self.mass_values(q)
        W = theta_mass[:, None, None] * self._mass_selectors()
        return np.einsum("np,pij->nij", tv.values, W), np.einsum("npl,pij->nijl", tv.gradients, W)

    def christoffel(self, theta_mass: np.ndarray, q: np.ndarray) -> np.ndarray:
        """b_ijk (N, n, n, n) = ½ (∂a_ij/∂q_k + ∂a_ik/∂q_j − ∂a_jk/∂q_i) (seed 002, p. 2)."""
        _, dA = self.mass_gradient(theta_mass, q)
        return 0.5 * (dA + np.swapaxes(dA, 2, 3) - np.einsum("njki->nijk", dA))

    def gravity(self, theta_potential: np.ndarray, q: np.ndarray) -> np.ndarray:
        """G(q) = ∂U/∂q (N, n)."""
        return np.einsum("npl,p->nl", evaluate_terms(list(self.potential_terms), q).gradients, theta_potential)

    def friction_columns(self, qd: np.ndarray) -> np.ndarray:
        """(N, n, P_F): the friction regressor."""
        N = qd.shape[0]
        out = np.zeros((N, self.n_dof, len(self.friction_terms)))
        for p, (kind, j) in enumerate(self.friction_terms):
            out[:, j, p] = qd[:, j] if kind == "viscous" else (np.sign(qd[:, j]) if kind == "coulomb" else 1.0)
        return out

    def coriolis_torque(self, theta_mass: np.ndarray, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """Σ_jk b_ijk qd_j qd_k (N, n) = Ȧ qd − ½ ∂(qdᵀ A qd)/∂q."""
        _, dA = self.mass_gradient(theta_mass, q)
        A_dot = np.einsum("nijl,nl->nij", dA, qd)
        return np.einsum("nij,nj->ni", A_dot, qd) - 0.5 * np.einsum("njki,nj,nk->ni", dA, qd, qd)

    def regressor(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, friction_qd: np.ndarray | None = None):
        """Φ (N, n, P): τ = Φ θ (module docstring: the Lagrange equations, linear in θ).

        ``friction_qd``: the velocities the friction terms read (default ``qd``).
        """
        tv = self.mass_values(q)
        E = self._mass_selectors()
        inertial = tv.values[:, None, :] * np.einsum("pij,nj->nip", E, qdd)  # a_ij qdd_j
        rate = np.einsum("npl,nl->np", tv.gradients, qd)  # d(term)/dt
        E_qd = np.einsum("pij,nj->nip", E, qd)
        quadratic = np.einsum("nj,pjk,nk->np", qd, E, qd)  # qdᵀ E_p qd
        coriolis = rate[:, None, :] * E_qd - 0.5 * np.swapaxes(tv.gradients, 1, 2) * quadratic[:, None, :]
        potential = np.swapaxes(evaluate_terms(list(self.potential_terms), q).gradients, 1, 2)
        friction = self.friction_columns(qd if friction_qd is None else friction_qd)
        return np.concatenate([inertial + coriolis, potential, friction], axis=2)

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict:
        return {
            "n_dof": self.n_dof,
            "mass_terms": [[r, c, *t.to_list()] for r, c, t in self.mass_terms],
            "potential_terms": [t.to_list() for t in self.potential_terms],
            "friction_terms": [[kind, j] for kind, j in self.friction_terms],
        }

    @classmethod
    def from_dict(cls, data: dict) -> LagrangianBasis:
        """Inverse of :meth:`to_dict`. Raises ModelError on a malformed basis, naming the field."""
        if not isinstance(data, dict):
            raise ModelError(f"field 'basis' must be a JSON object, got {type(data).__name__}")
        n = data.get("n_dof")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ModelError(f"field 'basis.n_dof' must be a whole number >= 1, got {n!r}")
        try:
            mass = [(int(r), int(c), TrigTerm.from_list([f, k], n)) for r, c, f, k in data["mass_terms"]]
            potential = [TrigTerm.from_list(t, n) for t in data["potential_terms"]]
            friction = [(str(kind), int(j)) for kind, j in data["friction_terms"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(
                f"field 'basis' must hold mass_terms [[row, col, function, [k…]], …], potential_terms and "
                f"friction_terms [[kind, joint], …] ({type(exc).__name__}: {exc})"
            ) from None
        return cls(n, tuple(mass), tuple(potential), tuple(friction))

"""DLG libraries and friction candidates of SINDy and stepwise SINDy (seed 000, Guo et al. 2025).

**Double-feature-set library generation (DLG, seed 000 Eq. 10–17, Algorithm 2).** The first
feature set holds the monomials of degree ≤ N1 in the elementary functions E = ∪ E_i, with
E_i = {sin q_i, cos q_i} for a revolute joint and {q_i} for a prismatic one (the products up to
order N1 of {1} ∪ E_i, Eq. 10–11): C(|E| + N1, N1) features (Eq. 13). The second feature set holds
monomials of the velocities and accelerations; the library is every product of a first and a second
feature. Products are built in canonical form (:meth:`~robotid_sim.identification.features.Feature.__mul__`),
so a monomial reached in two ways appears once. The seed's sizes are reproduced exactly
(:data:`SEED_ORDERS`):

- ``sindy``: second set = monomials of degree ≤ N2 = 2 in {qd_i} ∪ {qdd_i}; SCARA N1 = 1:
  8 × 45 = 360; three-axis N1 = 4: 210 × 28 = 5,880;
- ``stepwise_sindy``: Step I {1}, Step II monomials of degree ≤ 2 in {qd_i} (C(n + 2, 2)), Step III
  {1} ∪ {qdd_i}; SCARA N1 = 1, 1, 1: 8 + 120 + 40 = 168; three-axis N1 = 2, 4, 4: 28 + 2,100 + 840 = 2,968
  (the extraction lost Eq. 14–16; these second sets give both of the seed's counts, and with them
  N1 = 2, 4, 4 is the only choice of orders that gives 2,968).

``trig_basis`` (the estimators' default) also leaves out the first-set monomials holding cos² q_i:
by sin² + cos² = 1 they are combinations of the others, so the full set is a redundant frame, not a
basis (three-axis, N1 = 4: rank 129 of 210). The Lasso then has one representation per function to
choose from, and on the three-axis arm it fits about twice as fast.

**Friction candidates (seed 000 §4).** The sign function is split by the direction of motion:
``fwd(qd_i)`` (1 while joint i moves forward, else 0) and ``bwd(qd_i)`` carry separate Coulomb
levels for each direction; the Stribeck candidates are ``exp(-(qd_i/vs)^2)·fwd(qd_i)`` and
``exp(-(qd_i/vs)^2)·bwd(qd_i)`` for a small set of Stribeck velocities vs. They are added once
each (not multiplied by the first set) and enter only joint i's equation. In the stepwise
libraries the Coulomb split joins Steps I and II (the creep of the static data and the sweeps
both move), the Stribeck candidates Step III (only variable-velocity data passes through the low
speeds where they differ from the Coulomb split). They are reported apart from the DLG sizes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.identification.features import GAUSSIAN, Factor, Feature, FeatureLibrary

#: a small set of Stribeck velocities for the friction candidates (rad/s or m/s); seed 000 §4 uses 0.01, 0.02, …, 1
STRIBECK_VELOCITIES = (0.02, 0.05, 0.1, 0.2, 0.5)
#: truncation orders of seed 000 §3.3 (Table 2, Fig. 9): sindy (N1, N2) and stepwise (N1 of Steps I, II, III)
SEED_ORDERS: dict[str, dict[str, tuple[int, ...]]] = {
    "scara": {"sindy": (1, 2), "stepwise": (1, 1, 1)},
    "three_axis": {"sindy": (4, 2), "stepwise": (2, 4, 4)},
}
#: signals a revolute joint contributes to the first feature set as sin and cos (continuous is revolute too)
_ROTATING = ("revolute", "continuous")


def elementary_functions(joint_kinds) -> list[Feature]:
    """E = ∪ E_i (seed 000 Eq. 11): sin q_i, cos q_i for a revolute joint, q_i for a prismatic one.

    Args:
        joint_kinds: (n,) ``'revolute'``, ``'continuous'`` or ``'prismatic'`` per joint.

    Raises:
        ConfigError: another joint kind, naming it.
    """
    out = []
    for i, kind in enumerate(joint_kinds):
        if kind in _ROTATING:
            out += [Feature((Factor("sin", "q", i),)), Feature((Factor("cos", "q", i),))]
        elif kind == "prismatic":
            out.append(Feature((Factor("", "q", i),)))
        else:
            raise ConfigError(
                f"DLG library: joint {i + 1} is of kind {kind!r}; the first feature set knows revolute, continuous "
                "and prismatic joints (seed 000 Eq. 11)"
            )
    return out


def monomials(variables: list[Feature], order: int) -> list[Feature]:
    """Every monomial of degree 0 … ``order`` in ``variables``: the products up to ``order`` of {1} ∪ variables.

    C(len(variables) + order, order) features, in order of degree, the constant ``1`` first.
    """
    if order < 0:
        raise ConfigError(f"a truncation order must be >= 0, got {order}")
    out = [Feature()]
    for degree in range(1, order + 1):
        for combination in itertools.combinations_with_replacement(variables, degree):
            product = Feature()
            for v in combination:
                product = product * v
            out.append(product)
    return out


def first_feature_set(joint_kinds, order: int, *, trig_basis: bool = False) -> FeatureLibrary:
    """The first feature set of DLG (seed 000 Eq. 10–13): monomials of degree ≤ N1 = ``order`` in E.

    With ``trig_basis``, monomials with cos² q_i (or a higher power) are left out: by sin² + cos² = 1 each is a
    combination of the others, and the rest, sin^a q_i · cos^b q_i with b ≤ 1 per joint, is a basis of the
    same functions (on the 3R arm at N1 = 4: 129 of 210).
    """
    kinds = list(joint_kinds)
    features = monomials(elementary_functions(kinds), order)
    if trig_basis:
        features = [f for f in features if not any(x.function == "cos" and x.power >= 2 for x in f.factors)]
    return FeatureLibrary(len(kinds), tuple(features))


def second_feature_set(n_dof: int, signals: tuple[str, ...], order: int) -> FeatureLibrary:
    """A second feature set of DLG (seed 000 Eq. 14–16): monomials of degree ≤ ``order`` in the ``signals``.

    ``signals=("qd", "qdd"), order=2`` is the one-shot SINDy set; ``()`` or ``order=0`` is {1} (Step I);
    ``("qd",), 2`` Step II; ``("qdd",), 1`` Step III.
    """
    variables = [Feature((Factor("", s, i),)) for s in signals for i in range(n_dof)]
    return FeatureLibrary(int(n_dof), tuple(monomials(variables, order)))


def friction_candidates(
    n_dof: int, *, coulomb: bool = True, stribeck_velocities=()
) -> tuple[tuple[Feature, ...], tuple[int, ...]]:
    """Friction candidates of seed 000 §4 and the joint each belongs to.

    Returns:
        (features, joints): per joint i, with ``coulomb`` ``fwd(qd_i)`` and ``bwd(qd_i)`` (the sign
        function split by the direction of motion), and for each vs in ``stribeck_velocities``
        ``exp(-(qd_i/vs)^2)*fwd(qd_i)`` and ``exp(-(qd_i/vs)^2)*bwd(qd_i)``; ``joints[k]`` is the
        0-based joint whose equation feature k may enter.
    """
    velocities = [float(v) for v in stribeck_velocities]
    if any(not (np.isfinite(v) and v > 0) for v in velocities):
        raise ConfigError(f"Stribeck velocities must be finite and > 0, got {velocities}")
    features, joints = [], []
    for i in range(n_dof):
        forward, backward = Feature((Factor("fwd", "qd", i),)), Feature((Factor("bwd", "qd", i),))
        if coulomb:
            features += [forward, backward]
            joints += [i, i]
        for vs in velocities:
            bump = Feature((Factor(GAUSSIAN, "qd", i, 1, vs),))
            features += [bump * forward, bump * backward]
            joints += [i, i]
    return tuple(features), tuple(joints)


@dataclass(frozen=True, eq=False)
class DLGLibrary:
    """A library from DLG: every product first × second, then the joint-specific friction candidates.

    Attributes:
        first: the first feature set (features of q).
        second: the second feature set (features of qd, qdd).
        friction: friction candidates (seed 000 §4), not multiplied by ``first``.
        friction_joints: per friction candidate, the 0-based joint whose equation it may enter.
    """

    first: FeatureLibrary
    second: FeatureLibrary
    friction: tuple[Feature, ...] = ()
    friction_joints: tuple[int, ...] = ()

    def __post_init__(self):
        if self.first.n_dof != self.second.n_dof or len(self.friction) != len(self.friction_joints):
            raise ConfigError("DLG library: the feature sets disagree on the joint count or friction joints")

    @property
    def n_dof(self) -> int:
        return self.first.n_dof

    @property
    def product_size(self) -> int:
        """|first| × |second|: the DLG size the seed counts (Eq. 17)."""
        return len(self.first) * len(self.second)

    @cached_property
    def _friction_kept(self) -> tuple[int, ...]:
        """Indices of the friction candidates that are not already a product (deduplication)."""
        products = {str(f) for f in self._products}
        return tuple(k for k, f in enumerate(self.friction) if str(f) not in products)

    @cached_property
    def _products(self) -> tuple[Feature, ...]:
        return tuple(a * b for a in self.first.features for b in self.second.features)

    @cached_property
    def library(self) -> FeatureLibrary:
        """The whole library as a :class:`FeatureLibrary`: products (first-major), then friction candidates."""
        return FeatureLibrary(self.n_dof, self._products + tuple(self.friction[k] for k in self._friction_kept))

    def __len__(self) -> int:
        return self.product_size + len(self._friction_kept)

    def evaluate(self, q, qd, qdd) -> np.ndarray:
        """Φ (N, F) in the order of :attr:`library`: the two sets evaluated by :meth:`FeatureLibrary.evaluate`,
        multiplied as an outer product per sample (equal to ``library.evaluate`` to rounding, much faster)."""
        first = self.first.evaluate(q, qd, qdd)
        second = self.second.evaluate(q, qd, qdd)
        N = first.shape[0]
        products = (first[:, :, None] * second[:, None, :]).reshape(N, -1)
        if not self._friction_kept:
            return products
        friction = FeatureLibrary(self.n_dof, tuple(self.friction[k] for k in self._friction_kept))
        return np.concatenate([products, friction.evaluate(q, qd, qdd)], axis=1)

    def joint_masks(self) -> np.ndarray:
        """(n, F) bool: which features may enter each joint's equation (friction candidates only their own)."""
        mask = np.ones((self.n_dof, len(self)), dtype=bool)
        for c, k in enumerate(self._friction_kept):
            column = self.product_size + c
            mask[:, column] = False
            mask[self.friction_joints[k], column] = True
        return mask

    def describe(self) -> dict:
        """Sizes for diagnostics: first, second, products (the seed's count), friction, total."""
        return {
            "first_set": len(self.first),
            "second_set": len(self.second),
            "products": self.product_size,
            "friction_candidates": len(self._friction_kept),
            "size": len(self),
        }


def sindy_library(
    joint_kinds,
    first_order: int,
    second_order: int = 2,
    *,
    second_set: Literal["dlg", "steps"] = "dlg",
    coulomb: bool = True,
    stribeck_velocities=(),
    trig_basis: bool = False,
) -> DLGLibrary:
    """The one-shot SINDy library of seed 000 (DLG, Eq. 10–17).

    Args:
        joint_kinds: (n,) joint kinds (``RobotStructure.joint_kinds``).
        first_order: N1 of the first feature set.
        second_order: N2 of the second set (``second_set="dlg"`` only).
        second_set: ``"dlg"``: monomials of degree ≤ N2 in {qd_i} ∪ {qdd_i} (the seed's count, 360 on the
            SCARA); ``"steps"``: the union of the stepwise second sets, {1} ∪ {qd_i, qd_i·qd_j} ∪ {qdd_i},
            so the model is linear in qdd (forward dynamics always available).
        coulomb, stribeck_velocities: friction candidates (:func:`friction_candidates`).
        trig_basis: leave out the first-set monomials with cos² (:func:`first_feature_set`).
    """
    kinds = list(joint_kinds)
    n = len(kinds)
    if second_set == "dlg":
        second = second_feature_set(n, ("qd", "qdd"), second_order)
    elif second_set == "steps":
        velocity = second_feature_set(n, ("qd",), 2).features
        second = FeatureLibrary(n, velocity + second_feature_set(n, ("qdd",), 1).features[1:])
    else:
        raise ConfigError(f"second_set must be 'dlg' or 'steps', got {second_set!r}")
    friction, joints = friction_candidates(n, coulomb=coulomb, stribeck_velocities=stribeck_velocities)
    return DLGLibrary(first_feature_set(kinds, first_order, trig_basis=trig_basis), second, friction, joints)


def stepwise_libraries(
    joint_kinds, first_orders=(2, 2, 2), *, coulomb: bool = True, stribeck_velocities=(), trig_basis: bool = False
) -> tuple[DLGLibrary, DLGLibrary, DLGLibrary]:
    """The libraries of stepwise SINDy's Steps I, II, III (seed 000 Eq. 18–31).

    Step I: first set (N1 = ``first_orders[0]``) × {1}, with the Coulomb split; Step II: first set ×
    monomials of degree ≤ 2 in {qd_i}, with the Coulomb split; Step III: first set × ({1} ∪ {qdd_i}),
    with the Stribeck candidates. ``trig_basis`` as in :func:`first_feature_set`.
    """
    kinds = list(joint_kinds)
    n = len(kinds)
    orders = tuple(int(o) for o in first_orders)
    if len(orders) != 3:
        raise ConfigError(f"stepwise SINDy needs three first-set orders (Steps I, II, III), got {list(first_orders)}")
    coulomb_f, coulomb_j = friction_candidates(n, coulomb=coulomb)
    stribeck_f, stribeck_j = friction_candidates(n, coulomb=False, stribeck_velocities=stribeck_velocities)
    seconds = (
        second_feature_set(n, (), 0),
        second_feature_set(n, ("qd",), 2),
        second_feature_set(n, ("qdd",), 1),
    )
    frictions = ((coulomb_f, coulomb_j), (coulomb_f, coulomb_j), (stribeck_f, stribeck_j))
    return tuple(
        DLGLibrary(first_feature_set(kinds, order, trig_basis=trig_basis), second, f, j)
        for order, second, (f, j) in zip(orders, seconds, frictions, strict=True)
    )

"""SINDy and stepwise SINDy building blocks (seed 000, Guo et al. 2025; SPEC §8 ``sindy``, ``stepwise_sindy``).

Three pieces, each usable on its own (the estimators in ``robotid_sim_plugins.sindy`` compose them):

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

**Relative activation indicator and k-means (seed 000 Eq. 5–9, Algorithm 1).** Per sample,
RAI(a) = S(a) + W‖a‖₁ with S(a) = tanh(h‖a‖₁), h = 60, W = 0.6 for the velocities and 0.32 for
the accelerations (the switch formula was lost in extraction; SPEC §8 gives this reading), two
features per sample; :class:`sklearn.cluster.KMeans` for k = 1 … k_max; k by the elbow of the WCSS
curve (:func:`elbow`); clusters named by their centroid (:func:`name_clusters`).

``‖a‖₁`` adds rad/s and m/s on an arm with prismatic joints, and its spread (W‖a‖₁ reaches 2–3
on the bundled arms) swamps the switch that the seed says must dominate. By default each joint's
signal is therefore divided by n times its limit (:func:`rai_scales`, ``"limits"``), so ‖a‖₁ is the
mean fraction of the joint limits, in [0, 1] on every robot; ``"none"`` applies the seed's formula to
the raw SI signals (on the bundled SCARA it puts about 30 % of the samples in the wrong state, and
the WCSS curve has no clear elbow; see the tests).
"""

from __future__ import annotations

import itertools
import logging
import time
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from robotid_sim.errors import ConfigError, DataError, IdentificationError
from robotid_sim.excitation.base import STEPWISE_LABELS, STEPWISE_TRANSITION, Segment
from robotid_sim.identification.features import GAUSSIAN, Factor, Feature, FeatureLibrary
from robotid_sim.identification.models import FeatureLibraryModel

logger = logging.getLogger(__name__)

#: the three states of seed 000 §2.2, in step order: Step I static, Step II constant velocity, Step III variable
STEP_LABELS: tuple[str, str, str] = STEPWISE_LABELS
#: h of the activation switch S(a) = tanh(h‖a‖₁) (seed 000 §2.1)
RAI_H = 60.0
#: W of the RAI of the velocities (seed 000: W1 = 0.6)
RAI_W_VELOCITY = 0.6
#: W of the RAI of the accelerations (seed 000: W2 = 0.32)
RAI_W_ACCELERATION = 0.32
#: a signal counts as activated in a cluster when the centroid's RAI reaches this (the switch half on)
RAI_ACTIVE = 0.5
#: largest k tried by the elbow method
K_MAX = 8
#: a small set of Stribeck velocities for the friction candidates (rad/s or m/s); seed 000 §4 uses 0.01, 0.02, …, 1
STRIBECK_VELOCITIES = (0.02, 0.05, 0.1, 0.2, 0.5)
#: truncation orders of seed 000 §3.3 (Table 2, Fig. 9): sindy (N1, N2) and stepwise (N1 of Steps I, II, III)
SEED_ORDERS: dict[str, dict[str, tuple[int, ...]]] = {
    "scara": {"sindy": (1, 2), "stepwise": (1, 1, 1)},
    "three_axis": {"sindy": (4, 2), "stepwise": (2, 4, 4)},
}
#: signals a revolute joint contributes to the first feature set as sin and cos (continuous is revolute too)
_ROTATING = ("revolute", "continuous")


# ============================================================================ DLG (Eq. 10–17)
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


# ============================================================================ RAI + k-means (Eq. 5–9)
def relative_activation_indicator(a, weight: float, h: float = RAI_H) -> np.ndarray:
    """RAI(a) = tanh(h‖a‖₁) + W‖a‖₁ per sample (seed 000 Eq. 5–6).

    Args:
        a: (N, n) joint velocities or accelerations (scaled as the caller wishes).
        weight: W (seed 000: 0.6 for velocities, 0.32 for accelerations).
        h: sensitivity of the activation switch (seed 000: 60).

    Returns:
        (N,) RAI values.
    """
    norm = np.abs(np.asarray(a, float)).sum(axis=1)
    return np.tanh(h * norm) + weight * norm


def rai_scales(structure, qd, qdd, scale: Literal["limits", "none"] = "limits") -> tuple[np.ndarray, np.ndarray]:
    """Per-joint divisors (n,) of the velocities and accelerations before the RAI.

    ``"limits"``: n times the joint's velocity resp. acceleration limit (so ‖a‖₁ is the mean fraction of
    the limits); a joint without a finite positive limit uses its largest |value| in the data instead.
    ``"none"``: ones (the seed's formula on SI signals). ``structure`` may be None with ``"none"``.
    """
    qd, qdd = np.asarray(qd, float), np.asarray(qdd, float)
    n = qd.shape[1]
    if scale == "none":
        return np.ones(n), np.ones(n)
    if scale != "limits":
        raise ConfigError(f"RAI scale must be 'limits' or 'none', got {scale!r}")
    out = []
    for limit, data in ((structure.velocity_limit, qd), (structure.acceleration_limit, qdd)):
        limit = np.asarray(limit, float)
        fallback = np.abs(data).max(axis=0) if data.size else np.ones(n)
        usable = np.isfinite(limit) & (limit > 0)
        divisor = np.where(usable, limit, np.where(fallback > 0, fallback, 1.0))
        out.append(n * divisor)
    return out[0], out[1]


def rai_features(
    qd,
    qdd,
    *,
    velocity_scale=None,
    acceleration_scale=None,
    h: float = RAI_H,
    w_velocity: float = RAI_W_VELOCITY,
    w_acceleration: float = RAI_W_ACCELERATION,
) -> np.ndarray:
    """(N, 2): [RAI(qd / velocity_scale), RAI(qdd / acceleration_scale)] (seed 000 Eq. 7–8)."""
    qd, qdd = np.asarray(qd, float), np.asarray(qdd, float)
    vs = 1.0 if velocity_scale is None else np.asarray(velocity_scale, float)
    as_ = 1.0 if acceleration_scale is None else np.asarray(acceleration_scale, float)
    return np.column_stack(
        [
            relative_activation_indicator(qd / vs, w_velocity, h),
            relative_activation_indicator(qdd / as_, w_acceleration, h),
        ]
    )


def elbow(wcss) -> int:
    """The elbow of a WCSS curve W_1 … W_kmax (k = 1 … kmax), by the "kneedle" rule (Satopää et al. 2011).

    Both axes are normalised to [0, 1]; the elbow is the k whose point lies farthest below the chord from
    (1, W_1) to (kmax, W_kmax), i.e. argmax_k [(1 − x_k) − y_k] with x_k = (k − 1)/(kmax − 1) and
    y_k = (W_k − W_kmax)/(W_1 − W_kmax). Deterministic; ties go to the smaller k. A flat curve (all
    W equal, one cluster) gives 1.
    """
    w = np.asarray(wcss, float)
    if w.ndim != 1 or w.size == 0:
        raise ConfigError("elbow: give a non-empty WCSS curve")
    if w.size < 3 or not w[0] > w[-1]:
        return 1
    x = np.arange(w.size) / (w.size - 1)
    y = (w - w[-1]) / (w[0] - w[-1])
    return int(np.argmax((1.0 - x) - y)) + 1


def name_clusters(centroids, active: float = RAI_ACTIVE) -> tuple[str, ...]:
    """The state of each cluster from its centroid (RAI of velocity, RAI of acceleration) (seed 000 §2.2).

    ``variable_velocity`` when the accelerations are activated (centroid RAI ≥ ``active``), else
    ``constant_velocity`` when the velocities are, else ``static``.
    """
    c = np.atleast_2d(np.asarray(centroids, float))
    return tuple(STEP_LABELS[2] if ra >= active else STEP_LABELS[1] if rv >= active else STEP_LABELS[0] for rv, ra in c)


@dataclass(frozen=True, eq=False)
class Segmentation:
    """Which state (static, constant velocity, variable velocity) each sample is in.

    Attributes:
        labels: (N,) one of :data:`STEP_LABELS` per sample.
        method: ``"rai"`` (RAI + k-means) or ``"labels"`` (the data's own segment labels).
        k: number of clusters chosen by the elbow (``"rai"``), else None.
        wcss: WCSS for k = 1 … k_max (``"rai"``), else ().
        clusters: (N,) cluster index per sample (``"rai"``), else None.
        centroids: (k, 2) cluster centroids in (RAI velocity, RAI acceleration) (``"rai"``), else None.
        cluster_labels: the state each cluster was named (``"rai"``), else ().
        features: (N, 2) the RAI features (``"rai"``), else None.
    """

    labels: np.ndarray
    method: str
    k: int | None = None
    wcss: tuple[float, ...] = ()
    clusters: np.ndarray | None = None
    centroids: np.ndarray | None = None
    cluster_labels: tuple[str, ...] = ()
    features: np.ndarray | None = field(default=None, repr=False)

    def mask(self, label: str) -> np.ndarray:
        """(N,) bool: the samples in state ``label``."""
        if label not in STEP_LABELS:
            raise ConfigError(f"unknown state {label!r}; the states are {list(STEP_LABELS)}")
        return self.labels == label

    def counts(self) -> dict[str, int]:
        return {label: int(np.count_nonzero(self.labels == label)) for label in STEP_LABELS}

    def agreement(self, other) -> float:
        """Fraction of samples whose state equals ``other``'s (N,) labels (another segmentation's, or truth)."""
        other = other.labels if isinstance(other, Segmentation) else np.asarray(other)
        return float(np.mean(self.labels == other))

    def describe(self) -> dict:
        """JSON-able facts for diagnostics."""
        out = {"method": self.method, "samples": self.counts()}
        if self.method == "rai":
            sizes = np.bincount(self.clusters, minlength=self.k)
            out.update(
                k=self.k,
                wcss=list(self.wcss),
                cluster_sizes=sizes.tolist(),
                cluster_labels=list(self.cluster_labels),
                centroids=np.round(self.centroids, 6).tolist(),
            )
        return out


def segment_by_rai(
    qd,
    qdd,
    *,
    velocity_scale=None,
    acceleration_scale=None,
    h: float = RAI_H,
    w_velocity: float = RAI_W_VELOCITY,
    w_acceleration: float = RAI_W_ACCELERATION,
    k_max: int = K_MAX,
    n_init: int = 10,
    seed: int = 0,
) -> Segmentation:
    """Cluster samples into static / constant-velocity / variable-velocity states (seed 000 Algorithm 1).

    RAI features (:func:`rai_features`), :class:`sklearn.cluster.KMeans` for k = 1 … k_max (``n_init``
    starts, ``random_state=seed``: deterministic), k by :func:`elbow` on the WCSS (``inertia_``), clusters
    named by :func:`name_clusters`.

    Args:
        qd, qdd: (N, n) velocities and accelerations.
        velocity_scale, acceleration_scale: (n,) divisors applied first (:func:`rai_scales`), or None.
        h, w_velocity, w_acceleration: the RAI constants (seed 000: 60, 0.6, 0.32).
        k_max: largest k tried (at least 3).
        n_init, seed: KMeans restarts and random state.
    """
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    X = rai_features(
        qd,
        qdd,
        velocity_scale=velocity_scale,
        acceleration_scale=acceleration_scale,
        h=h,
        w_velocity=w_velocity,
        w_acceleration=w_acceleration,
    )
    if X.shape[0] < 3:
        raise DataError(f"RAI clustering needs at least 3 samples, got {X.shape[0]}")
    distinct = np.unique(np.round(X, 12), axis=0).shape[0]
    fits = []
    # one thread: on 2-D points OpenMP workers only add overhead (20x slower on a busy 2-core machine)
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # fewer distinct points than clusters
        for k in range(1, min(int(k_max), distinct) + 1):
            fits.append(KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(X))
    wcss = tuple(float(f.inertia_) for f in fits)
    k = elbow(wcss)
    chosen = fits[k - 1]
    names = name_clusters(chosen.cluster_centers_)
    clusters = chosen.labels_.astype(int)
    labels = np.asarray(names, dtype=object)[clusters].astype(str)
    logger.info(
        "RAI + k-means: k = %d of %d tried, samples per state %s", k, len(fits), Segmentation(labels, "rai").counts()
    )
    return Segmentation(labels, "rai", k, wcss, clusters, chosen.cluster_centers_.copy(), names, X)


def segment_by_labels(t, segments) -> Segmentation:
    """The states from labelled segments (an excitation's or a dataset's ``metadata['segments']``).

    A sample belongs to the segment whose [start, end) holds its time; a sample past the last end (the
    final sample of a closed time grid) to the last segment. A ``transition`` (the stepwise excitation's
    rest-to-rest moves between the states) is variable-velocity motion. Segments with other labels are refused.

    Raises:
        DataError: a segment label other than :data:`STEP_LABELS`, or samples that no segment covers.
    """
    t = np.asarray(t, float)
    segments = list(segments)
    segments = [
        Segment(STEP_LABELS[2], s.start, s.end, s.joint) if s.label == STEPWISE_TRANSITION else s for s in segments
    ]
    unknown = sorted({s.label for s in segments} - set(STEP_LABELS))
    if unknown:
        raise DataError(
            f"the data's segments are labelled {unknown}, not the stepwise states {list(STEP_LABELS)}; record the "
            "data with the stepwise excitation, or segment it by RAI (segmentation='rai')"
        )
    labels = np.full(t.shape, "", dtype=object)
    for s in segments:
        labels[s.mask(t)] = s.label
    if segments:
        last = max(segments, key=lambda s: s.end)
        labels[(labels == "") & (t >= last.end)] = last.label
    if np.any(labels == ""):
        raise DataError(f"{int(np.sum(labels == ''))} samples lie in no labelled segment; segment by RAI instead")
    return Segmentation(labels.astype(str), "labels")


def segmentation_from_problem_labels(problem) -> Segmentation | None:
    """The data's own stepwise labels as a :class:`Segmentation`, or None when it carries none."""
    segments: tuple[Segment, ...] = problem.segments
    if not segments or not {s.label for s in segments} <= {*STEP_LABELS, STEPWISE_TRANSITION}:
        return None
    return segment_by_labels(problem.dataset.t, segments)


# ============================================================================ sparse regression (Eq. 32)
@dataclass(frozen=True, eq=False)
class SparseFit:
    """Per-joint Lasso on one library.

    Attributes:
        coefficients: (n, F) ξ per joint, in the library's units, |ξ| ≤ threshold set to 0.
        active: (n,) number of active terms per joint.
        iterations: (n,) Lasso coordinate-descent iterations per joint.
        converged: (n,) whether each Lasso met its tolerance within ``max_iter``.
        time_s: wall time of the regression (Gram matrix and the n Lasso solves).
    """

    coefficients: np.ndarray
    active: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    time_s: float


def sparse_regression(
    Phi,
    tau,
    *,
    alpha: float,
    threshold: float,
    standardize: bool = True,
    max_iter: int = 10_000,
    tol: float = 1e-4,
    masks=None,
    rows=None,
) -> SparseFit:
    """ξ_i = argmin (1/2N)‖tau_i − Φ ξ_i‖² + α‖ξ_i‖₁ per joint i, then active = |ξ| > threshold (seed 000 Eq. 32).

    :class:`sklearn.linear_model.Lasso` without intercept (the library holds the constant), on a shared Gram
    matrix. With ``standardize`` each column is divided by its root mean square first (so α weighs every
    candidate alike) and ξ is mapped back. A column that is zero on these samples, or equal to an earlier
    column on them (``fwd(qd1)`` and ``1`` while joint 1 only creeps forward), is left out (ξ = 0).

    Args:
        Phi: (N, F) library evaluated on the samples.
        tau: (N, n) target torques.
        alpha: λ of Eq. 32, sklearn's ``alpha``.
        threshold: |ξ| at or below which a term is dropped.
        standardize: scale columns to unit RMS before the Lasso.
        max_iter, tol: Lasso's.
        masks: (n, F) bool, the features each joint may use, or None for all.
        rows: (N, n) bool, the samples each joint's equation uses (a velocity dead-band leaves some out), or
            None for all. The shared Gram matrix loses the left-out rows' part, so this costs little.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso

    t0 = time.perf_counter()
    Phi = np.asarray(Phi, float)
    tau = np.asarray(tau, float)
    N, F = Phi.shape
    n = tau.shape[1]
    masks = np.ones((n, F), dtype=bool) if masks is None else np.asarray(masks, bool)
    scale = np.sqrt(np.einsum("ij,ij->j", Phi, Phi) / N) if N else np.zeros(F)
    usable = scale > 1e-12 * max(float(scale.max(initial=0.0)), 1.0)
    if not standardize:
        scale = np.ones(F)
    columns = np.flatnonzero(usable)
    X = np.empty((N, columns.size), order="F")
    np.divide(Phi if columns.size == F else Phi[:, columns], scale[columns], out=X)
    columns, X = _distinct_columns(columns, X)
    X = np.asfortranarray(X)
    gram = np.ascontiguousarray(X.T @ X)
    coefficients = np.zeros((n, F))
    iterations = np.zeros(n, dtype=int)
    converged = np.ones(n, dtype=bool)
    rows = np.ones((N, n), dtype=bool) if rows is None else np.asarray(rows, bool)
    for i in range(n):
        keep = np.flatnonzero(masks[i, columns])
        use = rows[:, i]
        if keep.size == 0 or not use.any():
            continue
        Xi, Gi, yi = X, gram, tau[:, i]
        if not use.all():
            left_out = X[~use]
            Xi, Gi, yi = np.asfortranarray(X[use]), gram - left_out.T @ left_out, yi[use]
        if keep.size < columns.size:
            Xi, Gi = np.asfortranarray(Xi[:, keep]), Gi[np.ix_(keep, keep)]
        lasso = Lasso(
            alpha=alpha,
            fit_intercept=False,
            precompute=np.ascontiguousarray(Gi),
            copy_X=False,
            max_iter=max_iter,
            tol=tol,
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            lasso.fit(Xi, np.ascontiguousarray(yi), check_input=False)  # X, y and Gram are laid out as it needs
        converged[i] = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        iterations[i] = int(np.max(lasso.n_iter_))
        xi = lasso.coef_ / scale[columns[keep]]
        coefficients[i, columns[keep]] = np.where(np.abs(xi) > threshold, xi, 0.0)
    active = np.count_nonzero(coefficients, axis=1)
    return SparseFit(coefficients, active, iterations, converged, time.perf_counter() - t0)


def _distinct_columns(columns: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the columns of X (N, p) equal to an earlier one (to 1e-12 relative); ``columns`` names them.

    Candidates are found by a random projection (equal columns project equally), then compared in full.
    """
    if X.shape[1] < 2:
        return columns, X
    projection = np.random.default_rng(0).standard_normal(X.shape[0]) @ X
    order = np.argsort(projection, kind="stable")
    tolerance = 1e-9 * max(float(np.abs(projection).max()), 1.0)
    drop = np.zeros(X.shape[1], dtype=bool)
    for a, b in zip(order[:-1], order[1:], strict=True):
        if projection[b] - projection[a] <= tolerance:
            first, later = min(a, b), max(a, b)
            if not drop[first] and np.allclose(X[:, first], X[:, later], rtol=1e-12, atol=1e-12):
                drop[later] = True
    if not drop.any():
        return columns, X
    return columns[~drop], X[:, ~drop]


# ============================================================================ model
def sparse_model(libraries, coefficients, joint_names, **common) -> FeatureLibraryModel:
    """One :class:`FeatureLibraryModel` holding the active terms of one or several libraries, summed.

    Args:
        libraries: :class:`DLGLibrary` or :class:`FeatureLibrary` objects.
        coefficients: per library, (n, F) coefficients (zeros are dropped).
        joint_names: (n,) joint names.
        common: ``estimator``, ``options``, ``diagnostics`` of the model.

    A feature active in several libraries (the constant of Step I and Step II, say) gets the sum of its
    coefficients. A model with no active term at all keeps the constant ``1`` with zero coefficients.
    """
    order: dict[str, int] = {}
    features: list[Feature] = []
    n = len(joint_names)
    rows: list[np.ndarray] = []
    for library, C in zip(libraries, coefficients, strict=True):
        lib = library.library if isinstance(library, DLGLibrary) else library
        C = np.asarray(C, float)
        for f in np.flatnonzero(np.any(C != 0, axis=0)):
            feature = lib.features[f]
            name = str(feature)
            if name not in order:
                order[name] = len(features)
                features.append(feature)
                rows.append(np.zeros(n))
            rows[order[name]] = rows[order[name]] + C[:, f]
    if not features:
        features, rows = [Feature()], [np.zeros(n)]
    library = FeatureLibrary(n, tuple(features))
    return FeatureLibraryModel(library, np.column_stack(rows), joint_names=joint_names, **common)


def check_step_samples(label: str, count: int, minimum: int, library_size: int) -> None:
    """Refuse a stepwise step whose state has fewer than ``minimum`` samples, naming the state and the fix.

    Raises:
        IdentificationError: too few samples of ``label``.
    """
    if count >= minimum:
        return
    step = {STEP_LABELS[0]: "Step I", STEP_LABELS[1]: "Step II", STEP_LABELS[2]: "Step III"}[label]
    what = "no" if count == 0 else f"only {count}"
    raise IdentificationError(
        f"stepwise_sindy: {step} needs data in the '{label}' state but the data has {what} such samples (at least "
        f"{minimum} wanted, library of {library_size} candidates); record the stepwise collection (excitation type "
        "'stepwise': static poses, constant-velocity sweeps and Fourier segments), lower 'min_samples', or stop "
        "earlier with 'steps'"
    )

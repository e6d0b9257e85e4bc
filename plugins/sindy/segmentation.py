"""Segmentation of the samples into the stepwise states (seed 000, Guo et al. 2025).

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

import logging
import warnings
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.excitation.base import STEPWISE_LABELS, STEPWISE_TRANSITION, Segment
from robotid_sim.threads import one_blas_thread

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
    with one_blas_thread(), threadpool_limits(limits=1, user_api="openmp"), warnings.catch_warnings():
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

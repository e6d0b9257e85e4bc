"""The estimators ``sindy`` and ``stepwise_sindy`` (seed 000, Guo et al. 2025): options, fit, diagnostics."""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
from pydantic import Field, field_validator
from robotid_sim_plugins.sindy.libraries import STRIBECK_VELOCITIES, sindy_library, stepwise_libraries
from robotid_sim_plugins.sindy.segmentation import (
    K_MAX,
    RAI_H,
    RAI_W_ACCELERATION,
    RAI_W_VELOCITY,
    STEP_LABELS,
    Segmentation,
    rai_scales,
    segment_by_rai,
    segmentation_from_problem_labels,
)
from robotid_sim_plugins.sindy.sparse import sparse_model, sparse_regression

from robotid_sim.errors import IdentificationError
from robotid_sim.identification import Estimator, EstimatorOptions, FeatureLibraryModel

#: the steps of stepwise SINDy, by number
STEP_NAMES = ("Step I", "Step II", "Step III")


class SparseOptions(EstimatorOptions):
    """Options shared by ``sindy`` and ``stepwise_sindy``: the Lasso and the friction candidates."""

    alpha: float = Field(
        1e-3, gt=0, description="λ of the Lasso (seed 000 Eq. 32; sklearn's alpha; seed: 0.02 SCARA, 1 three-axis)"
    )
    threshold: float = Field(
        1e-3, ge=0, description="a term is active when |ξ| > threshold (seed: 0.001 SCARA, 0.01 three-axis)"
    )
    standardize: bool = Field(
        True, description="divide each library column by its RMS before the Lasso (coefficients mapped back)"
    )
    max_iter: int = Field(10_000, ge=1, description="Lasso coordinate-descent iteration limit per joint")
    tol: float = Field(1e-4, gt=0, description="Lasso tolerance")
    coulomb: bool = Field(
        True, description="Coulomb candidates split by direction, fwd(qd_i) and bwd(qd_i) (seed 000 §4)"
    )
    stribeck_velocities: list[float] = Field(
        default_factory=list,
        description="vs of the Stribeck candidates exp(-(qd_i/vs)^2)·fwd/bwd(qd_i) (seed 000 §4), e.g. "
        f"{list(STRIBECK_VELOCITIES)}; none by default (they cost accuracy under noise on an arm without "
        "Stribeck friction)",
    )
    max_samples: int | None = Field(
        None, ge=10, description="use at most this many samples per regression (evenly strided); None: all"
    )
    trig_basis: bool = Field(
        True,
        description="leave out first-set monomials with cos²q (sin²+cos² = 1 makes them dependent); False: the "
        "seed's full DLG count",
    )

    @field_validator("stribeck_velocities")
    @classmethod
    def _positive(cls, value):
        if any(not (np.isfinite(v) and v > 0) for v in value):
            raise ValueError(f"every Stribeck velocity must be finite and > 0, got {value}")
        return value


def _strided(rows: np.ndarray, limit: int | None) -> np.ndarray:
    """At most ``limit`` of the sample indices ``rows``, evenly strided."""
    if limit is None or rows.size <= limit:
        return rows
    return rows[np.linspace(0, rows.size - 1, limit).round().astype(int)]


def _signals(problem) -> tuple[np.ndarray, ...]:
    ds = problem.dataset
    return tuple(np.asarray(x, float) for x in (ds.q, ds.qd, ds.qdd, ds.tau))


def _rows_in_use(problem) -> np.ndarray | None:
    """(N, n) bool: the samples of each joint's equation (the problem's velocity dead-band), or None for all."""
    if problem.velocity_deadband is None:
        return None
    return problem.row_weights().reshape(problem.n_samples, problem.n_dof) > 0


class SINDyEstimator(Estimator):
    """SINDy with a DLG library (seed 000 §3): one library over all the data, a Lasso per joint.

    Library: first feature set of order ``first_order`` (N1) × second feature set (``second_set``:
    ``"dlg"``, monomials of degree ≤ ``second_order`` in the velocities and accelerations, the seed's
    360 / 5,880 candidates; ``"steps"``, the union of the stepwise second sets, linear in qdd), plus the
    friction candidates. The model holds the terms with |ξ| > ``threshold``.

    A velocity dead-band of the problem leaves its samples out of each joint's equation.

    Diagnostics: ``library_size``, ``library`` (first, second, products, friction sizes),
    ``active_terms`` (per joint), ``samples``, ``regression_time_s``, ``lasso_iterations``,
    ``lasso_converged`` (per joint), ``fit_time_s``.
    """

    name = "sindy"
    biased = True
    streams_regressor = True

    class Options(SparseOptions):
        first_order: int = Field(2, ge=0, le=8, description="N1, order of the first feature set (seed: 1 SCARA, 4)")
        second_order: int = Field(2, ge=0, le=4, description="N2, order of the second set (second_set 'dlg')")
        second_set: Literal["dlg", "steps"] = Field(
            "dlg", description="'dlg': monomials of qd and qdd up to second_order; 'steps': linear in qdd"
        )

    def library(self, structure):
        """The :class:`~robotid_sim_plugins.sindy.libraries.DLGLibrary` this estimator fits on ``structure``."""
        return sindy_library(
            structure.joint_kinds,
            self.first_order,
            self.second_order,
            second_set=self.second_set,
            coulomb=self.coulomb,
            stribeck_velocities=self.stribeck_velocities,
            trig_basis=self.trig_basis,
        )

    def _fit(self, problem) -> FeatureLibraryModel:
        q, qd, qdd, tau = _signals(problem)
        library = self.library(problem.structure)
        rows = _strided(np.arange(q.shape[0]), self.max_samples)
        Phi = library.evaluate(q[rows], qd[rows], qdd[rows])
        in_use = _rows_in_use(problem)
        fit = sparse_regression(
            Phi,
            tau[rows],
            alpha=self.alpha,
            threshold=self.threshold,
            standardize=self.standardize,
            max_iter=self.max_iter,
            tol=self.tol,
            masks=library.joint_masks(),
            rows=None if in_use is None else in_use[rows],
        )
        diagnostics = {
            "library_size": len(library),
            "library": library.describe(),
            "active_terms": fit.active.tolist(),
            "samples": int(rows.size),
            "regression_time_s": fit.time_s,
            "lasso_iterations": fit.iterations.tolist(),
            "lasso_converged": fit.converged.tolist(),
        }
        return sparse_model([library], [fit.coefficients], problem.structure.joint_names, diagnostics=diagnostics)


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


class StepwiseSINDyEstimator(Estimator):
    """Stepwise SINDy (seed 000 §2–3): RAI + k-means segmentation, then three Lasso steps, each on what
    the earlier ones leave.

    1. Segment the samples into static / constant-velocity / variable-velocity states: RAI features and
       k-means with k by the elbow on the WCSS (``segmentation="rai"``, the data's labels unused), or the
       data's own stepwise segment labels (``"labels"``: the seed's separate collection per state).
    2. **Step I** on the static samples: first set (N1 = ``first_orders[0]``) × {1} + the Coulomb split →
       gravity and dry friction.
    3. **Step II** on the constant-velocity samples, target tau − Step I's prediction: first set × monomials
       of degree ≤ 2 in qd + the Coulomb split → Coriolis, centrifugal and velocity friction terms.
    4. **Step III** on the variable-velocity samples, target tau − Steps I + II: first set × ({1} ∪ qdd) +
       the Stribeck candidates → inertia terms.

    Each step is only as good as its data: Step I fits its gravity candidates from the static poses, Step II
    its velocity candidates from the sweeps. A collection with a few poses, or sweeps that all cross one
    point, leaves them under-determined, and the model then fails away from that data (see ``runs``).

    ``steps=1`` or ``2`` stops early (a "Step I model" for gravity/friction feedforward, seed 000 Eq. 35). The
    model is the union of the steps' active terms (coefficients of a term found in two steps add up); it is
    linear in qdd, so it always has forward dynamics. A velocity dead-band of the problem leaves its samples
    out of each joint's equation in Steps II and III (Step I's creep is slower than any useful dead-band).

    Diagnostics: ``segmentation`` (method, samples per state, and for RAI ``k``, ``wcss``, ``cluster_sizes``,
    ``cluster_labels``, ``centroids``, ``label_agreement`` with the data's own labels when it has them),
    ``library_size`` (sum over the steps run), ``library_sizes`` (per step), ``active_terms``
    (per joint, of the model), ``steps`` (per step: ``state``, ``samples``, ``runs`` (contiguous runs of
    samples in the state: the static poses of Step I, the sweeps of Step II), ``library_size``,
    ``active_terms`` per joint, ``fit_time_s``, ``lasso_iterations``, ``lasso_converged``),
    ``segmentation_time_s``, ``fit_time_s``.

    Raises:
        IdentificationError: a state a step needs has fewer than ``min_samples`` samples.
    """

    name = "stepwise_sindy"
    biased = True
    streams_regressor = True

    class Options(SparseOptions):
        alpha: float | list[float] = Field(
            1e-3, description="λ of the Lasso, one value or one per step (Steps I, II, III)"
        )
        first_orders: list[int] = Field(
            [2, 2, 2], description="N1 of the first feature set in Steps I, II, III (seed: 1,1,1 SCARA; 2,4,4)"
        )
        steps: Literal[1, 2, 3] = Field(3, description="stop after this step (1: a Step I model)")
        segmentation: Literal["rai", "labels"] = Field(
            "rai", description="'rai': RAI + k-means (no labels needed); 'labels': the data's stepwise labels"
        )
        rai_scale: Literal["limits", "none"] = Field(
            "limits",
            description="divide qd, qdd by n × the joint limits before the RAI ('none': the seed's raw formula)",
        )
        h: float = Field(RAI_H, gt=0, description="h of the activation switch tanh(h‖a‖₁) (seed: 60)")
        w_velocity: float = Field(RAI_W_VELOCITY, ge=0, description="W of the velocities' RAI (seed: 0.6)")
        w_acceleration: float = Field(RAI_W_ACCELERATION, ge=0, description="W of the accelerations' RAI (seed: 0.32)")
        k_max: int = Field(K_MAX, ge=3, le=20, description="largest number of clusters tried by the elbow")
        n_init: int = Field(10, ge=1, description="k-means restarts")
        seed: int = Field(0, ge=0, description="k-means random state")
        min_samples: int = Field(20, ge=1, description="fewest samples a step's state may have")

        @field_validator("alpha")
        @classmethod
        def _alphas(cls, value):
            values = value if isinstance(value, list) else [value]
            if isinstance(value, list) and len(value) != 3:
                raise ValueError(f"give one alpha or three (Steps I, II, III), got {len(value)}")
            if any(not (np.isfinite(a) and a > 0) for a in values):
                raise ValueError(f"every alpha must be finite and > 0, got {value}")
            return value

        @field_validator("first_orders")
        @classmethod
        def _orders(cls, value):
            if len(value) != 3 or any(not 0 <= o <= 8 for o in value):
                raise ValueError(f"give three orders (Steps I, II, III), each in 0..8, got {value}")
            return value

    def libraries(self, structure):
        """The three :class:`~robotid_sim_plugins.sindy.libraries.DLGLibrary` of Steps I, II, III on ``structure``."""
        return stepwise_libraries(
            structure.joint_kinds,
            self.first_orders,
            coulomb=self.coulomb,
            stribeck_velocities=self.stribeck_velocities,
            trig_basis=self.trig_basis,
        )

    def segment(self, problem) -> Segmentation:
        """The state of every sample of ``problem`` (RAI + k-means, or the data's labels)."""
        _, qd, qdd, _ = _signals(problem)
        if self.segmentation == "labels":
            seg = segmentation_from_problem_labels(problem)
            if seg is None:
                found = sorted({s.label for s in problem.segments})
                raise IdentificationError(
                    f"stepwise_sindy: segmentation='labels' needs data labelled {list(STEP_LABELS)} (the stepwise "
                    f"excitation writes them), but its segments are {found}; use segmentation='rai'"
                )
            return seg
        velocity_scale, acceleration_scale = rai_scales(problem.structure, qd, qdd, self.rai_scale)
        return segment_by_rai(
            qd,
            qdd,
            velocity_scale=velocity_scale,
            acceleration_scale=acceleration_scale,
            h=self.h,
            w_velocity=self.w_velocity,
            w_acceleration=self.w_acceleration,
            k_max=self.k_max,
            n_init=self.n_init,
            seed=self.seed,
        )

    def _fit(self, problem) -> FeatureLibraryModel:
        q, qd, qdd, tau = _signals(problem)
        names = problem.structure.joint_names
        t0 = time.perf_counter()
        seg = self.segment(problem)
        segmentation = seg.describe()
        if seg.method == "rai":
            given = segmentation_from_problem_labels(problem)
            if given is not None:
                segmentation["label_agreement"] = seg.agreement(given)
        segmentation_time = time.perf_counter() - t0
        libraries = self.libraries(problem.structure)[: self.steps]
        alphas = self.alpha if isinstance(self.alpha, list) else [self.alpha] * 3
        for label, library in zip(STEP_LABELS, libraries, strict=False):
            check_step_samples(label, int(np.count_nonzero(seg.mask(label))), self.min_samples, len(library))
        in_use = _rows_in_use(problem)
        coefficients, steps = [], []
        for k, (label, library) in enumerate(zip(STEP_LABELS, libraries, strict=False)):
            t_step = time.perf_counter()
            state = seg.mask(label)
            rows = _strided(np.flatnonzero(state), self.max_samples)
            target = tau[rows]
            if coefficients:  # each step regresses what the earlier ones leave (seed 000 Eq. 33)
                earlier = sparse_model(libraries[:k], coefficients, names)
                target = target - earlier.predict_torque(q[rows], qd[rows], qdd[rows])
            Phi = library.evaluate(q[rows], qd[rows], qdd[rows])
            fit = sparse_regression(
                Phi,
                target,
                alpha=alphas[k],
                threshold=self.threshold,
                standardize=self.standardize,
                max_iter=self.max_iter,
                tol=self.tol,
                masks=library.joint_masks(),
                rows=None if in_use is None or k == 0 else in_use[rows],  # Step I's creep is below any dead-band
            )
            coefficients.append(fit.coefficients)
            steps.append(
                {
                    "step": STEP_NAMES[k],
                    "state": label,
                    "samples": int(rows.size),
                    "runs": int(np.count_nonzero(np.diff(state.astype(int)) == 1) + state[0]),
                    "library_size": len(library),
                    "library": library.describe(),
                    "active_terms": fit.active.tolist(),
                    "fit_time_s": time.perf_counter() - t_step,
                    "lasso_iterations": fit.iterations.tolist(),
                    "lasso_converged": fit.converged.tolist(),
                }
            )
        model = sparse_model(libraries, coefficients, names)
        model.diagnostics.update(
            segmentation=segmentation,
            segmentation_time_s=segmentation_time,
            library_size=sum(len(lib) for lib in libraries),
            library_sizes=[len(lib) for lib in libraries],
            active_terms=np.count_nonzero(model.coefficients, axis=1).tolist(),
            steps=steps,
        )
        return model

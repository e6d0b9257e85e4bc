"""The sparse regression of SINDy (seed 000 Eq. 32: a Lasso per joint) and the model of its active terms."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from robotid_sim_plugins.sindy.libraries import DLGLibrary

from robotid_sim.identification import FeatureLibraryModel
from robotid_sim.identification.features import Feature, FeatureLibrary


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
    scale, columns, X, gram = _scaled_columns(Phi, standardize)
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


def _scaled_columns(Phi: np.ndarray, standardize: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The columns of Φ (N, F) the Lasso uses, scaled, and their Gram matrix (:func:`sparse_regression`).

    Returns:
        (scale (F,) the column divisors (RMS with ``standardize``, else ones), columns (p,) the indices kept
        (not zero on these samples, not equal to an earlier column), X (N, p) the scaled columns in Fortran
        order, gram (p, p) XᵀX).
    """
    N, F = Phi.shape
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
    return scale, columns, X, gram


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

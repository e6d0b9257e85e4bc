"""Issue 31 (deliver 3): the compiled pieces of the sigma-point filters' step give the numbers of the plain numpy
and LAPACK computations they replace, to rounding (the filters end to end: tests/test_filters.py)."""

from __future__ import annotations

import numpy as np
import pytest
from filterpy.kalman import MerweScaledSigmaPoints, unscented_transform
from robotid_sim_plugins.ekf.sigma import SigmaRule, cholesky, full_symmetric
from robotid_sim_plugins.ekf.sigma_kernel import (
    lambda_points,
    positive_definite,
    sigma_moments,
    sigma_roots,
    sigma_states,
)
from robotid_sim_plugins.ekf.square_root import psd_sqrt, qr_factor, qr_triangle, qr_workspace
from scipy.linalg.lapack import dgeqrf


def _symmetric(packed: np.ndarray, n: int) -> np.ndarray:
    rows, cols = np.tril_indices(n)
    M = np.empty((n, n))
    M[rows, cols] = M[cols, rows] = packed
    return M


@pytest.mark.parametrize(
    ("shift", "scale"), [(0.0, 0.1), (0.0, 3.0), (-2.0, 0.1)], ids=["definite", "some points not", "mean not"]
)
def test_lambda_points_solve_every_point(shift, scale):
    """The mean's and each point's (M ± ΔMₖ)⁻¹ (τ − h ∓ Δhₖ), and M⁻¹, as numpy's solve of each system: by
    Cholesky factors, by LU where a point's M is not positive definite, by LU for all where the mean's is not (an
    estimate off the physical parameters)."""
    rng = np.random.default_rng(3)
    n, b = 4, 7
    T = n * (n + 1) // 2
    A = rng.standard_normal((n, n))
    M0 = A @ A.T + (n + shift * n) * np.eye(n)
    mean = np.concatenate([M0[np.tril_indices(n)], rng.standard_normal(n)])
    change = scale * rng.standard_normal((T + n, b))
    tau = rng.standard_normal(n)
    qdd, plus, minus, Minv = np.empty(n), np.empty((b, n)), np.empty((b, n)), np.empty((n, n))
    assert lambda_points(mean, change, tau, qdd, plus, minus, Minv)
    # the case's premise: which matrices are positive definite
    definite = [
        np.linalg.eigvalsh(_symmetric(mean[:T] + sign * change[:T, k], n))[0] > 0 for k in range(b) for sign in (1, -1)
    ]
    assert (np.linalg.eigvalsh(M0)[0] > 0) == (shift == 0) and (0 < np.mean(definite) < 1) == (scale > 1)
    np.testing.assert_allclose(qdd, np.linalg.solve(M0, tau - mean[T:]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Minv, np.linalg.inv(M0), rtol=1e-12, atol=1e-12)
    for k in range(b):
        for sign, got in ((1.0, plus), (-1.0, minus)):
            M = _symmetric(mean[:T] + sign * change[:T, k], n)
            expected = np.linalg.solve(M, tau - mean[T:] - sign * change[T:, k])
            np.testing.assert_allclose(got[k], expected, rtol=1e-12, atol=1e-12)


def test_lambda_points_report_a_singular_point():
    n, b = 3, 2
    T = n * (n + 1) // 2
    mean = np.concatenate([np.eye(n)[np.tril_indices(n)], np.zeros(n)])
    change = np.zeros((T + n, b))
    change[0, 1] = 1.0  # M − ΔM of the second column has a zero row and column
    out = np.empty(n), np.empty((b, n)), np.empty((b, n)), np.empty((n, n))
    assert not lambda_points(mean, change, np.ones(n), *out)


@pytest.mark.parametrize("rule", [SigmaRule.unscented(6, 0.1, 2.0, 0.0), SigmaRule.central_difference(6)])
def test_sigma_roots_equal_the_transform_formulas(rule):
    V = np.random.default_rng(4).standard_normal((13, 5))
    mean, first, second, centre = np.empty(5), np.empty((6, 5)), np.empty((6, 5)), np.empty(5)
    sigma_roots(V, rule.Wm, rule.gamma, rule.second, mean, first, second, centre)
    expected_mean = rule.Wm @ V
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(first, (V[1:7] - V[7:]) / (2 * rule.gamma), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(second, np.sqrt(rule.second) * (V[1:7] + V[7:] - 2 * V[0]), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(centre, V[0] - expected_mean, rtol=1e-13, atol=1e-13)


def test_the_unscented_covariance_about_the_centre_point_is_filterpys_with_no_negative_weight():
    """The UKF's transform taken about V₀ (weights ≥ 0, so the SR-UKF never downdates) is filterpy's
    Σ Wcᵢ (Vᵢ − mean)(…)ᵀ, whose Wc₀ is negative: from the roots the square-root forms stack, and as the plain forms'
    compiled moments."""
    d = 29
    rule = SigmaRule.unscented(d, 0.1, 2.0, 0.0)
    points = MerweScaledSigmaPoints(d, 0.1, 2.0, 0.0)
    V = np.random.default_rng(6).standard_normal((2 * d + 1, 4))
    mean, expected = unscented_transform(V, points.Wm, points.Wc)
    assert points.Wc[0] < -90 and rule.centre == pytest.approx(2.0 - 0.1**2) and rule.second > 0
    got_mean, first, second, centre = rule.roots(V)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12, atol=1e-12)
    from_roots = first.T @ first + second.T @ second + rule.centre * np.outer(centre, centre)
    np.testing.assert_allclose(from_roots, expected, rtol=1e-9, atol=1e-9)
    moments = np.empty(4), np.empty((d, 4)), np.empty((4, 4))
    sigma_moments(V, rule.Wm, rule.gamma, rule.second, rule.centre, *moments)
    np.testing.assert_allclose(moments[0], mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(moments[1], first)
    np.testing.assert_allclose(moments[2], expected, rtol=1e-9, atol=1e-9)


def test_the_square_root_filters_qr_gets_lapacks_blocked_workspace(monkeypatch):
    """scipy's ``dgeqrf`` defaults to a workspace of 3k for k columns, which leaves LAPACK a block of 3 columns;
    the filters' QR asks LAPACK for its optimal one (a block of at least 8 columns) and still gives numpy's R (up
    to the rows' signs) for the SR-UKF's compound's shape (136 × 118)."""
    from robotid_sim_plugins.ekf import square_root

    asked = []

    def recording(a, **kwargs):
        asked.append(kwargs.get("lwork"))
        return dgeqrf(a, **kwargs)

    monkeypatch.setattr(square_root, "dgeqrf", recording)
    A = np.random.default_rng(7).standard_normal((136, 118))
    R = np.triu(qr_triangle(np.asfortranarray(A)))
    assert asked == [qr_workspace(136, 118)] and asked[0] >= 8 * 118
    expected = np.linalg.qr(A, mode="r")
    signs = np.sign(np.diag(R) * np.diag(expected))
    np.testing.assert_allclose(signs[:, None] * R, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())


def test_factors_equal_numpy_cholesky():
    """The QR's lower factor of A (N, k) and LAPACK's Cholesky are numpy's Cholesky factor of AᵀA; a matrix
    that is not positive definite raises (Cholesky) or says so (the mass matrix check, on its symmetric part)."""
    A = np.random.default_rng(5).standard_normal((9, 5))
    P = A.T @ A
    np.testing.assert_allclose(qr_factor(A.copy()), np.linalg.cholesky(P), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(cholesky(P), np.linalg.cholesky(P))
    assert positive_definite(P + np.triu(np.ones((5, 5)), 1) * 1e-3)
    indefinite = P - 2 * np.linalg.eigvalsh(P)[0] * np.eye(5)
    with pytest.raises(np.linalg.LinAlgError):
        cholesky(indefinite)
    assert not positive_definite(indefinite)


def test_sigma_states_are_the_points_of_the_factor():
    """The points x ± γ·Lₖ as numpy builds them: [q, qd] of all, the whole points of the first 2n columns."""
    rng = np.random.default_rng(7)
    n, d, gamma = 2, 7, 1.3
    x, L = rng.standard_normal(d), np.tril(rng.standard_normal((d, d)))
    points = np.vstack([x, x + gamma * L.T, x - gamma * L.T])
    for factor in (L, np.asfortranarray(L)):  # the square-root forms' factor, LAPACK's of the plain forms
        states, moving = np.empty((2 * d + 1, 2 * n)), np.empty((4 * n, d))
        sigma_states(x, factor, gamma, n, states, moving)
        np.testing.assert_array_equal(states, points[:, : 2 * n])
        np.testing.assert_array_equal(moving, np.vstack([points[1 : 2 * n + 1], points[d + 1 : d + 2 * n + 1]]))


def test_the_plain_filters_lower_triangle_gives_the_symmetric_covariance():
    """The plain filters keep P's lower triangle only (Fortran-ordered, what LAPACK reads): the symmetric P and
    numpy's Cholesky factor from it."""
    A = np.random.default_rng(8).standard_normal((9, 5))
    P = A.T @ A
    kept = np.asfortranarray(np.tril(P) + np.triu(np.full((5, 5), 7.0), 1))
    np.testing.assert_array_equal(full_symmetric(kept), P)
    np.testing.assert_array_equal(cholesky(kept), np.linalg.cholesky(P))


def test_psd_sqrt_of_a_block_of_a_larger_matrix():
    """The roots of Q's blocks (views of Q): Cholesky's for a full block, the square roots of a diagonal one, a
    zero column for a zero variance."""
    A = np.random.default_rng(9).standard_normal((6, 4))
    Q = np.zeros((10, 10))
    Q[:4, :4] = A.T @ A
    Q[4:, 4:] = np.diag([4.0, 0.0, 1.0, 9.0, 0.25, 1.0])
    Q[6, 7] = Q[7, 6] = 0.5
    np.testing.assert_allclose(psd_sqrt(Q[:4, :4]), np.linalg.cholesky(A.T @ A), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(psd_sqrt(Q[8:, 8:]), np.diag([0.5, 1.0]))
    root = psd_sqrt(Q[4:8, 4:8])
    np.testing.assert_allclose(root @ root.T, Q[4:8, 4:8], rtol=1e-13, atol=1e-13)
    assert np.all(root[:, 1] == 0) and np.all(root[1] == 0)


def test_psd_sqrt_of_a_matrix_that_rounding_left_slightly_indefinite():
    """The SR-EKF stopped on hyper9 at 7.3 s: Q's velocity block, the EKF's correlated torque noise
    M⁻¹ Σ M⁻ᵀ − G Cᵀ (a difference), had an eigenvalue −3.5e-13 and Cholesky failed. The root is now the one of
    the nearest positive semi-definite matrix (negative eigenvalues as zero), lower-triangular."""
    rng = np.random.default_rng(7)
    V = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    w = np.array([-3.5e-13, 2e-14, 1e-6, 1e-4, 1e-3, 1e-2])
    Q = (V * w) @ V.T
    root = psd_sqrt(Q)
    assert np.allclose(root, np.tril(root)) and np.all(np.diag(root) >= 0)
    np.testing.assert_allclose(root @ root.T, (V * np.clip(w, 0, None)) @ V.T, rtol=0, atol=1e-15)

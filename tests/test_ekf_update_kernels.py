"""The compiled filter updates against their textbook forms: the EKF's inverse of the innovation covariance and
its Joseph form (plugins/ekf/ekf_kernel.py), the square-root forms' sequential square-root update
(plugins/ekf/square_root.py)."""

from __future__ import annotations

import numpy as np
from robotid_sim_plugins.ekf.ekf_kernel import joseph, scaled_inverse
from robotid_sim_plugins.ekf.square_root import carlson_update


def test_the_scaled_inverse_is_the_inverse_of_a_badly_scaled_covariance_and_refuses_an_indefinite_one():
    rng = np.random.default_rng(3)
    m = 27
    A = rng.normal(size=(m, 2 * m))
    D = np.diag(10.0 ** rng.uniform(-5, 1, m))  # rows as far apart as q's σ² and the torques' variances
    S = D @ (A @ A.T / m + np.eye(m)) @ D
    out = np.empty((m, m))
    assert scaled_inverse(S, out)
    np.testing.assert_allclose(out @ S, np.eye(m), atol=1e-9)
    indefinite = S.copy()
    indefinite[5, 5] = -indefinite[5, 5]
    assert not scaled_inverse(indefinite, out)
    singular = S.copy()
    singular[:, 3] = singular[3, :] = 0.0  # a zero row and column: no Cholesky factor
    assert not scaled_inverse(singular, out)


def test_joseph_is_the_textbook_form_and_stays_a_covariance_for_a_rounded_gain():
    rng = np.random.default_rng(4)
    d, m = 40, 9
    A = rng.normal(size=(d, 2 * d))
    P = A @ A.T / d
    H = rng.normal(size=(m, d))
    R = np.diag(rng.uniform(0.1, 1.0, m))
    S = H @ P @ H.T + R
    K = np.linalg.solve(S, H @ P).T
    for gain in (K, K * (1 + 1e-3 * rng.normal(size=K.shape))):  # the exact gain, then one far from it
        I_KH = np.eye(d) - gain @ H
        expected = I_KH @ P @ I_KH.T + gain @ R @ gain.T
        got = P.copy()
        joseph(got, np.ascontiguousarray(gain.T), H @ P, S)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max())
        assert np.array_equal(got, got.T)
        assert np.linalg.eigvalsh(got)[0] > 0


def test_carlson_update_is_the_kalman_update_and_keeps_a_triangular_factor_where_the_subtraction_fails():
    rng = np.random.default_rng(5)
    d, m = 30, 7
    S = np.linalg.cholesky(np.cov(rng.normal(size=(d, 3 * d))))
    x, H, z = rng.normal(size=d), rng.normal(size=(m, d)), rng.normal(size=m)
    # rows that see the first states only (the sigma-point filters' q and qd): S's last columns do not see them,
    # their f = Sᵀ hᵀ is zero there, and the update skips those columns
    H[:3, 10:] = 0.0
    P = S @ S.T
    K = np.linalg.solve(H @ P @ H.T + np.eye(m), H @ P).T
    S_new, dx, F = np.asfortranarray(S), np.empty(d), np.ascontiguousarray(S.T @ H.T)
    assert np.all(F[10:, :3] == 0.0)
    carlson_update(S_new, F, z - H @ x, dx)  # the rows seen through S, residuals
    np.testing.assert_allclose(x + dx, x + K @ (z - H @ x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(S_new @ S_new.T, P - K @ H @ P, rtol=1e-9, atol=1e-12 * np.abs(P).max())
    assert np.array_equal(S_new, np.tril(S_new)) and np.all(np.diag(S_new) > 0)
    # measurements 1e10 more precise than the prior on every state: P − K H P cancels to rounding (its smallest
    # eigenvalue negative), the factor stays triangular with a positive diagonal and the right size
    H = 1e10 * np.eye(d)
    P = S @ S.T
    K = np.linalg.solve(H @ P @ H.T + np.eye(d), H @ P).T
    subtracted = P - K @ H @ P
    assert np.linalg.eigvalsh((subtracted + subtracted.T) / 2)[0] < 0  # the plain form: no longer a covariance
    S_new = np.asfortranarray(S)
    carlson_update(S_new, np.ascontiguousarray(S.T @ H.T), np.zeros(d), np.empty(d))
    assert np.all(np.isfinite(S_new)) and np.all(np.diag(S_new) > 0)
    np.testing.assert_allclose(np.diag(S_new @ S_new.T), np.full(d, 1e-20), rtol=1e-6)

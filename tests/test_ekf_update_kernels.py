"""The compiled EKF update's two pieces against their textbook forms: the inverse of the innovation covariance and
the Joseph form (plugins/ekf/ekf_kernel.py)."""

from __future__ import annotations

import numpy as np
from robotid_sim_plugins.ekf.ekf_kernel import joseph, scaled_inverse


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

"""Built-in estimator ``idim_tls``: total least squares on the inverse dynamic model (IDIM-TLS; Golub and Van Loan
1980; BIRDy's IDIM-TLS, Leboutet et al. 2021)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.errors import IdentificationError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions, per_joint_variance

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

#: the smallest singular value of the scaled regressor must exceed that of [W τ] by this factor: closer, the
#: TLS problem is nongeneric (its solution is not unique and |v_b+1| → 0)
GENERIC_GAP = 1.0 + 1e-9


def total_least_squares(W: np.ndarray, y: np.ndarray, row_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The TLS solution of W β ≈ y with errors in W and y, rows weighted by ``row_weights`` (1/σ² each).

    The weighted rows of Z = [W y] are column-equilibrated (every column of unit norm, so each carries
    noise in proportion to its size), Z = U S Vᵀ (the SVD of its QR factor R), and the solution is the last
    right singular vector scaled to −1 in its y entry: x = −v[:b] / v[b] (Golub and Van Loan 1980). The
    covariance is the first-order one of Gleser (1981), σ̂² (1 + ‖x‖²) (AᵀA − s_min² I)⁻¹ with
    σ̂² = s_min² / (m − b), in the scaled coordinates, mapped back.

    Args:
        W: (m, b) regressor rows; y: (m,) measurements; row_weights: (m,) positive weights.

    Returns:
        (β (b,), its covariance (b, b), the smallest singular value of the scaled [W y]).

    Raises:
        IdentificationError: the TLS problem is nongeneric (the regressor alone is as close to rank
            deficiency as [W y]), so TLS has no unique solution.
    """
    import scipy.linalg

    sw = np.sqrt(row_weights)
    Z = np.column_stack([W * sw[:, None], y * sw])
    scale = np.linalg.norm(Z, axis=0)
    scale[scale == 0] = 1.0
    Z /= scale
    b = W.shape[1]
    if Z.shape[0] <= b:
        raise IdentificationError(
            f"total least squares needs more than {b} rows (one per base parameter), got {Z.shape[0]}"
        )
    # Z = Q R: Z and R have the same singular values and right singular vectors, and A = Z[:, :b] those of R_A
    R = scipy.linalg.qr(Z, mode="r", check_finite=False)[0][: b + 1]
    _, s, Vt = scipy.linalg.svd(R, check_finite=False)
    v = Vt[-1]
    _, s_A, Vt_A = scipy.linalg.svd(R[:b, :b], check_finite=False)
    if not s_A[-1] > GENERIC_GAP * s[-1] or v[b] == 0:
        raise IdentificationError(
            "the total least-squares problem is nongeneric: the scaled regressor is as close to rank deficiency "
            f"as [W τ] (smallest singular values {s_A[-1]:.3g} and {s[-1]:.3g}); excite the robot better"
        )
    x = -v[:b] / v[b]
    sigma2 = s[-1] ** 2 / max(Z.shape[0] - b, 1)
    # (AᵀA − s_min² I)⁻¹ from the SVD of R_A (positive definite for a generic problem)
    cov = sigma2 * (1.0 + x @ x) * (Vt_A.T / (s_A**2 - s[-1] ** 2)) @ Vt_A
    to_beta = scale[b] / scale[:b]
    return x * to_beta, cov * np.outer(to_beta, to_beta), float(s[-1])


class TLSEstimator(Estimator):
    """Total least squares on the base regressor (IDIM-TLS): the regressor W, built from the measured q and
    the derived qd, qdd, is taken as noisy too, not only the torque (errors in the variables).

    Each joint's rows are weighted by 1/σ_j with σ_j² = ‖r_j‖²/(M − n_j) from the OLS residual r (Gautier's
    weighting, as ``wls``); the weighted [W τ] is column-equilibrated and its smallest right singular
    vector gives β (:func:`total_least_squares` on the stacked rows in use). On exact data [W τ] has rank b
    and the estimate is the truth; with small torque noise only it is OLS's to first order.

    TLS is consistent only when every (scaled) column carries noise of the same size, independent between
    columns. Noise in q reaches W mostly through the qdd derived from it (differences amplify it by about
    1/h²), i.e. through the inertial columns alone: there TLS corrects all columns alike and is *more* biased
    than least squares (planar3r, σ_q = 5e-4 rad at 50 Hz: torque error on clean validation data 15–17 %
    against OLS's 1.7–2.0 % and ``idim_ml``'s 0.24–0.38 %, ``tests/test_birdy_linear.py``). Use ``idim_ml``,
    an instrumental variable or a prefilter for position noise; ``idim_tls`` is BIRDy's comparison point.

    Diagnostics: ``condition_number``, ``joint_noise_std`` (σ_j of the weighting), ``smallest_singular_value``
    (of the scaled [W τ]), ``deadband_rows_removed``.
    """

    name = "idim_tls"

    class Options(EstimatorOptions):
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")
        weighted: bool = Field(
            True,
            description="weight each joint's rows by 1/σ_j from the OLS residual (Gautier), as 'wls' does; "
            "false: every row alike",
        )

    def _fit(self, problem) -> BaseParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        n, joint = problem.n_dof, problem.row_joint()
        solver = problem.least_squares()
        variance = np.ones(n)
        if self.weighted:
            ols = solver.solve(covariance=False)
            variance = per_joint_variance(
                ols.residual, None, n, row_joint=joint, n_params=solver.n_params(per_joint=True)
            )
        beta, covariance, s_min = total_least_squares(
            problem.base_regressor(), problem.torque_vector(), 1.0 / variance[joint]
        )
        diagnostics = {
            "condition_number": cond,
            "joint_noise_std": np.sqrt(variance).tolist() if self.weighted else None,
            "smallest_singular_value": s_min,
        }
        return BaseParameterModel.from_problem(
            problem, beta, covariance, diagnostics={**diagnostics, **problem.diagnostics()}
        )


@hookimpl
def register_estimators(register):
    register("idim_tls", TLSEstimator)

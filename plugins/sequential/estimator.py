"""The ``sequential`` estimator (seed 003): the steps from the data's single-joint segments, solved in order."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field
from robotid_sim_plugins.sequential.steps import (
    SequentialStep,
    StepSolution,
    held_joint_motion,
    solve_step,
    step_record,
    structural_columns,
    update_estimates,
)

from robotid_sim.errors import IdentificationError
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions, per_joint_variance
from robotid_sim.identification.problem import RANK_DEFICIENT_CONDITION

#: label of a single-joint segment (:class:`~robotid_sim.excitation.sequential.SingleJointSine`)
JOINT_SEGMENT = "joint"
#: smallest per-joint noise std of the weighting, as a fraction of the largest (exact data: no division by 0)
WEIGHT_FLOOR = 1e-6


class SequentialEstimator(Estimator):
    """Seed 003's stepwise least squares over single-joint segments (SIMO), distal to base.

    The data must carry single-joint segments (label ``'joint'`` with the moving joint, written by
    :func:`~robotid_sim.simulate` from a ``sequential_sine`` excitation, or in a recording's
    ``metadata['segments']``). The segments of one joint form one step; steps follow the order in which
    the joints first move (seed 003: distal to base). In step k, with joint j moving and the parameters of
    the earlier steps known:

    1. **Which parameters** (the structural rank test of seed 003 §3.2 on random states): states with the
       held joints at their median pose over the step and joint j moving at random inside its recorded range
       give the regressor of the step's unknown columns; a parameter is new in this step when it is
       determined by these equations (its unit vector is orthogonal to their null space). The other unknown
       columns that are not zero there are held-pose terms: at a fixed pose the gravity of the proximal links
       and the friction offsets are constants that no single-joint motion separates; they are estimated
       together (their identifiable combinations), not reported, and identified in later steps.
    2. **Least squares** on every joint's torque equation of the step's rows (SIMO), the known parameters'
       torque subtracted: τ − W_F β_F = [W_P, W_N V_N] [β_P; γ] + e. With ``weighting: per_joint`` (the
       default) the step is then solved again with each joint's equations divided by that joint's residual std
       (Gautier's WLS, seed 001 Eq. 26): the joints' torques are measured with different noise, and one pooled
       variance would both waste the quiet joints' equations and misstate the standard deviations (it
       understates those of the parameters seen mostly by the noisiest joint).
    3. **Covariance**: σ²_k (HᵀH)⁻¹ of the (weighted) step plus the propagation of the earlier steps'
       covariance through the subtraction (β_P depends linearly on β_F); the segments' noises are independent,
       so the covariance of the whole minimal set is exact for (weighted) least squares with one noise variance
       per joint.

    Diagnostics: ``steps`` (one :class:`SequentialStep` per trial, as a dict), ``condition_number`` (the
    largest of the steps), ``rows_unused`` (rows in no single-joint segment: dwells), ``rank_check``
    (``"consistent"`` when every step has rank [H τ] = rank H, else ``"noisy"``), ``deadband_rows_removed``.
    """

    name = "sequential"

    class Options(EstimatorOptions):
        structural_samples: int = Field(
            200, ge=20, description="random states of each step's structural rank test (seed 003 §5.1 uses 12 sets)"
        )
        seed: int = Field(
            0, description="seed of the structural test's random states (the result does not depend on it)"
        )
        weighting: Literal["per_joint", "none"] = Field(
            "per_joint",
            description="'per_joint': each step is solved again with every joint's torque equations weighted by the "
            "inverse of that joint's OLS residual std (Gautier's WLS, seed 001 Eq. 26), since the SIMO rows of "
            "different joints have different noise; 'none': ordinary least squares, as in seed 003",
        )
        max_held_motion: float = Field(
            0.1,
            gt=0,
            description="refuse a step whose held joints move (RMS velocity) more than this fraction of the moving "
            "joint's: the data is not a single-joint excitation",
        )

    # ------------------------------------------------------------------ steps
    def _steps(self, problem) -> list[tuple[int, np.ndarray]]:
        """(joint, rows in use) of each step, in the order the joints first move."""
        n = problem.n_dof
        joints = [s for s in problem.segments if s.label == JOINT_SEGMENT and s.joint is not None]
        if not joints:
            labels = sorted({s.label for s in problem.segments})
            raise IdentificationError(
                f"estimator 'sequential' needs single-joint segments (label '{JOINT_SEGMENT}' with the moving joint), "
                f"but the data has segments {labels}; record it with excitation type 'sequential_sine' (seed 003 §4), "
                "or label a recording's single-joint ranges in metadata['segments']"
            )
        t = np.asarray(problem.dataset.t, float)
        sample = problem.row_sample()
        order: list[int] = []
        masks: dict[int, np.ndarray] = {}
        for segment in joints:
            j = int(segment.joint)
            if not 0 <= j < n:
                raise IdentificationError(f"a single-joint segment names joint index {j}, but the robot has {n} joints")
            if j not in masks:
                order.append(j)
                masks[j] = np.zeros(t.shape[0], bool)
            masks[j] |= segment.mask(t)
        missing = [j for j in range(n) if j not in masks]
        if missing:
            names = [problem.structure.joint_names[j] for j in missing]
            raise IdentificationError(
                f"estimator 'sequential': no single-joint segment for joint(s) {names}, so their parameters cannot be "
                "identified; excite every joint once (sequential_sine with every amplitude > 0)"
            )
        steps = []
        for j in order:
            rows = np.flatnonzero(masks[j][sample])
            if rows.size == 0:
                raise IdentificationError(
                    f"estimator 'sequential': the segment of joint {problem.structure.joint_names[j]} has no sample "
                    "in use (outside the recording, or all removed by the velocity dead-band)"
                )
            steps.append((j, rows))
        return steps

    # ------------------------------------------------------------------ fit
    def _fit(self, problem) -> BaseParameterModel:
        names = problem.base_parameter_names
        b, n = problem.base.count, problem.n_dof
        W = problem.base_regressor()
        tau = problem.torque_vector()
        sample, row_joint = problem.row_sample(), problem.row_joint()
        qd = np.asarray(problem.dataset.qd, float)
        rng = np.random.default_rng(self.seed)
        beta = np.full(b, np.nan)
        covariance = np.zeros((b, b))
        known = np.zeros(b, bool)
        steps: list[SequentialStep] = []
        used = np.zeros(W.shape[0], bool)
        for k, (joint, rows) in enumerate(self._steps(problem), start=1):
            used[rows] = True
            samples = np.unique(sample[rows])
            held_motion = held_joint_motion(qd, samples, joint)
            joint_name = problem.structure.joint_names[joint]
            if held_motion > self.max_held_motion:
                raise IdentificationError(
                    f"estimator 'sequential', step {k} (joint {joint_name}): the held joints move {held_motion:.3g} "
                    f"times as fast as the moving one (RMS velocity; limit max_held_motion = "
                    f"{self.max_held_motion:g}); the segment is not a single-joint excitation: hold the other joints "
                    "(sequential_sine)"
                )
            unknown = np.flatnonzero(~known)
            new, held, V = structural_columns(problem, joint, samples, unknown, rng, self.structural_samples)
            if new.size == 0:
                raise IdentificationError(
                    f"estimator 'sequential', step {k} (joint {joint_name}): the motion of this joint determines no "
                    "base parameter not identified before; excite the joints from the distal one to the base "
                    "(order: distal_to_base)"
                )
            known_idx = np.flatnonzero(known)
            Wk, y = W[rows], tau[rows] - (W[rows][:, known_idx] @ beta[known_idx] if known_idx.size else 0.0)
            absent = np.setdiff1d(unknown, np.concatenate([new, held]))
            plain, solved, row_scale = self._solve(Wk, y, new, held, V, absent, row_joint[rows], n)
            _check_step_rank(solved, new, names, f"step {k} (joint {joint_name})")
            update_estimates(beta, covariance, known, new, known_idx, solved, Wk, row_scale)
            parameters = [names[c] for c in new]
            steps.append(step_record(k, joint, parameters, new, Wk, y, plain, solved, row_scale, held_motion))
        if not known.all():
            missing = [names[c] for c in np.flatnonzero(~known)]
            raise IdentificationError(
                f"estimator 'sequential': base parameter(s) {missing} are excited by no single-joint segment; excite "
                "every joint, from the distal one to the base (sequential_sine, order distal_to_base)"
            )
        covariance = 0.5 * (covariance + covariance.T)
        return BaseParameterModel.from_problem(
            problem,
            beta,
            covariance,
            diagnostics={
                "steps": [s.as_dict() for s in steps],
                "condition_number": max(s.condition_number for s in steps),
                "rank_check": "consistent" if all(s.rank_h_tau == s.rank_h for s in steps) else "noisy",
                "rows_unused": int(np.count_nonzero(~used)),
                **problem.diagnostics(),
            },
        )

    def _solve(self, Wk, y, new, held, V, absent, row_joint, n: int) -> tuple[StepSolution, StepSolution, np.ndarray]:
        """(plain, solved, row_scale): the step's least squares, and with ``weighting: per_joint`` the step solved
        again with each joint's equations scaled by ``row_scale``, the inverse of that joint's residual std."""
        plain = solve_step(Wk, y, new, held, V, absent)
        solved, row_scale = plain, np.ones(Wk.shape[0])
        if self.weighting == "per_joint":
            # Gautier's weighting of the step (seed 001 Eq. 26): each joint's torque equations scaled by the
            # inverse of that joint's OLS residual std, then least squares again
            sigma = np.sqrt(per_joint_variance(plain.residual, plain.H, n, row_joint=row_joint))
            if sigma.max() > 0:
                row_scale = 1.0 / np.maximum(sigma, WEIGHT_FLOOR * sigma.max())[row_joint]
                solved = solve_step(Wk * row_scale[:, None], y * row_scale, new, held, V, absent)
        return plain, solved, row_scale


def _check_step_rank(solved: StepSolution, new: np.ndarray, names: list[str], where: str) -> None:
    """Refuse a rank-deficient step (scaled condition number above RANK_DEFICIENT_CONDITION), naming the weakest
    combination of its new parameters."""
    s, Vt = solved.s, solved.Vt
    p = new.size
    scaled_cond = float(s[0] / s[-1]) if s[-1] > 0 else np.inf
    if scaled_cond > RANK_DEFICIENT_CONDITION:
        weakest = [names[c] for c in new[np.argsort(-np.abs(Vt[-1, :p]))[:3]]]
        raise IdentificationError(
            f"estimator 'sequential', {where}: rank-deficient step (condition number "
            f"{scaled_cond:.3g}); the combination of {weakest} is not excited. Raise the amplitude or the "
            "frequency of this joint's sine, or record more cycles"
        )

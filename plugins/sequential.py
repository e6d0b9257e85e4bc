"""Built-in estimator ``sequential``: the minimal parameter set identified joint by joint (seed 003 §3.2, §4, §5.1).

Seed 003 excites one joint at a time, from the distal joint to the base, the others held at a safe pose
(:class:`~robotid_sim.excitation.sequential.SequentialSine`), and identifies by least squares, in each trial,
"only the relevant subset of parameters": those the newly moving joint excites. Every joint's torque is
recorded in every trial (single input, multiple outputs: the held joints feel the moving one through the
coupling), and the parameters of the earlier trials are kept at their values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from robotid_sim.errors import IdentificationError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions, per_joint_variance
from robotid_sim.identification.metrics import condition_number
from robotid_sim.identification.problem import RANK_DEFICIENT_CONDITION

ROBOTID_SIM_PLUGIN_API = "1.1"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

#: label of a single-joint segment (:class:`~robotid_sim.excitation.sequential.SingleJointSine`)
JOINT_SEGMENT = "joint"
#: relative singular value below which a column combination counts as not excited (structural rank)
STRUCTURAL_TOLERANCE = 1e-9
#: smallest per-joint noise std of the weighting, as a fraction of the largest (exact data: no division by 0)
WEIGHT_FLOOR = 1e-6
#: relative singular value under which the rank check of seed 003 §3.2 counts [H τ] as not of higher rank
RANK_CHECK_TOLERANCE = 1e-8


@dataclass(frozen=True)
class SequentialStep:
    """One trial of the sequential identification (seed 003 §5.1), as reported in the model's diagnostics.

    Attributes:
        step: 1-based step number.
        joint: 0-based index of the joint that moved.
        parameters: names of the base parameters identified in this step.
        rows: torque equations used (samples × joints of the step's segments, rows in use).
        rank_h: numerical rank of the step's regressor H (the new parameters' columns and the held pose's
            constant terms).
        rank_h_tau: numerical rank of [H τ] (τ: the torque less the parameters known from earlier steps).
            Equal to ``rank_h``: τ lies in the range of H (noise-free data, a unique solution); one more: the
            torque holds noise or model error (seed 003 §3.2).
        expected_rank: the number of unknowns of the step (the new parameters and the held-pose terms).
        condition_number: cond(H) of the new parameters' columns after the held-pose terms are projected out
            (seed 003 §5.1 reports 47.73, 52.95, 54.34 for joints 3, 2, 1).
        residual_rms: RMS of the step's torque residual (N·m or N).
        relative_residual: ‖r‖ / ‖τ‖ of the step.
        held_motion: largest RMS velocity of a held joint over the moving joint's RMS velocity (0 for a
            perfectly held pose).
    """

    step: int
    joint: int
    parameters: list[str]
    rows: int
    rank_h: int
    rank_h_tau: int
    expected_rank: int
    condition_number: float
    residual_rms: float
    relative_residual: float
    held_motion: float

    def as_dict(self) -> dict:
        return {
            "step": self.step,
            "joint": self.joint,
            "parameters": list(self.parameters),
            "rows": self.rows,
            "rank_h": self.rank_h,
            "rank_h_tau": self.rank_h_tau,
            "expected_rank": self.expected_rank,
            "condition_number": self.condition_number,
            "residual_rms": self.residual_rms,
            "relative_residual": self.relative_residual,
            "held_motion": self.held_motion,
        }


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

    def _structural(self, problem, joint: int, samples: np.ndarray, unknown: np.ndarray, rng) -> tuple:
        """(new, held): the unknown base columns the motion of ``joint`` determines, and the other unknown columns
        that are not zero at the held pose, with ``V`` (len(held), r) the directions of their identifiable
        combinations; from random states (held joints at their median pose, ``joint`` inside its range)."""
        ds = problem.dataset
        q, qd, qdd = (np.asarray(x, float)[samples] for x in (ds.q, ds.qd, ds.qdd))
        N = self.structural_samples
        qs = np.repeat(np.median(q, axis=0)[None], N, axis=0)
        qds, qdds = np.zeros_like(qs), np.zeros_like(qs)
        lo, hi = q[:, joint].min(), q[:, joint].max()
        qs[:, joint] = rng.uniform(lo, hi, N)
        qds[:, joint] = rng.uniform(-1, 1, N) * max(np.abs(qd[:, joint]).max(), 1e-3)
        qdds[:, joint] = rng.uniform(-1, 1, N) * max(np.abs(qdd[:, joint]).max(), 1e-3)
        A = problem.base.regressor(qs, qds, qdds)[..., unknown].reshape(-1, unknown.size)
        scale = np.linalg.norm(A, axis=0)
        alive = scale > 1e-12 * max(scale.max(), 1e-300)
        A = A[:, alive] / scale[alive]
        columns = unknown[alive]
        _, s, Vt = np.linalg.svd(A, full_matrices=True)
        rank = int(np.sum(s > STRUCTURAL_TOLERANCE * s[0])) if s.size else 0
        null = Vt[rank:].T  # (len(columns), nullity)
        determined = np.linalg.norm(null, axis=1) < 1e-6 if null.size else np.ones(columns.size, bool)
        new, held = columns[determined], columns[~determined]
        if held.size:
            Ah = A[:, ~determined]
            _, sh, Vh = np.linalg.svd(Ah, full_matrices=False)
            rh = int(np.sum(sh > STRUCTURAL_TOLERANCE * sh[0]))
            V = (Vh[:rh].T) / scale[alive][~determined][:, None]  # combinations of the raw columns
        else:
            V = np.zeros((0, 0))
        return new, held, V

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
            moving = np.sqrt(np.mean(qd[samples, joint] ** 2))
            others = [i for i in range(n) if i != joint]
            held_motion = (
                float(np.max(np.sqrt(np.mean(qd[np.ix_(samples, others)] ** 2, axis=0))) / max(moving, 1e-300))
                if others
                else 0.0
            )
            joint_name = problem.structure.joint_names[joint]
            if held_motion > self.max_held_motion:
                raise IdentificationError(
                    f"estimator 'sequential', step {k} (joint {joint_name}): the held joints move {held_motion:.3g} "
                    f"times as fast as the moving one (RMS velocity; limit max_held_motion = "
                    f"{self.max_held_motion:g}); the segment is not a single-joint excitation: hold the other joints "
                    "(sequential_sine)"
                )
            unknown = np.flatnonzero(~known)
            new, held, V = self._structural(problem, joint, samples, unknown, rng)
            if new.size == 0:
                raise IdentificationError(
                    f"estimator 'sequential', step {k} (joint {joint_name}): the motion of this joint determines no "
                    "base parameter not identified before; excite the joints from the distal one to the base "
                    "(order: distal_to_base)"
                )
            known_idx = np.flatnonzero(known)
            Wk, y = W[rows], tau[rows] - (W[rows][:, known_idx] @ beta[known_idx] if known_idx.size else 0.0)
            absent = np.setdiff1d(unknown, np.concatenate([new, held]))
            plain = _solve_step(Wk, y, new, held, V, absent)
            solved, row_scale = plain, np.ones(rows.size)
            if self.weighting == "per_joint":
                # Gautier's weighting of the step (seed 001 Eq. 26): each joint's torque equations scaled by the
                # inverse of that joint's OLS residual std, then least squares again
                sigma = np.sqrt(per_joint_variance(plain.residual, plain.H, n, row_joint=row_joint[rows]))
                if sigma.max() > 0:
                    row_scale = 1.0 / np.maximum(sigma, WEIGHT_FLOOR * sigma.max())[row_joint[rows]]
                    solved = _solve_step(Wk * row_scale[:, None], y * row_scale, new, held, V, absent)
            H, Hs, s, Vt, scale, x = solved.H, solved.Hs, solved.s, solved.Vt, solved.scale, solved.x
            p = new.size
            scaled_cond = float(s[0] / s[-1]) if s[-1] > 0 else np.inf
            if scaled_cond > RANK_DEFICIENT_CONDITION:
                weakest = [names[c] for c in new[np.argsort(-np.abs(Vt[-1, :p]))[:3]]]
                raise IdentificationError(
                    f"estimator 'sequential', step {k} (joint {joint_name}): rank-deficient step (condition number "
                    f"{scaled_cond:.3g}); the combination of {weakest} is not excited. Raise the amplitude or the "
                    "frequency of this joint's sine, or record more cycles"
                )
            dof = max(rows.size - H.shape[1], 1)
            sigma2 = float(solved.residual @ solved.residual) / dof
            HtH_inv = Vt.T @ np.diag(1.0 / s**2) @ Vt  # (Hsᵀ Hs)⁻¹
            step_cov = sigma2 * HtH_inv[:p, :p] / np.outer(scale[:p], scale[:p])
            beta[new] = x[:p] / scale[:p]
            if known_idx.size:
                # β_P = [H⁺ (τ − W_F β_F)]_P: the earlier steps' errors propagate through J = −[H⁺ W_F]_P
                J = -((HtH_inv @ Hs.T @ (Wk[:, known_idx] * row_scale[:, None]))[:p] / scale[:p, None])
                cross = J @ covariance[np.ix_(known_idx, known_idx)]
                covariance[np.ix_(new, known_idx)] = cross
                covariance[np.ix_(known_idx, new)] = cross.T
                step_cov = step_cov + cross @ J.T
            covariance[np.ix_(new, new)] = step_cov
            known[new] = True
            # seed 003 §3.2: rank of [H τ] against rank of H
            yw = y * row_scale
            ywn = np.linalg.norm(yw)
            s_aug = np.linalg.svd(np.hstack([Hs, (yw / ywn if ywn > 0 else yw)[:, None]]), compute_uv=False)
            rank_h = int(np.sum(s > RANK_CHECK_TOLERANCE * s[0]))
            rank_aug = int(np.sum(s_aug > RANK_CHECK_TOLERANCE * s_aug[0]))
            cond = condition_number(_project_out(Wk[:, new], plain.nuisance))
            residual = solved.residual / row_scale  # N·m or N
            yn = np.linalg.norm(y)
            steps.append(
                SequentialStep(
                    step=k,
                    joint=joint,
                    parameters=[names[c] for c in new],
                    rows=int(rows.size),
                    rank_h=rank_h,
                    rank_h_tau=rank_aug,
                    expected_rank=int(H.shape[1]),
                    condition_number=float(cond),
                    residual_rms=float(np.sqrt(np.mean(residual**2))),
                    relative_residual=float(np.linalg.norm(residual) / yn) if yn > 0 else 0.0,
                    held_motion=held_motion,
                )
            )
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


@dataclass(frozen=True)
class _StepSolution:
    """The least-squares solution of one step: ``H = [W_P, nuisance]``, its column-scaled ``Hs = H / scale`` with
    the SVD ``Hs = U diag(s) Vt``, the scaled solution ``x`` and the residual."""

    H: np.ndarray
    nuisance: np.ndarray
    Hs: np.ndarray
    scale: np.ndarray
    s: np.ndarray
    Vt: np.ndarray
    x: np.ndarray
    residual: np.ndarray


def _solve_step(
    Wk: np.ndarray, y: np.ndarray, new: np.ndarray, held: np.ndarray, V: np.ndarray, absent: np.ndarray
) -> _StepSolution:
    """Least squares of a step's new parameters and held-pose terms on the rows ``Wk``, ``y``."""
    nuisance = _held_pose_terms(Wk, held, V, absent)
    H = np.hstack([Wk[:, new], nuisance])
    scale = np.linalg.norm(H, axis=0)
    scale[scale == 0] = 1.0
    Hs = H / scale
    _, s, Vt = np.linalg.svd(Hs, full_matrices=False)
    x, *_ = np.linalg.lstsq(Hs, y, rcond=None)
    return _StepSolution(H, nuisance, Hs, scale, s, Vt, x, y - Hs @ x)


def _held_pose_terms(W: np.ndarray, held: np.ndarray, V: np.ndarray, absent: np.ndarray) -> np.ndarray:
    """(m, r) an orthonormal basis of the step's nuisance torque: the held pose's identifiable combinations
    ``W[:, held] @ V`` and the unknown columns that are structurally zero in the step but not in the data
    (``absent``: the Coulomb term fc·sign(qd) of a held joint whose recorded velocity is a rounding error away
    from 0, or measurement noise on a held joint's signals); these are estimated, not reported."""
    blocks = [W[:, held] @ V] if held.size else []
    extra = W[:, absent]
    alive = np.linalg.norm(extra, axis=0) > 0
    if alive.any():
        blocks.append(extra[:, alive])
    if not blocks:
        return np.zeros((W.shape[0], 0))
    B = np.hstack(blocks)
    B = B / np.maximum(np.linalg.norm(B, axis=0), 1e-300)
    U, s, _ = np.linalg.svd(B, full_matrices=False)
    return U[:, s > STRUCTURAL_TOLERANCE * s[0]] if s.size and s[0] > 0 else np.zeros((W.shape[0], 0))


def _project_out(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A with the column space of B (orthonormal columns, possibly none) removed."""
    if B.size == 0:
        return A
    return A - B @ (B.T @ A)


@hookimpl
def register_estimators(register):
    register("sequential", SequentialEstimator)

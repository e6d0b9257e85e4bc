"""The linear algebra of one step of the sequential identification (seed 003 §3.2, §5.1): which parameters a
joint's motion determines, the step's least squares with the held pose's terms, the covariance update, the
rank check and the step's report."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robotid_sim.identification.metrics import condition_number

#: relative singular value below which a column combination counts as not excited (structural rank)
STRUCTURAL_TOLERANCE = 1e-9
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


def structural_columns(problem, joint: int, samples: np.ndarray, unknown: np.ndarray, rng, n_states: int) -> tuple:
    """(new, held, V): the unknown base columns the motion of ``joint`` determines, and the other unknown
    columns that are not zero at the held pose, with ``V`` (len(held), r) the directions of their identifiable
    combinations; from ``n_states`` random states (held joints at their median pose, ``joint``
    inside its range)."""
    ds = problem.dataset
    q, qd, qdd = (np.asarray(x, float)[samples] for x in (ds.q, ds.qd, ds.qdd))
    N = n_states
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


@dataclass(frozen=True)
class StepSolution:
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


def solve_step(
    Wk: np.ndarray, y: np.ndarray, new: np.ndarray, held: np.ndarray, V: np.ndarray, absent: np.ndarray
) -> StepSolution:
    """Least squares of a step's new parameters and held-pose terms on the rows ``Wk``, ``y``."""
    nuisance = held_pose_terms(Wk, held, V, absent)
    H = np.hstack([Wk[:, new], nuisance])
    scale = np.linalg.norm(H, axis=0)
    scale[scale == 0] = 1.0
    Hs = H / scale
    _, s, Vt = np.linalg.svd(Hs, full_matrices=False)
    x, *_ = np.linalg.lstsq(Hs, y, rcond=None)
    return StepSolution(H, nuisance, Hs, scale, s, Vt, x, y - Hs @ x)


def held_pose_terms(W: np.ndarray, held: np.ndarray, V: np.ndarray, absent: np.ndarray) -> np.ndarray:
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


def project_out(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A with the column space of B (orthonormal columns, possibly none) removed."""
    if B.size == 0:
        return A
    return A - B @ (B.T @ A)


def held_joint_motion(qd: np.ndarray, samples: np.ndarray, joint: int) -> float:
    """Largest RMS velocity of a held joint over the moving ``joint``'s RMS velocity on ``samples`` (0 for a
    single-joint arm)."""
    n = qd.shape[1]
    moving = np.sqrt(np.mean(qd[samples, joint] ** 2))
    others = [i for i in range(n) if i != joint]
    return (
        float(np.max(np.sqrt(np.mean(qd[np.ix_(samples, others)] ** 2, axis=0))) / max(moving, 1e-300))
        if others
        else 0.0
    )


def update_estimates(
    beta: np.ndarray,
    covariance: np.ndarray,
    known: np.ndarray,
    new: np.ndarray,
    known_idx: np.ndarray,
    solved: StepSolution,
    Wk: np.ndarray,
    row_scale: np.ndarray,
) -> None:
    """Write the step's new parameters into ``beta`` (b,), their covariance into ``covariance`` (b, b) and mark
    them in ``known`` (b,), in place: σ²_k (HᵀH)⁻¹ of the (weighted) step plus the propagation of the earlier
    steps' covariance through the subtraction of their torque."""
    Hs, s, Vt, scale, x = solved.Hs, solved.s, solved.Vt, solved.scale, solved.x
    p = new.size
    dof = max(Wk.shape[0] - solved.H.shape[1], 1)
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


def step_record(
    k: int,
    joint: int,
    parameters: list[str],
    new: np.ndarray,
    Wk: np.ndarray,
    y: np.ndarray,
    plain: StepSolution,
    solved: StepSolution,
    row_scale: np.ndarray,
    held_motion: float,
) -> SequentialStep:
    """The report of step ``k``: the rank check of seed 003 §3.2 (rank of [H τ] against rank of H), cond(H) of
    the new columns with the held-pose terms projected out, and the residual in N·m or N."""
    s = solved.s
    yw = y * row_scale
    ywn = np.linalg.norm(yw)
    s_aug = np.linalg.svd(np.hstack([solved.Hs, (yw / ywn if ywn > 0 else yw)[:, None]]), compute_uv=False)
    rank_h = int(np.sum(s > RANK_CHECK_TOLERANCE * s[0]))
    rank_aug = int(np.sum(s_aug > RANK_CHECK_TOLERANCE * s_aug[0]))
    cond = condition_number(project_out(Wk[:, new], plain.nuisance))
    residual = solved.residual / row_scale  # N·m or N
    yn = np.linalg.norm(y)
    return SequentialStep(
        step=k,
        joint=joint,
        parameters=parameters,
        rows=int(Wk.shape[0]),
        rank_h=rank_h,
        rank_h_tau=rank_aug,
        expected_rank=int(solved.H.shape[1]),
        condition_number=float(cond),
        residual_rms=float(np.sqrt(np.mean(residual**2))),
        relative_residual=float(np.linalg.norm(residual) / yn) if yn > 0 else 0.0,
        held_motion=held_motion,
    )

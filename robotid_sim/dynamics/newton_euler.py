"""Batched Newton–Euler recursion: regressor and inverse dynamics (SPEC §4, seed 003 §2–3).

Everything is vectorised over the N samples; the only Python loops run over the n joints.
Internally a 3-vector batch is an array (3, N) and a rotation batch (3, 3, N), so that every
numpy operation works on contiguous length-N rows.

Frames: frame j is the frame of moving joint j (= its child link frame). ``E_j`` rotates
frame j-1 coordinates into frame j, ``p_j`` is the origin of frame j in frame j-1. Velocities
``w`` (angular), ``dw`` (angular acceleration) and ``a`` (linear acceleration of the frame
origin, gravity included as a base acceleration of -g) are expressed in the link's own frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robotid_sim.robot.chain import Joint


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product along axis 0 of two broadcastable arrays (3, ...)."""
    return np.array(
        [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    )


def rotate(E: np.ndarray, v: np.ndarray) -> np.ndarray:
    """E @ v for E (3, 3, N) or (3, 3, 1), v (3, ..., N): a batched 3x3 matrix-vector product."""
    extra = (slice(None),) + (None,) * (v.ndim - 2) + (slice(None),)
    return E[:, 0][extra] * v[0] + E[:, 1][extra] * v[1] + E[:, 2][extra] * v[2]


def rotate_transposed(E: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Eᵀ @ v, same shapes as :func:`rotate`."""
    extra = (slice(None),) + (None,) * (v.ndim - 2) + (slice(None),)
    return E[0][extra] * v[0] + E[1][extra] * v[1] + E[2][extra] * v[2]


@dataclass
class ForwardPass:
    """Per-joint kinematics of one batch: lists of length n."""

    E: list[np.ndarray]  # (3, 3, N or 1): frame j-1 -> frame j rotation
    p: list[np.ndarray]  # (3, N or 1): origin of frame j in frame j-1
    w: list[np.ndarray]  # (3, N)
    dw: list[np.ndarray]  # (3, N)
    a: list[np.ndarray]  # (3, N)


def _axis_rotation(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation (3, 3, N) by ``angle`` (N,) about unit ``axis`` (3,)."""
    c, s = np.cos(angle), np.sin(angle)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    outer = np.outer(axis, axis)
    return (
        np.eye(3)[:, :, None] * c + outer[:, :, None] * (1.0 - c) + K[:, :, None] * s
    )


def forward_pass(
    joints: Sequence[Joint], qT: np.ndarray, qdT: np.ndarray, qddT: np.ndarray, gravity: np.ndarray
) -> ForwardPass:
    """Outward recursion. ``qT, qdT, qddT`` are (n, N); ``gravity`` (3,) in the base frame."""
    N = qT.shape[1]
    w = np.zeros((3, N))
    dw = np.zeros((3, N))
    a = np.broadcast_to(-np.asarray(gravity, float)[:, None], (3, N))
    out = ForwardPass([], [], [], [], [])
    for j, joint in enumerate(joints):
        ax = joint.axis[:, None]
        R0, p0 = joint.origin_rotation, joint.origin_translation
        if joint.kind == "revolute":
            R = np.einsum("ab,bcN->acN", R0, _axis_rotation(joint.axis, qT[j]))
            p = p0[:, None]
        else:
            R = R0[:, :, None]
            p = p0[:, None] + (R0 @ joint.axis)[:, None] * qT[j]
        E = np.ascontiguousarray(R.transpose(1, 0, 2))
        a_parent = a + cross(dw, p) + cross(w, cross(w, p))
        a = rotate(E, a_parent)
        w = rotate(E, w)
        dw = rotate(E, dw)
        if joint.kind == "revolute":
            wj = ax * qdT[j]
            dw = dw + ax * qddT[j] + cross(w, wj)
            w = w + wj
        else:
            a = a + 2.0 * cross(w, ax * qdT[j]) + ax * qddT[j]
        out.E.append(E)
        out.p.append(p)
        out.w.append(w)
        out.dw.append(dw)
        out.a.append(a)
    return out


def _inertia_times(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Coefficients c (6, ...) with vᵀ (I w) = c · [XX, XY, XZ, YY, YZ, ZZ]."""
    return np.array(
        [
            v[0] * w[0],
            v[0] * w[1] + v[1] * w[0],
            v[0] * w[2] + v[2] * w[0],
            v[1] * w[1],
            v[1] * w[2] + v[2] * w[1],
            v[2] * w[2],
        ]
    )


def inertial_regressor(
    joints: Sequence[Joint], qT: np.ndarray, qdT: np.ndarray, qddT: np.ndarray, gravity: np.ndarray
) -> np.ndarray:
    """Inertial regressor in internal layout (n, n, 10, N): ``Y[i, j, k]`` multiplies parameter
    k of link j in the torque of joint i (zero for i > j).

    For each joint i ≤ j the motion axis of joint i expressed at frame j is the pair (u, v)
    (angular, linear); then tau_i += u · n_j + v · f_j with the link-j wrench about its frame
    origin, n_j = I dw + w × I w + mc × a and f_j = M a + dw × mc + w × (w × mc),
    both linear in the 10 standard parameters.
    """
    n, N = qT.shape
    fp = forward_pass(joints, qT, qdT, qddT, gravity)
    Y = np.zeros((n, n, 10, N))
    u = np.zeros((3, 0, N))
    v = np.zeros((3, 0, N))
    for j, joint in enumerate(joints):
        E, p = fp.E[j], fp.p[j][:, None, :]
        # carry the axes of joints < j from frame j-1 to frame j
        v = rotate(E, v + cross(u, p))
        u = rotate(E, u)
        own = np.broadcast_to(joint.axis[:, None, None], (3, 1, N))
        zero = np.zeros((3, 1, N))
        u = np.concatenate([u, own if joint.kind == "revolute" else zero], axis=1)
        v = np.concatenate([v, zero if joint.kind == "revolute" else own], axis=1)
        w, dw, a = (x[:, None, :] for x in (fp.w[j], fp.dw[j], fp.a[j]))
        Y[: j + 1, j, 0:6] = (_inertia_times(u, dw) + _inertia_times(cross(u, w), w)).transpose(1, 0, 2)
        Y[: j + 1, j, 6:9] = (cross(a, u) + cross(v, dw) + cross(cross(v, w), w)).transpose(1, 0, 2)
        Y[: j + 1, j, 9] = (v * a).sum(axis=0)
    return Y


def rnea(
    joints: Sequence[Joint],
    inertials: np.ndarray,
    qT: np.ndarray,
    qdT: np.ndarray,
    qddT: np.ndarray,
    gravity: np.ndarray,
) -> np.ndarray:
    """Rigid-body inverse dynamics (n, N) from standard parameters ``inertials`` (n, 10)."""
    n, N = qT.shape
    fp = forward_pass(joints, qT, qdT, qddT, gravity)
    tau = np.empty((n, N))
    F = np.zeros((3, N))
    Nm = np.zeros((3, N))
    for j in range(n - 1, -1, -1):
        XX, XY, XZ, YY, YZ, ZZ, MX, MY, MZ, M = inertials[j]
        I = np.array([[XX, XY, XZ], [XY, YY, YZ], [XZ, YZ, ZZ]])[:, :, None]
        mc = np.array([MX, MY, MZ])[:, None]
        w, dw, a = fp.w[j], fp.dw[j], fp.a[j]
        f = M * a + cross(dw, mc) + cross(w, cross(w, mc))
        m = rotate(I, dw) + cross(w, rotate(I, w)) + cross(mc, a)
        if j + 1 < n:  # add the child's wrench, carried into frame j
            E1, p1 = fp.E[j + 1], fp.p[j + 1]
            Fc = rotate_transposed(E1, F)
            m = m + rotate_transposed(E1, Nm) + cross(p1, Fc)
            f = f + Fc
        F, Nm = f, m
        ax = joints[j].axis
        tau[j] = ax @ (Nm if joints[j].kind == "revolute" else F)
    return tau

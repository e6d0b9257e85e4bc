"""Batched Newton–Euler recursion: regressor and inverse dynamics (SPEC §4, seed 003 §2–3).

Everything is vectorised over the N samples; the only Python loops run over the n joints.
Internally a 3-vector batch is an array (3, N) and a rotation batch (3, 3, N), so that every
numpy operation works on contiguous length-N rows.

Frames: frame j is the frame of moving joint j (= its child link frame). ``E_j`` rotates
the parent frame's coordinates into frame j, ``p_j`` is the origin of frame j in the parent frame
(the frame of joint j's parent joint, :func:`~robotid_sim.dynamics.chain.chain_parents`; the base
for a joint on the base; frame j-1 in a serial chain). Velocities
``w`` (angular), ``dw`` (angular acceleration) and ``a`` (linear acceleration of the frame
origin, gravity included as a base acceleration of -g) are expressed in the link's own frame.

The compiled per-sample kernels (:mod:`robotid_sim.dynamics.crba_kernels`) do the work in
practice; these numpy functions are the reference they are tested against and the fallback where
numba is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robotid_sim.dynamics.chain import Joint, chain_parents


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product along axis 0 of two broadcastable arrays (3, ...)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


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

    E: list[np.ndarray]  # (3, 3, N or 1): parent frame -> frame j rotation
    p: list[np.ndarray]  # (3, N or 1): origin of frame j in its parent frame
    w: list[np.ndarray]  # (3, N)
    dw: list[np.ndarray]  # (3, N)
    a: list[np.ndarray]  # (3, N)


def _axis_rotation(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation (3, 3, N) by ``angle`` (N,) about unit ``axis`` (3,)."""
    c, s = np.cos(angle), np.sin(angle)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    outer = np.outer(axis, axis)
    return np.eye(3)[:, :, None] * c + outer[:, :, None] * (1.0 - c) + K[:, :, None] * s


def forward_pass(
    joints: Sequence[Joint], qT: np.ndarray, qdT: np.ndarray, qddT: np.ndarray, gravity: np.ndarray
) -> ForwardPass:
    """Outward recursion. ``qT, qdT, qddT`` are (n, N); ``gravity`` (3,) in the base frame.

    Each link starts from its parent's motion (:func:`~robotid_sim.dynamics.chain.chain_parents`),
    the base's for a joint on the base.
    """
    N = qT.shape[1]
    base = (np.zeros((3, N)), np.zeros((3, N)), np.broadcast_to(-np.asarray(gravity, float)[:, None], (3, N)))
    parents = chain_parents(joints)
    out = ForwardPass([], [], [], [], [])
    for j, joint in enumerate(joints):
        k = parents[j]
        w, dw, a = base if k < 0 else (out.w[k], out.dw[k], out.a[k])
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


def _skew(v: np.ndarray) -> np.ndarray:
    """[v]x (N, 3, 3) for v (3, N)."""
    S = np.zeros((v.shape[1], 3, 3))
    S[:, 0, 1], S[:, 0, 2], S[:, 1, 2] = -v[2], v[1], -v[0]
    S[:, 1, 0], S[:, 2, 0], S[:, 2, 1] = v[2], -v[1], v[0]
    return S


#: features of one link's motion, in order: dw (3), the products of w (6), a (3)
_FEATURES = ("dx", "dy", "dz", "wxwx", "wywy", "wzwz", "wxwy", "wxwz", "wywz", "ax", "ay", "az")


def _wrench_basis() -> np.ndarray:
    """C (12, 60): A.reshape(60) = features @ C, with A (6, 10) the link wrench regressor.

    A's rows are (n; f), the moment about the frame origin and the force, its columns the
    standard parameters XX XY XZ YY YZ ZZ MX MY MZ M (Newton–Euler, seed 003 Eq. 5–6):
    n = I dw + w x (I w) + mc x a, f = M a + dw x mc + w x (w x mc).
    """
    # fmt: off
    terms = {
        # moment rows, inertia columns: L(dw) + [w]x L(w), with I v = L(v) [XX XY XZ YY YZ ZZ]
        (0, 0): {"dx": 1}, (0, 1): {"dy": 1, "wxwz": -1}, (0, 2): {"dz": 1, "wxwy": 1},
        (0, 3): {"wywz": -1}, (0, 4): {"wywy": 1, "wzwz": -1}, (0, 5): {"wywz": 1},
        (1, 0): {"wxwz": 1}, (1, 1): {"dx": 1, "wywz": 1}, (1, 2): {"wzwz": 1, "wxwx": -1},
        (1, 3): {"dy": 1}, (1, 4): {"dz": 1, "wxwy": -1}, (1, 5): {"wxwz": -1},
        (2, 0): {"wxwy": -1}, (2, 1): {"wxwx": 1, "wywy": -1}, (2, 2): {"dx": 1, "wywz": -1},
        (2, 3): {"wxwy": 1}, (2, 4): {"dy": 1, "wxwz": 1}, (2, 5): {"dz": 1},
        # moment rows, first moments: mc x a = -[a]x mc
        (0, 7): {"az": 1}, (0, 8): {"ay": -1}, (1, 6): {"az": -1}, (1, 8): {"ax": 1},
        (2, 6): {"ay": 1}, (2, 7): {"ax": -1},
        # force rows, first moments: [dw]x + [w]x[w]x = [dw]x + w wᵀ - |w|² E
        (3, 6): {"wywy": -1, "wzwz": -1}, (3, 7): {"dz": -1, "wxwy": 1}, (3, 8): {"dy": 1, "wxwz": 1},
        (4, 6): {"dz": 1, "wxwy": 1}, (4, 7): {"wxwx": -1, "wzwz": -1}, (4, 8): {"dx": -1, "wywz": 1},
        (5, 6): {"dy": -1, "wxwz": 1}, (5, 7): {"dx": 1, "wywz": 1}, (5, 8): {"wxwx": -1, "wywy": -1},
        # force rows, mass: a
        (3, 9): {"ax": 1}, (4, 9): {"ay": 1}, (5, 9): {"az": 1},
    }
    # fmt: on
    C = np.zeros((len(_FEATURES), 60))
    for (row, col), coefficients in terms.items():
        for feature, c in coefficients.items():
            C[_FEATURES.index(feature), row * 10 + col] = c
    return C


_WRENCH_BASIS = _wrench_basis()


def _link_wrench_regressor(w: np.ndarray, dw: np.ndarray, a: np.ndarray, F: np.ndarray) -> np.ndarray:
    """A (N, 6, 10): the link wrench regressor for ``w, dw, a`` (3, N), as one matrix product
    of the motion features with :func:`_wrench_basis`. ``F`` (12, N) is a work buffer."""
    wx, wy, wz = w
    F[0:3] = dw
    F[3], F[4], F[5] = wx * wx, wy * wy, wz * wz
    F[6], F[7], F[8] = wx * wy, wx * wz, wy * wz
    F[9:12] = a
    return (F.T @ _WRENCH_BASIS).reshape(-1, 6, 10)


def inertial_regressor(
    joints: Sequence[Joint],
    qT: np.ndarray,
    qdT: np.ndarray,
    qddT: np.ndarray,
    gravity: np.ndarray,
    out: np.ndarray | None = None,
    link_columns: Sequence[tuple[np.ndarray, int]] | None = None,
) -> np.ndarray:
    """Inertial regressor: ``Y[s, i, c]`` multiplies a standard parameter of some link j in the
    torque of joint i at sample s (zero unless joint i carries link j: i is j or one of its ancestors).

    Args:
        joints: the chain.
        qT, qdT, qddT: joint states (n, N).
        gravity: (3,) in the base frame.
        out: (N, n, P) destination, zero-initialised; allocated when None.
        link_columns: per link j, ``(local, start)``: which of its 10 parameters to compute
            (indices 0..9, increasing) and the column of ``out`` where they start (they are
            written side by side). Default: all 10 of every link, ``out`` (N, n, 10 n).

    For each joint i <= j, psi_ij (6,) is the motion axis of joint i expressed at the origin of
    frame j (angular part, linear part; zero where joint i does not carry link j); then
    tau_i += psi_ij · A_j theta_j with A_j the link-j wrench regressor. The psi of all i < j are
    carried from the parent frame to frame j by one batched 6x6 motion transform,
    psi' = (E u, E (v + u x p)), and each link costs one batched (j x 6) @ (6 x 10) product. In a
    tree, a joint that does not follow its parent starts from the psi saved at its parent.
    """
    n, N = qT.shape
    fp = forward_pass(joints, qT, qdT, qddT, gravity)
    parents = chain_parents(joints)
    # the joints whose psi a later joint starts from (a child that does not follow its parent)
    branch_points = {int(parents[j]) for j in range(n) if parents[j] != j - 1}
    saved = {}
    if link_columns is None:
        link_columns = [(np.arange(10), 10 * j) for j in range(n)]
    if out is None:
        out = np.zeros((N, n, sum(len(local) for local, _ in link_columns)))
    # buffers reused across links (fresh large allocations cost more than the arithmetic)
    psi, psi_next = np.zeros((N, n, 6)), np.zeros((N, n, 6))
    XT = np.zeros((N, 6, 6))
    F = np.empty((len(_FEATURES), N))
    for j, joint in enumerate(joints):
        k = parents[j]
        if k != j - 1:  # a new branch: the psi of j's ancestors at its parent's frame, zero for the others
            psi[:, :j] = 0.0
            if k >= 0:
                psi[:, : k + 1] = saved[k]
        if k >= 0:
            # psi' (row) = psi (row) @ X^T with X^T = [[E^T, [p]x E^T], [0, E^T]]
            Et = np.ascontiguousarray(fp.E[j].transpose(2, 1, 0))  # (N or 1, 3, 3): E^T per sample
            XT[:, :3, :3] = Et
            XT[:, 3:, 3:] = Et
            p = fp.p[j]
            # a revolute joint's offset is constant: one skew matrix for every sample
            XT[:, :3, 3:] = (_skew(p)[0] if p.shape[1] == 1 else _skew(p)) @ Et
            np.matmul(psi[:, :j], XT, out=psi_next[:, :j])
            psi, psi_next = psi_next, psi
        psi[:, j] = 0.0
        psi[:, j, slice(0, 3) if joint.kind == "revolute" else slice(3, 6)] = joint.axis
        if j in branch_points:
            saved[j] = psi[:, : j + 1].copy()
        local, start = link_columns[j]
        if len(local) == 0:
            continue
        A = _link_wrench_regressor(fp.w[j], fp.dw[j], fp.a[j], F)
        if len(local) < 10:
            A = A[:, :, local]
        np.matmul(psi[:, : j + 1], A, out=out[:, : j + 1, start : start + len(local)])
    return out


def rnea(
    joints: Sequence[Joint],
    inertials: np.ndarray,
    qT: np.ndarray,
    qdT: np.ndarray,
    qddT: np.ndarray,
    gravity: np.ndarray,
) -> np.ndarray:
    """Rigid-body inverse dynamics (n, N) from standard parameters ``inertials`` (n, 10).

    Each link's wrench (force ``F[j]``, moment ``Nm[j]``) is its own plus its children's, carried
    into its frame.
    """
    n, N = qT.shape
    fp = forward_pass(joints, qT, qdT, qddT, gravity)
    parents = chain_parents(joints)
    tau = np.empty((n, N))
    F: list[np.ndarray] = [np.empty(0)] * n
    Nm: list[np.ndarray] = [np.empty(0)] * n
    for j in range(n - 1, -1, -1):
        XX, XY, XZ, YY, YZ, ZZ, MX, MY, MZ, M = inertials[j]
        I = np.array([[XX, XY, XZ], [XY, YY, YZ], [XZ, YZ, ZZ]])[:, :, None]
        mc = np.array([MX, MY, MZ])[:, None]
        w, dw, a = fp.w[j], fp.dw[j], fp.a[j]
        f = M * a + cross(dw, mc) + cross(w, cross(w, mc))
        m = rotate(I, dw) + cross(w, rotate(I, w)) + cross(mc, a)
        for c in np.flatnonzero(parents == j):  # add each child's wrench, carried into frame j
            Ec, pc = fp.E[c], fp.p[c]
            Fc = rotate_transposed(Ec, F[c])
            m = m + rotate_transposed(Ec, Nm[c]) + cross(pc, Fc)
            f = f + Fc
        F[j], Nm[j] = f, m
        ax = joints[j].axis
        tau[j] = ax @ (m if joints[j].kind == "revolute" else f)
    return tau

"""Compiled per-sample kernels behind :mod:`robotid_sim.dynamics.crba` (numba, cached on disk).

Imported lazily by :mod:`robotid_sim.dynamics.crba` the first time a kernel is needed, so that
``import robotid_sim`` never imports numba. Every function here works on one chain packed as
arrays (see :class:`robotid_sim.dynamics.crba.ChainArrays`):

- ``kind`` (n,) int64: 0 revolute, 1 prismatic;
- ``parent`` (n,) int64: the parent joint of each joint, -1 for the base, parent[j] < j (a serial
  chain has parent[j] = j - 1; see :func:`robotid_sim.dynamics.chain.chain_parents`);
- ``axis`` (n, 3): joint axis in the joint frame;
- ``R0`` (n, 3, 3), ``p0`` (n, 3): joint frame at q = 0 in the parent frame;
- ``inert`` (n, 10): standard parameters XX XY XZ YY YZ ZZ MX MY MZ M about each frame origin;
- ``g`` (3,): gravity in the base frame;
- ``rotor`` (n,): added to M's diagonal (zeros for none).

Conventions are those of :mod:`robotid_sim.dynamics.newton_euler`: ``E[j]`` rotates the parent
frame's coordinates into frame j, ``P[j]`` is the origin of frame j in the parent frame, gravity
enters as a base acceleration -g.

**Trees.** The passes run over the joints in order, carrying the motion from joint j - 1 to joint j
in registers as for a serial chain; only where ``parent[j] != j - 1`` (a joint that starts a new
branch) is the parent's motion reloaded from the per-link work arrays, and in the inward passes a
child other than j + 1 hands its wrench to its parent through them. A serial chain thus runs the
same arithmetic as before trees existed, bit for bit.

Nothing assumes the parameters are physically consistent: the composite inertias are summed as
the 10 linear parameters (no mass division, no Cholesky), and the linear solve is an LU with
partial pivoting (M may be indefinite).

Each batch driver exists twice: a serial loop (small N, no thread start-up) and a ``prange`` loop
(large N); :mod:`robotid_sim.dynamics.crba` picks one.

**Regressor** (:func:`regressor_serial`, :func:`regressor_parallel`, behind
:meth:`robotid_sim.dynamics.regressor.RegressorChain.regressor`). Per sample, links j = 0..n-1 are
visited once, outwards: the motion of link j (w, dw, a, as in :func:`_rnea`); the motion axes psi_ij
= (u, v) of the joints i <= j seen at frame j's origin, carried from the parent frame by u' = E_j u,
v' = E_j (v + u x p_j), psi_jj = (axis, 0) for a revolute joint, (0, axis) for a prismatic one,
psi_ij = 0 where joint i does not carry link j (a tree: a joint starting a new branch reloads the
psi saved at its parent); the 36 non-zeros of the 6x10 link wrench regressor A_j
(``newton_euler._wrench_basis``) and Y[i, col(j, k)] = psi_ij · A_j[:, k] for every i <= j, unrolled
over the non-zeros of each column k. ``colmap`` (n, b) int64 holds, for each of the b
standard-parameter slots of joint j (10 inertial, then ``nrot`` = 0 or 1 rotor inertia, then the
friction parameters), its output column, or -1 where it is not computed; the rotor column of joint j
is qdd_j in row j, the friction columns ``fric`` (N, n, k) (computed by the friction model) are
copied into row j. The output may be uninitialised (``np.empty``): each sample's (n, P) block is
zeroed, which brings it into cache, then its non-zeros are written. ``fastmath={"contract"}`` only
fuses a * b + c into FMAs (no reassociation, no finite-math assumptions). Arrays are indexed element
by element: each view handed to a function costs atomic reference-count updates, per sample. Batch
drivers that take blocks of :data:`BLOCK` samples allocate their small work arrays once per block.
The numpy reference the kernels are tested against is
:func:`robotid_sim.dynamics.regressor.reference_regressor`.

All kernels live in this one file on purpose: numba's disk cache checks only the source file of
the function it compiled, so a kernel calling a helper from another file would keep stale code
after the helper changed.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# ----------------------------------------------------------------------------- per sample


@njit(cache=True)
def _kinematics(kind, axis, R0, p0, q, E, P):
    """E (n, 3, 3) and P (n, 3) of one sample at joint positions ``q`` (n,)."""
    n = kind.shape[0]
    for j in range(n):
        ax, ay, az = axis[j, 0], axis[j, 1], axis[j, 2]
        if kind[j] == 0:
            c = np.cos(q[j])
            s = np.sin(q[j])
            t = 1.0 - c
            # Rodrigues: Rot = c I + (1 - c) a aᵀ + s [a]x
            r00 = c + t * ax * ax
            r01 = t * ax * ay - s * az
            r02 = t * ax * az + s * ay
            r10 = t * ay * ax + s * az
            r11 = c + t * ay * ay
            r12 = t * ay * az - s * ax
            r20 = t * az * ax - s * ay
            r21 = t * az * ay + s * ax
            r22 = c + t * az * az
            for a in range(3):
                b0, b1, b2 = R0[j, a, 0], R0[j, a, 1], R0[j, a, 2]
                # R = R0 @ Rot; E = Rᵀ, so E[:, a] = row a of R
                E[j, 0, a] = b0 * r00 + b1 * r10 + b2 * r20
                E[j, 1, a] = b0 * r01 + b1 * r11 + b2 * r21
                E[j, 2, a] = b0 * r02 + b1 * r12 + b2 * r22
                P[j, a] = p0[j, a]
        else:
            for a in range(3):
                for b in range(3):
                    E[j, b, a] = R0[j, a, b]
                P[j, a] = p0[j, a] + (R0[j, a, 0] * ax + R0[j, a, 1] * ay + R0[j, a, 2] * az) * q[j]


@njit(cache=True)
def _rnea(kind, parent, axis, inert, g, E, P, qd, qdd, tau, W, DW, A):
    """Rigid-body torque ``tau`` (n,) of one sample (Newton–Euler); W, DW, A (n, 3) work arrays.

    The outward pass stores each link's motion in W, DW, A; in a tree, the inward pass then reuses
    W[c], DW[c] of a link c that does not follow its parent for the wrench it hands to that parent.

    Over 80 lines: a numba kernel, one compiled pass over the joints per sample, written out so that
    numba keeps every intermediate in registers; split into calls it would be slower, not clearer.
    """
    n = kind.shape[0]
    wx = wy = wz = 0.0
    dx = dy = dz = 0.0
    lx, ly, lz = -g[0], -g[1], -g[2]
    tree = False
    for j in range(n):
        k = parent[j]
        if k != j - 1:  # a new branch: start from the parent's motion (the base's for k = -1)
            tree = True
            if k < 0:
                wx = wy = wz = 0.0
                dx = dy = dz = 0.0
                lx, ly, lz = -g[0], -g[1], -g[2]
            else:
                wx, wy, wz = W[k, 0], W[k, 1], W[k, 2]
                dx, dy, dz = DW[k, 0], DW[k, 1], DW[k, 2]
                lx, ly, lz = A[k, 0], A[k, 1], A[k, 2]
        px, py, pz = P[j, 0], P[j, 1], P[j, 2]
        # acceleration of frame j's origin, parent coordinates: a + dw x p + w x (w x p)
        cx = wy * pz - wz * py
        cy = wz * px - wx * pz
        cz = wx * py - wy * px
        bx = lx + (dy * pz - dz * py) + (wy * cz - wz * cy)
        by = ly + (dz * px - dx * pz) + (wz * cx - wx * cz)
        bz = lz + (dx * py - dy * px) + (wx * cy - wy * cx)
        e = E[j]
        lx = e[0, 0] * bx + e[0, 1] * by + e[0, 2] * bz
        ly = e[1, 0] * bx + e[1, 1] * by + e[1, 2] * bz
        lz = e[2, 0] * bx + e[2, 1] * by + e[2, 2] * bz
        nwx = e[0, 0] * wx + e[0, 1] * wy + e[0, 2] * wz
        nwy = e[1, 0] * wx + e[1, 1] * wy + e[1, 2] * wz
        nwz = e[2, 0] * wx + e[2, 1] * wy + e[2, 2] * wz
        ndx = e[0, 0] * dx + e[0, 1] * dy + e[0, 2] * dz
        ndy = e[1, 0] * dx + e[1, 1] * dy + e[1, 2] * dz
        ndz = e[2, 0] * dx + e[2, 1] * dy + e[2, 2] * dz
        wx, wy, wz, dx, dy, dz = nwx, nwy, nwz, ndx, ndy, ndz
        ax, ay, az = axis[j, 0], axis[j, 1], axis[j, 2]
        if kind[j] == 0:
            jx, jy, jz = ax * qd[j], ay * qd[j], az * qd[j]
            dx += ax * qdd[j] + (wy * jz - wz * jy)
            dy += ay * qdd[j] + (wz * jx - wx * jz)
            dz += az * qdd[j] + (wx * jy - wy * jx)
            wx += jx
            wy += jy
            wz += jz
        else:
            jx, jy, jz = ax * qd[j], ay * qd[j], az * qd[j]
            lx += 2.0 * (wy * jz - wz * jy) + ax * qdd[j]
            ly += 2.0 * (wz * jx - wx * jz) + ay * qdd[j]
            lz += 2.0 * (wx * jy - wy * jx) + az * qdd[j]
        W[j, 0], W[j, 1], W[j, 2] = wx, wy, wz
        DW[j, 0], DW[j, 1], DW[j, 2] = dx, dy, dz
        A[j, 0], A[j, 1], A[j, 2] = lx, ly, lz
    fx = fy = fz = 0.0  # wrench of the subtree of link j + 1, in frame j + 1 (force, moment)
    mx = my = mz = 0.0
    for j in range(n - 1, -1, -1):
        XX, XY, XZ, YY, YZ, ZZ = inert[j, 0], inert[j, 1], inert[j, 2], inert[j, 3], inert[j, 4], inert[j, 5]
        hx, hy, hz, m = inert[j, 6], inert[j, 7], inert[j, 8], inert[j, 9]
        wx, wy, wz = W[j, 0], W[j, 1], W[j, 2]
        dx, dy, dz = DW[j, 0], DW[j, 1], DW[j, 2]
        lx, ly, lz = A[j, 0], A[j, 1], A[j, 2]
        # f = M a + dw x h + w x (w x h)
        cx = wy * hz - wz * hy
        cy = wz * hx - wx * hz
        cz = wx * hy - wy * hx
        gx = m * lx + (dy * hz - dz * hy) + (wy * cz - wz * cy)
        gy = m * ly + (dz * hx - dx * hz) + (wz * cx - wx * cz)
        gz = m * lz + (dx * hy - dy * hx) + (wx * cy - wy * cx)
        # n = I dw + w x (I w) + h x a
        iwx = XX * wx + XY * wy + XZ * wz
        iwy = XY * wx + YY * wy + YZ * wz
        iwz = XZ * wx + YZ * wy + ZZ * wz
        nx = XX * dx + XY * dy + XZ * dz + (wy * iwz - wz * iwy) + (hy * lz - hz * ly)
        ny = XY * dx + YY * dy + YZ * dz + (wz * iwx - wx * iwz) + (hz * lx - hx * lz)
        nz = XZ * dx + YZ * dy + ZZ * dz + (wx * iwy - wy * iwx) + (hx * ly - hy * lx)
        if j + 1 < n and parent[j + 1] == j:  # the child's wrench, carried into frame j: Eᵀ f, Eᵀ n + p x Eᵀ f
            e = E[j + 1]
            px, py, pz = P[j + 1, 0], P[j + 1, 1], P[j + 1, 2]
            cfx = e[0, 0] * fx + e[1, 0] * fy + e[2, 0] * fz
            cfy = e[0, 1] * fx + e[1, 1] * fy + e[2, 1] * fz
            cfz = e[0, 2] * fx + e[1, 2] * fy + e[2, 2] * fz
            nx += e[0, 0] * mx + e[1, 0] * my + e[2, 0] * mz + (py * cfz - pz * cfy)
            ny += e[0, 1] * mx + e[1, 1] * my + e[2, 1] * mz + (pz * cfx - px * cfz)
            nz += e[0, 2] * mx + e[1, 2] * my + e[2, 2] * mz + (px * cfy - py * cfx)
            gx += cfx
            gy += cfy
            gz += cfz
        if tree:  # the other children's wrenches, already carried into frame j (force in W, moment in DW)
            for c in range(j + 2, n):
                if parent[c] == j:
                    gx += W[c, 0]
                    gy += W[c, 1]
                    gz += W[c, 2]
                    nx += DW[c, 0]
                    ny += DW[c, 1]
                    nz += DW[c, 2]
        fx, fy, fz, mx, my, mz = gx, gy, gz, nx, ny, nz
        if kind[j] == 0:
            tau[j] = axis[j, 0] * mx + axis[j, 1] * my + axis[j, 2] * mz
        else:
            tau[j] = axis[j, 0] * fx + axis[j, 1] * fy + axis[j, 2] * fz
        k = parent[j]
        if k >= 0 and k != j - 1:  # hand the wrench, carried into the parent's frame, to the parent
            e = E[j]
            px, py, pz = P[j, 0], P[j, 1], P[j, 2]
            cfx = e[0, 0] * fx + e[1, 0] * fy + e[2, 0] * fz
            cfy = e[0, 1] * fx + e[1, 1] * fy + e[2, 1] * fz
            cfz = e[0, 2] * fx + e[1, 2] * fy + e[2, 2] * fz
            W[j, 0], W[j, 1], W[j, 2] = cfx, cfy, cfz
            DW[j, 0] = e[0, 0] * mx + e[1, 0] * my + e[2, 0] * mz + (py * cfz - pz * cfy)
            DW[j, 1] = e[0, 1] * mx + e[1, 1] * my + e[2, 1] * mz + (pz * cfx - px * cfz)
            DW[j, 2] = e[0, 2] * mx + e[1, 2] * my + e[2, 2] * mz + (px * cfy - py * cfx)


@njit(cache=True)
def _is_tree(parent):
    """Whether ``parent`` (n,) is not a serial chain (some joint not carried by the previous one)."""
    for j in range(parent.shape[0]):
        if parent[j] != j - 1:
            return True
    return False


@njit(cache=True)
def _crba(kind, parent, axis, inert, rotor, E, P, M, C):
    """Mass matrix M (n, n) of one sample (composite rigid bodies); C (n, 10) work array.

    C[j] holds the composite standard parameters of the subtree from link j, about frame j's
    origin, in frame j coordinates. Moving a composite from frame j to its parent frame (rotation
    R = E[j]ᵀ, offset p = P[j]) is linear in its 10 parameters:
    m' = m, h' = R h + m p, I' = R I Rᵀ + (2 p·Rh + m p·p) 1 - Rh pᵀ - p (Rh)ᵀ - m p pᵀ.

    M[i, j] is non-zero only where joint i carries link j or j carries i (zero elsewhere in a tree).

    Over 80 lines: a numba kernel, one compiled pass over the joints per sample, written out so that
    numba keeps every intermediate in registers; split into calls it would be slower, not clearer.
    """
    n = kind.shape[0]
    for j in range(n):
        for k in range(10):
            C[j, k] = inert[j, k]
    tree = _is_tree(parent)
    if tree:
        for i in range(n):
            for j in range(n):
                M[i, j] = 0.0
    for j in range(n - 1, 0, -1):
        i = parent[j] if tree else j - 1
        if i < 0:
            continue
        e = E[j]
        XX, XY, XZ, YY, YZ, ZZ = C[j, 0], C[j, 1], C[j, 2], C[j, 3], C[j, 4], C[j, 5]
        hx, hy, hz, m = C[j, 6], C[j, 7], C[j, 8], C[j, 9]
        # B = I E (I symmetric), then R I Rᵀ = Eᵀ I E = Eᵀ B
        b00 = XX * e[0, 0] + XY * e[1, 0] + XZ * e[2, 0]
        b01 = XX * e[0, 1] + XY * e[1, 1] + XZ * e[2, 1]
        b02 = XX * e[0, 2] + XY * e[1, 2] + XZ * e[2, 2]
        b10 = XY * e[0, 0] + YY * e[1, 0] + YZ * e[2, 0]
        b11 = XY * e[0, 1] + YY * e[1, 1] + YZ * e[2, 1]
        b12 = XY * e[0, 2] + YY * e[1, 2] + YZ * e[2, 2]
        b20 = XZ * e[0, 0] + YZ * e[1, 0] + ZZ * e[2, 0]
        b21 = XZ * e[0, 1] + YZ * e[1, 1] + ZZ * e[2, 1]
        b22 = XZ * e[0, 2] + YZ * e[1, 2] + ZZ * e[2, 2]
        r00 = e[0, 0] * b00 + e[1, 0] * b10 + e[2, 0] * b20
        r01 = e[0, 0] * b01 + e[1, 0] * b11 + e[2, 0] * b21
        r02 = e[0, 0] * b02 + e[1, 0] * b12 + e[2, 0] * b22
        r11 = e[0, 1] * b01 + e[1, 1] * b11 + e[2, 1] * b21
        r12 = e[0, 1] * b02 + e[1, 1] * b12 + e[2, 1] * b22
        r22 = e[0, 2] * b02 + e[1, 2] * b12 + e[2, 2] * b22
        # R h = Eᵀ h
        rx = e[0, 0] * hx + e[1, 0] * hy + e[2, 0] * hz
        ry = e[0, 1] * hx + e[1, 1] * hy + e[2, 1] * hz
        rz = e[0, 2] * hx + e[1, 2] * hy + e[2, 2] * hz
        px, py, pz = P[j, 0], P[j, 1], P[j, 2]
        d = 2.0 * (px * rx + py * ry + pz * rz) + m * (px * px + py * py + pz * pz)
        C[i, 0] += r00 + d - 2.0 * rx * px - m * px * px
        C[i, 1] += r01 - rx * py - px * ry - m * px * py
        C[i, 2] += r02 - rx * pz - px * rz - m * px * pz
        C[i, 3] += r11 + d - 2.0 * ry * py - m * py * py
        C[i, 4] += r12 - ry * pz - py * rz - m * py * pz
        C[i, 5] += r22 + d - 2.0 * rz * pz - m * pz * pz
        C[i, 6] += rx + m * px
        C[i, 7] += ry + m * py
        C[i, 8] += rz + m * pz
        C[i, 9] += m
    for j in range(n):
        ax, ay, az = axis[j, 0], axis[j, 1], axis[j, 2]
        XX, XY, XZ, YY, YZ, ZZ = C[j, 0], C[j, 1], C[j, 2], C[j, 3], C[j, 4], C[j, 5]
        hx, hy, hz, m = C[j, 6], C[j, 7], C[j, 8], C[j, 9]
        # spatial force (n, f) of the composite moved by the unit motion of joint j, frame j
        if kind[j] == 0:  # w = a, v = 0: n = I a, f = a x h
            nx = XX * ax + XY * ay + XZ * az
            ny = XY * ax + YY * ay + YZ * az
            nz = XZ * ax + YZ * ay + ZZ * az
            fx = ay * hz - az * hy
            fy = az * hx - ax * hz
            fz = ax * hy - ay * hx
            M[j, j] = ax * nx + ay * ny + az * nz + rotor[j]
        else:  # w = 0, v = a: n = h x a, f = m a
            nx = hy * az - hz * ay
            ny = hz * ax - hx * az
            nz = hx * ay - hy * ax
            fx, fy, fz = m * ax, m * ay, m * az
            M[j, j] = ax * fx + ay * fy + az * fz + rotor[j]
        i = j
        for _ in range(j):  # carry the force to the parent frame of i: Eᵀ f, Eᵀ n + p x Eᵀ f
            k = parent[i] if tree else i - 1
            if k < 0:
                break
            e = E[i]
            px, py, pz = P[i, 0], P[i, 1], P[i, 2]
            gx = e[0, 0] * fx + e[1, 0] * fy + e[2, 0] * fz
            gy = e[0, 1] * fx + e[1, 1] * fy + e[2, 1] * fz
            gz = e[0, 2] * fx + e[1, 2] * fy + e[2, 2] * fz
            mx = e[0, 0] * nx + e[1, 0] * ny + e[2, 0] * nz + (py * gz - pz * gy)
            my = e[0, 1] * nx + e[1, 1] * ny + e[2, 1] * nz + (pz * gx - px * gz)
            mz = e[0, 2] * nx + e[1, 2] * ny + e[2, 2] * nz + (px * gy - py * gx)
            fx, fy, fz, nx, ny, nz = gx, gy, gz, mx, my, mz
            if kind[k] == 0:
                v = axis[k, 0] * nx + axis[k, 1] * ny + axis[k, 2] * nz
            else:
                v = axis[k, 0] * fx + axis[k, 1] * fy + axis[k, 2] * fz
            M[k, j] = v
            M[j, k] = v
            i = k


@njit(cache=True)
def _solve(M, x):
    """Solve M y = x in place (x <- y) by LU with partial pivoting; M is overwritten.

    Returns False if a pivot is exactly zero (M singular), like LAPACK's getrf.
    """
    n = x.shape[0]
    for k in range(n):
        piv = k
        big = abs(M[k, k])
        for i in range(k + 1, n):
            if abs(M[i, k]) > big:
                big = abs(M[i, k])
                piv = i
        if big == 0.0:
            return False
        if piv != k:
            for c in range(n):
                t = M[k, c]
                M[k, c] = M[piv, c]
                M[piv, c] = t
            t = x[k]
            x[k] = x[piv]
            x[piv] = t
        inv = 1.0 / M[k, k]
        for i in range(k + 1, n):
            f = M[i, k] * inv
            if f != 0.0:
                for c in range(k + 1, n):
                    M[i, c] -= f * M[k, c]
                x[i] -= f * x[k]
    for k in range(n - 1, -1, -1):
        s = x[k]
        for c in range(k + 1, n):
            s -= M[k, c] * x[c]
        x[k] = s / M[k, k]
    return True


# ----------------------------------------------------------------------------- batch drivers


@njit(cache=True)
def _mass_bias_one(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, M, h, want_h):
    n = kind.shape[0]
    E = np.empty((n, 3, 3))
    P = np.empty((n, 3))
    _kinematics(kind, axis, R0, p0, q, E, P)
    C = np.empty((n, 10))
    _crba(kind, parent, axis, inert, rotor, E, P, M, C)
    if want_h:
        W = np.empty((n, 3))
        DW = np.empty((n, 3))
        A = np.empty((n, 3))
        _rnea(kind, parent, axis, inert, g, E, P, qd, np.zeros(n), h, W, DW, A)


@njit(cache=True)
def mass_bias_serial(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, M, h, want_h):
    """M (N, n, n) and, if ``want_h``, h (N, n) for q, qd (N, n); serial loop."""
    for s in range(q.shape[0]):
        _mass_bias_one(kind, parent, axis, R0, p0, inert, g, rotor, q[s], qd[s], M[s], h[s], want_h)


@njit(cache=True, parallel=True)
def mass_bias_parallel(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, M, h, want_h):
    """As :func:`mass_bias_serial`, samples spread over threads."""
    for s in prange(q.shape[0]):
        _mass_bias_one(kind, parent, axis, R0, p0, inert, g, rotor, q[s], qd[s], M[s], h[s], want_h)


#: samples per block of the block-wise batch drivers: their work arrays are allocated once per block
BLOCK = 256


@njit(cache=True)
def _rnea_block(kind, parent, axis, R0, p0, inert, g, q, qd, qdd, tau, start, stop):
    n = kind.shape[0]
    E = np.empty((n, 3, 3))
    P = np.empty((n, 3))
    W = np.empty((n, 3))
    DW = np.empty((n, 3))
    A = np.empty((n, 3))
    for s in range(start, stop):
        _kinematics(kind, axis, R0, p0, q[s], E, P)
        _rnea(kind, parent, axis, inert, g, E, P, qd[s], qdd[s], tau[s], W, DW, A)


@njit(cache=True, nogil=True)
def rnea_serial(kind, parent, axis, R0, p0, inert, g, q, qd, qdd, tau):
    """Rigid-body torque tau (N, n) for q, qd, qdd (N, n); serial loop."""
    _rnea_block(kind, parent, axis, R0, p0, inert, g, q, qd, qdd, tau, 0, q.shape[0])


@njit(cache=True, parallel=True)
def rnea_parallel(kind, parent, axis, R0, p0, inert, g, q, qd, qdd, tau):
    """As :func:`rnea_serial`, blocks of :data:`BLOCK` samples spread over threads."""
    N = q.shape[0]
    for b in prange((N + BLOCK - 1) // BLOCK):
        _rnea_block(kind, parent, axis, R0, p0, inert, g, q, qd, qdd, tau, b * BLOCK, min(N, (b + 1) * BLOCK))


@njit(cache=True)
def _forward_work(n):
    """The work arrays of :func:`_forward_into` for n joints: E (n, 3, 3), P (n, 3), C (n, 10), W, DW, A (n, 3),
    M (n, n), h (n,), zero (n,) all zeros."""
    E, P, C = np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 10))
    W, DW, A = np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 3))
    return E, P, C, W, DW, A, np.empty((n, n)), np.empty(n), np.zeros(n)


@njit(cache=True)
def _forward_into(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, rhs, qdd, work):
    """qdd (n,) solving M qdd = rhs − h of one sample (CRBA, Newton–Euler at zero acceleration, LU) in the work
    arrays ``work`` of :func:`_forward_work` (nothing allocated); False where M is singular."""
    E, P, C, W, DW, A, M, h, zero = work
    _kinematics(kind, axis, R0, p0, q, E, P)
    _crba(kind, parent, axis, inert, rotor, E, P, M, C)
    _rnea(kind, parent, axis, inert, g, E, P, qd, zero, h, W, DW, A)
    for i in range(qdd.shape[0]):
        qdd[i] = rhs[i] - h[i]
    return _solve(M, qdd)


@njit(cache=True)
def _forward_one(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, rhs, qdd):
    """:func:`_forward_into` with its own work arrays (a thread's sample in :func:`forward_parallel`)."""
    return _forward_into(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, rhs, qdd, _forward_work(kind.shape[0]))


@njit(cache=True)
def forward_serial(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, rhs, qdd):
    """qdd (N, n) solving M qdd = rhs - h; returns the first sample with a singular M, or -1. One set of work
    arrays for all samples (as :func:`forward_per_copy`)."""
    work = _forward_work(kind.shape[0])
    bad = -1
    for s in range(q.shape[0]):
        ok = _forward_into(kind, parent, axis, R0, p0, inert, g, rotor, q[s], qd[s], rhs[s], qdd[s], work)
        if not ok and bad < 0:
            bad = s
    return bad


@njit(cache=True, parallel=True)
def forward_parallel(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, rhs, qdd, ok):
    """As :func:`forward_serial`, samples spread over threads; ``ok`` (N,) bool is written."""
    for s in prange(q.shape[0]):
        ok[s] = _forward_one(kind, parent, axis, R0, p0, inert, g, rotor, q[s], qd[s], rhs[s], qdd[s])


@njit(cache=True)
def forward_per_copy(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, rhs, qdd, ok):
    """qdd (B, n) solving M_b qdd_b = rhs_b − h_b for B copies of one chain, each with its own
    parameters ``inert[b]`` (n, 10) and ``rotor[b]`` (n,) (the vector env's parameter draws);
    ``ok`` (B,) is False where M_b is singular. One set of work arrays for all (1.27× faster on 36 copies of a
    9-joint arm than allocating them per copy)."""
    work = _forward_work(kind.shape[0])
    for b in range(q.shape[0]):
        ok[b] = _forward_into(kind, parent, axis, R0, p0, inert[b], g, rotor[b], q[b], qd[b], rhs[b], qdd[b], work)


# ----------------------------------------------------------------------------- env stepping


@njit(cache=True)
def _friction(fkind, fvals, alpha, vs, smoothing, qd, out):
    """Friction torque ``out`` (n,) at ``qd`` (n,): the column laws of :mod:`robotid_sim.dynamics.friction`
    (0 none, 1 coulomb_viscous, 2 nonlinear, 3 stribeck, 4 nonlinear_stribeck, 5 coulomb_viscous_no_offset),
    summed with ``fvals`` (n, k)."""
    for j in range(qd.shape[0]):
        v = qd[j]
        if fkind == 0:
            out[j] = 0.0
            continue
        s = np.tanh(v / smoothing) if smoothing > 0.0 else np.sign(v)
        if fkind == 1:
            out[j] = s * fvals[j, 0] + v * fvals[j, 1] + fvals[j, 2]
        elif fkind == 5:
            out[j] = s * fvals[j, 0] + v * fvals[j, 1]
        elif fkind == 2:
            out[j] = s * fvals[j, 0] + abs(v) ** alpha[j] * s * fvals[j, 1] + fvals[j, 2]
        else:
            e = np.exp(-((v / vs[j]) ** 2))
            t = s * (1.0 - e) * fvals[j, 0] + s * e * fvals[j, 1]
            if fkind == 3:
                out[j] = t + v * fvals[j, 2]
            else:
                out[j] = t + abs(v) ** alpha[j] * s * fvals[j, 2] + fvals[j, 3]


@njit(cache=True)
def friction_per_copy(fkind, fvals, alpha, vs, smoothing, qd, out):
    """Friction torque ``out`` (B, n) of B copies at ``qd`` (B, n), copy b with its values ``fvals[b]`` (n, k):
    the law of :func:`step_per_copy`, for the copies stepped outside it."""
    for b in range(qd.shape[0]):
        _friction(fkind, fvals[b], alpha, vs, smoothing, qd[b], out[b])


@njit(cache=True)
def _step_one(kind, parent, axis, R0, p0, inert, g, rotor, friction, q, qd, tau, dt, substeps, work):
    """``substeps`` semi-implicit Euler steps of one copy, in place; False (state restored) on a singular M
    or a state that stops being finite."""
    fkind, fvals, alpha, vs, smoothing = friction
    E, P, C, W, DW, A, M, h, x, zero, q0, qd0 = work
    n = kind.shape[0]
    for j in range(n):
        q0[j] = q[j]
        qd0[j] = qd[j]
    for _ in range(substeps):
        _kinematics(kind, axis, R0, p0, q, E, P)
        _crba(kind, parent, axis, inert, rotor, E, P, M, C)
        _rnea(kind, parent, axis, inert, g, E, P, qd, zero, h, W, DW, A)
        _friction(fkind, fvals, alpha, vs, smoothing, qd, x)
        for j in range(n):
            x[j] = (tau[j] - x[j]) - h[j]
        fine = _solve(M, x)
        if fine:
            for j in range(n):
                qd[j] = qd[j] + dt * x[j]
            for j in range(n):
                q[j] = q[j] + dt * qd[j]
                fine = fine and np.isfinite(q[j]) and np.isfinite(qd[j])
        if not fine:
            for j in range(n):
                q[j] = q0[j]
                qd[j] = qd0[j]
            return False
    return True


@njit(cache=True)
def step_per_copy(kind, parent, axis, R0, p0, inert, g, rotor, friction, q, qd, tau, dt, substeps, ok, work):
    """One env control step of B copies, in place: ``substeps`` steps of qd <- qd + dt·qdd, q <- q + dt·qd
    (:func:`robotid_sim.dynamics.forward.semi_implicit_euler`), qdd solving M_b qdd = tau_b - friction_b(qd) - h_b
    with each copy's parameters ``inert[b]`` (n, 10), ``rotor[b]`` (n,) and friction values.

    Args:
        friction: ``(fkind, fvals (B, n, k), alpha (n,), vs (n,), smoothing)`` (see :func:`_friction`).
        q, qd: (B, n) state, advanced in place; tau: (B, n) held over the substeps.
        ok: (B,) bool, written: False where M was singular or the state stopped being finite (that copy keeps
            its starting state).
        work: the preallocated work arrays ``(E (n,3,3), P (n,3), C (n,10), W, DW, A (n,3), M (n,n), h, x, zero,
            q0, qd0 (n,))``, ``zero`` all zeros; nothing is allocated here.
    """
    fkind, fvals, alpha, vs, smoothing = friction
    chain = (kind, parent, axis, R0, p0)
    for b in range(q.shape[0]):
        law = (fkind, fvals[b], alpha, vs, smoothing)
        ok[b] = _step_one(*chain, inert[b], g, rotor[b], law, q[b], qd[b], tau[b], dt, substeps, work)


# ----------------------------------------------------------------------------- regressor

_FASTMATH = {"contract"}


@njit(cache=True, fastmath=_FASTMATH)
def _regressor_block(kind, parent, axis, R0, p0, g, q, qd, qdd, fric, colmap, nrot, out, start, stop, work):
    """Regressor blocks ``out[s]`` (n, P) of the samples ``start <= s < stop``.

    ``work`` = (E (n, 3, 3), P (n, 3), PSI (n, 6), MOTION (n, 9), SAVED (n, n, 6)) work arrays:
    PSI[i] = psi_ij of the current link j; in a tree, MOTION[k] (w, dw, a) and SAVED[k] (the psi of
    the joints i <= k) of a link k that a later joint starts a new branch from.

    Over 80 lines: a numba kernel, one compiled pass over the joints per sample, written out so that
    numba keeps every intermediate in registers; split into calls it would be slower, not clearer.
    """
    E, P, PSI, MOTION, SAVED = work
    n = kind.shape[0]
    ncol = out.shape[2]
    nfric = fric.shape[2]
    saves = np.zeros(n, dtype=np.bool_)  # the links a later joint starts a new branch from
    for j in range(n):
        if parent[j] >= 0 and parent[j] != j - 1:
            saves[parent[j]] = True
    for s in range(start, stop):
        _kinematics(kind, axis, R0, p0, q[s], E, P)
        for i in range(n):
            for c in range(ncol):
                out[s, i, c] = 0.0
        wx = wy = wz = 0.0
        dx = dy = dz = 0.0
        lx, ly, lz = -g[0], -g[1], -g[2]
        for j in range(n):
            k = parent[j]
            if k != j - 1:  # a new branch: the parent's motion and psi (the base's, none, for k = -1)
                if k < 0:
                    wx = wy = wz = 0.0
                    dx = dy = dz = 0.0
                    lx, ly, lz = -g[0], -g[1], -g[2]
                else:
                    wx, wy, wz = MOTION[k, 0], MOTION[k, 1], MOTION[k, 2]
                    dx, dy, dz = MOTION[k, 3], MOTION[k, 4], MOTION[k, 5]
                    lx, ly, lz = MOTION[k, 6], MOTION[k, 7], MOTION[k, 8]
                for i in range(j):
                    for c in range(6):
                        PSI[i, c] = SAVED[k, i, c] if i <= k else 0.0
            px, py, pz = P[j, 0], P[j, 1], P[j, 2]
            e00, e01, e02 = E[j, 0, 0], E[j, 0, 1], E[j, 0, 2]
            e10, e11, e12 = E[j, 1, 0], E[j, 1, 1], E[j, 1, 2]
            e20, e21, e22 = E[j, 2, 0], E[j, 2, 1], E[j, 2, 2]
            # ---------------------------------------- motion of link j, in frame j (as _rnea)
            # acceleration of frame j's origin, parent coordinates: a + dw x p + w x (w x p)
            cx = wy * pz - wz * py
            cy = wz * px - wx * pz
            cz = wx * py - wy * px
            bx = lx + (dy * pz - dz * py) + (wy * cz - wz * cy)
            by = ly + (dz * px - dx * pz) + (wz * cx - wx * cz)
            bz = lz + (dx * py - dy * px) + (wx * cy - wy * cx)
            lx = e00 * bx + e01 * by + e02 * bz
            ly = e10 * bx + e11 * by + e12 * bz
            lz = e20 * bx + e21 * by + e22 * bz
            nwx = e00 * wx + e01 * wy + e02 * wz
            nwy = e10 * wx + e11 * wy + e12 * wz
            nwz = e20 * wx + e21 * wy + e22 * wz
            ndx = e00 * dx + e01 * dy + e02 * dz
            ndy = e10 * dx + e11 * dy + e12 * dz
            ndz = e20 * dx + e21 * dy + e22 * dz
            wx, wy, wz, dx, dy, dz = nwx, nwy, nwz, ndx, ndy, ndz
            ax, ay, az = axis[j, 0], axis[j, 1], axis[j, 2]
            qdj, qddj = qd[s, j], qdd[s, j]
            jx, jy, jz = ax * qdj, ay * qdj, az * qdj
            if kind[j] == 0:
                dx += ax * qddj + (wy * jz - wz * jy)
                dy += ay * qddj + (wz * jx - wx * jz)
                dz += az * qddj + (wx * jy - wy * jx)
                wx += jx
                wy += jy
                wz += jz
            else:
                lx += 2.0 * (wy * jz - wz * jy) + ax * qddj
                ly += 2.0 * (wz * jx - wx * jz) + ay * qddj
                lz += 2.0 * (wx * jy - wy * jx) + az * qddj
            # ---------------------------------------- motion axes of the joints i < j, into frame j
            for i in range(j):
                ux, uy, uz = PSI[i, 0], PSI[i, 1], PSI[i, 2]
                vx = PSI[i, 3] + (uy * pz - uz * py)  # v + u x p
                vy = PSI[i, 4] + (uz * px - ux * pz)
                vz = PSI[i, 5] + (ux * py - uy * px)
                PSI[i, 0] = e00 * ux + e01 * uy + e02 * uz
                PSI[i, 1] = e10 * ux + e11 * uy + e12 * uz
                PSI[i, 2] = e20 * ux + e21 * uy + e22 * uz
                PSI[i, 3] = e00 * vx + e01 * vy + e02 * vz
                PSI[i, 4] = e10 * vx + e11 * vy + e12 * vz
                PSI[i, 5] = e20 * vx + e21 * vy + e22 * vz
            if kind[j] == 0:
                PSI[j, 0], PSI[j, 1], PSI[j, 2] = ax, ay, az
                PSI[j, 3] = PSI[j, 4] = PSI[j, 5] = 0.0
            else:
                PSI[j, 0] = PSI[j, 1] = PSI[j, 2] = 0.0
                PSI[j, 3], PSI[j, 4], PSI[j, 5] = ax, ay, az
            if saves[j]:
                MOTION[j, 0], MOTION[j, 1], MOTION[j, 2] = wx, wy, wz
                MOTION[j, 3], MOTION[j, 4], MOTION[j, 5] = dx, dy, dz
                MOTION[j, 6], MOTION[j, 7], MOTION[j, 8] = lx, ly, lz
                for i in range(j + 1):
                    for c in range(6):
                        SAVED[j, i, c] = PSI[i, c]
            # ---------------------------------------- rotor inertia and friction: row j only
            if nrot:
                c = colmap[j, 10]
                if c >= 0:
                    out[s, j, c] = qddj
            for k in range(nfric):
                c = colmap[j, 10 + nrot + k]
                if c >= 0:
                    out[s, j, c] = fric[s, j, k]
            # ---------------------------------------- link wrench regressor A_j: 36 non-zeros
            c0, c1, c2, c3, c4 = colmap[j, 0], colmap[j, 1], colmap[j, 2], colmap[j, 3], colmap[j, 4]
            c5, c6, c7, c8, c9 = colmap[j, 5], colmap[j, 6], colmap[j, 7], colmap[j, 8], colmap[j, 9]
            inertia = c0 >= 0 or c1 >= 0 or c2 >= 0 or c3 >= 0 or c4 >= 0 or c5 >= 0
            moment = c6 >= 0 or c7 >= 0 or c8 >= 0
            if not (inertia or moment or c9 >= 0):
                continue
            xx, yy, zz = wx * wx, wy * wy, wz * wz
            xy, xz, yz = wx * wy, wx * wz, wy * wz
            # a<r><k>: row r (moment x y z, force x y z), column k (XX XY XZ YY YZ ZZ MX MY MZ M);
            # column 9 (M) is (0, a), so its entries are lx, ly, lz themselves
            a00, a01, a02, a03, a04, a05 = dx, dy - xz, dz + xy, -yz, yy - zz, yz
            a10, a11, a12, a13, a14, a15 = xz, dx + yz, zz - xx, dy, dz - xy, -xz
            a20, a21, a22, a23, a24, a25 = -xy, xx - yy, dx - yz, xy, dy + xz, dz
            a07, a08, a16, a18, a26, a27 = lz, -ly, -lz, lx, ly, -lx
            a36, a37, a38 = -yy - zz, xy - dz, dy + xz
            a46, a47, a48 = dz + xy, -xx - zz, yz - dx
            a56, a57, a58 = xz - dy, dx + yz, -xx - yy
            for i in range(j + 1):
                ux, uy, uz = PSI[i, 0], PSI[i, 1], PSI[i, 2]
                vx, vy, vz = PSI[i, 3], PSI[i, 4], PSI[i, 5]
                if inertia:
                    if c0 >= 0:
                        out[s, i, c0] = ux * a00 + uy * a10 + uz * a20
                    if c1 >= 0:
                        out[s, i, c1] = ux * a01 + uy * a11 + uz * a21
                    if c2 >= 0:
                        out[s, i, c2] = ux * a02 + uy * a12 + uz * a22
                    if c3 >= 0:
                        out[s, i, c3] = ux * a03 + uy * a13 + uz * a23
                    if c4 >= 0:
                        out[s, i, c4] = ux * a04 + uy * a14 + uz * a24
                    if c5 >= 0:
                        out[s, i, c5] = ux * a05 + uy * a15 + uz * a25
                if moment:
                    if c6 >= 0:
                        out[s, i, c6] = uy * a16 + uz * a26 + vx * a36 + vy * a46 + vz * a56
                    if c7 >= 0:
                        out[s, i, c7] = ux * a07 + uz * a27 + vx * a37 + vy * a47 + vz * a57
                    if c8 >= 0:
                        out[s, i, c8] = ux * a08 + uy * a18 + vx * a38 + vy * a48 + vz * a58
                if c9 >= 0:
                    out[s, i, c9] = vx * lx + vy * ly + vz * lz


@njit(cache=True)
def _regressor_work(n):
    """The work arrays of :func:`_regressor_block` for an n-joint chain."""
    return np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 6)), np.empty((n, 9)), np.empty((n, n, 6))


@njit(cache=True, nogil=True)
def regressor_serial(kind, parent, axis, R0, p0, g, q, qd, qdd, fric, colmap, nrot, out):
    """Regressor ``out`` (N, n, P) for q, qd, qdd (N, n) and the friction columns ``fric``
    (N, n, k), columns chosen by ``colmap`` (n, b); serial loop."""
    work = _regressor_work(kind.shape[0])
    _regressor_block(kind, parent, axis, R0, p0, g, q, qd, qdd, fric, colmap, nrot, out, 0, q.shape[0], work)


@njit(cache=True, parallel=True)
def regressor_parallel(kind, parent, axis, R0, p0, g, q, qd, qdd, fric, colmap, nrot, out):
    """As :func:`regressor_serial`, blocks of :data:`BLOCK` samples spread over threads."""
    n = kind.shape[0]
    N = q.shape[0]
    for block in prange((N + BLOCK - 1) // BLOCK):
        work = _regressor_work(n)
        start = block * BLOCK
        stop = min(N, start + BLOCK)
        _regressor_block(kind, parent, axis, R0, p0, g, q, qd, qdd, fric, colmap, nrot, out, start, stop, work)

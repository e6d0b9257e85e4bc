"""The process model of a kinematic chain, compiled: what the filters evaluate at every sample, in numba.

The chain's base regressor, forward dynamics and their Jacobian, evaluated inside compiled loops with no
Python call per sample. Symbols as in :mod:`robotid_sim_plugins.ekf.process`.

Two evaluations of the same model, both exact:

- the base regressor Y(q, qd, qdd) (n, b): the chain's compiled Newton–Euler regressor
  (:func:`robotid_sim.dynamics.crba_kernels.regressor_serial`) on the independent columns, its friction
  columns from the compiled friction law with unit values. The EKF's linearisation uses it, as the Python
  path does (:meth:`~robotid_sim_plugins.ekf.process.EulerProcessModel.linearize`).
- the forward dynamics of many states at once (sigma points, particles): the base parameters λ put on their
  standard columns (the others zero: Y_full θ̃ = Y λ, the base regressor being the independent columns of the
  full one), then the per-copy CRBA + RNEA + LU of :func:`robotid_sim.dynamics.crba_kernels.forward_per_copy`
  with the friction of :func:`~robotid_sim.dynamics.crba_kernels.friction_per_copy`: a few µs per state instead
  of n + 1 regressor evaluations.

:meth:`CompiledChain.from_problem` builds one only where it reproduces the problem's own base regressor
(a serial or tree chain with a friction law the kernels know); other models run the Python path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np
from robotid_sim_plugins.ekf.process import TINY
from robotid_sim_plugins.ekf.sigma_kernel import lambda_points, packed_basis, sigma_states

from robotid_sim.dynamics import crba
from robotid_sim.dynamics.crba_kernels import (
    forward_per_copy,
    friction_per_copy,
    mass_bias_serial,
    regressor_serial,
    rnea_serial,
)
from robotid_sim.dynamics.regressor import RegressorChain
from robotid_sim.envs.dynamics import FRICTION_CODES

#: the compiled base regressor must match the problem's on a few states to this relative tolerance
PARITY_TOLERANCE = 1e-10


@dataclass(frozen=True)
class CompiledChain:
    """The arrays the kernels take, as one tuple ``arrays`` (passed to every kernel of this module).

    Attributes:
        arrays: ``(kind, parent, axis, R0, p0, gravity, colmap, nrot, fkind, alpha, vs, smoothing, unit,
            standard)``: the chain, the (n, block) map of each standard parameter to its base column (−1: not a
            base column), whether rotor inertia is modelled, the friction law (code, α, vs, sign smoothing),
            ``unit`` (k, n, k) the unit friction values giving the friction columns, ``standard`` (b,) the
            standard column of each base parameter.
        n: joints.
        b: base parameters.
    """

    arrays: tuple
    n: int
    b: int

    @classmethod
    def from_problem(cls, problem) -> CompiledChain | None:
        """The compiled model of ``problem`` (an :class:`~robotid_sim.identification.IdentificationProblem`), or
        None where its structure is no compiled chain or the result would not be its base regressor."""
        structure, base = problem.structure, problem.base
        friction = getattr(structure, "friction", None)
        if not isinstance(structure, RegressorChain) or crba.kernels() is None or type(friction) not in FRICTION_CODES:
            return None
        n, block = structure.n_dof, structure.parameter_block
        independent = np.asarray(base.independent, dtype=np.int64)
        colmap = np.full(n * block, -1, dtype=np.int64)
        colmap[independent] = np.arange(independent.size)
        k = len(friction.suffixes)
        unit = np.zeros((k, n, k))
        for c in range(k):
            unit[c, :, c] = 1.0
        ones = np.ones(n)
        arrays = (
            *crba.pack_chain(structure.joints).kernel_arrays,
            np.ascontiguousarray(structure.gravity, dtype=float),
            colmap.reshape(n, block),
            int(structure.has_rotor_inertia),
            FRICTION_CODES[type(friction)],
            np.ascontiguousarray(np.broadcast_to(getattr(friction, "alpha", ones), (n,)), dtype=float),
            np.ascontiguousarray(np.broadcast_to(getattr(friction, "vs", ones), (n,)), dtype=float),
            float(friction.sign_smoothing),
            unit,
            independent,
        )
        chain = cls(arrays, n, independent.size)
        rng = np.random.default_rng(0)
        states = structure.random_states(rng, 3)
        expected = base.regressor(*states)
        got = np.empty_like(expected)
        base_regressor(arrays, *(np.ascontiguousarray(s) for s in states), got)
        if not np.allclose(got, expected, rtol=PARITY_TOLERANCE, atol=PARITY_TOLERANCE * np.abs(expected).max()):
            return None
        # the forward dynamics (CRBA and RNEA with λ on its standard columns) solve the regressor's model
        x = np.concatenate([states[0][0], states[1][0], rng.uniform(0.5, 1.5, chain.b)])
        qdd, M, Minv = np.empty(n), np.empty((n, n)), np.empty((n, n))
        if not forward_one(arrays, x, np.ones(n), qdd, M, Minv):
            return None
        lam = x[2 * n :]
        Y = base.regressor(
            np.repeat(states[0][:1], n + 2, 0),
            np.repeat(states[1][:1], n + 2, 0),
            np.vstack([qdd, np.eye(n + 1, n, -1)]),
        )
        expected = np.vstack([[np.ones(n)], (Y[2:] @ lam).T - (Y[1] @ lam)[:, None]])  # τ at qdd, then M's columns
        got = np.vstack([[Y[0] @ lam], M])
        if not np.allclose(got, expected, rtol=1e-8, atol=1e-8 * np.abs(expected).max()):
            return None
        return chain


@numba.njit(cache=True)
def base_regressor(chain, q, qd, qdd, out):  # pragma: no cover - compiled
    """Base regressor ``out`` (N, n, b) at q, qd, qdd (N, n) of the chain ``arrays`` (:class:`CompiledChain`)."""
    kind, parent, axis, R0, p0, g, colmap, nrot, fkind, alpha, vs, smoothing, unit, _ = chain
    N, n = q.shape
    k = unit.shape[0]
    fric = np.zeros((N, n, k))
    if k:
        speeds = np.empty((k, n))
        cols = np.empty((k, n))
        for s in range(N):
            for c in range(k):
                speeds[c] = qd[s]
            friction_per_copy(fkind, unit, alpha, vs, smoothing, speeds, cols)
            for j in range(n):
                for c in range(k):
                    fric[s, j, c] = cols[c, j]
    regressor_serial(kind, parent, axis, R0, p0, g, q, qd, qdd, fric, colmap, nrot, out)


@numba.njit(cache=True)
def _on_standard_columns(chain, lam, inert, rotor, fvals):  # pragma: no cover - compiled
    """λ (b,) put on its standard columns (the others zero): the link inertias ``inert`` (n, 10), rotor
    inertias ``rotor`` (n,) and friction values ``fvals`` (C, n, k), the same for each of the C copies."""
    colmap, nrot, standard = chain[6], chain[7], chain[13]
    block = colmap.shape[1]
    inert[:] = 0.0
    rotor[:] = 0.0
    fvals[:] = 0.0
    for c in range(standard.shape[0]):
        j, e = divmod(standard[c], block)
        if e < 10:
            inert[j, e] = lam[c]
        elif e < 10 + nrot:
            rotor[j] = lam[c]
        else:
            for s in range(fvals.shape[0]):
                fvals[s, j, e - 10 - nrot] = lam[c]


@numba.njit(cache=True)
def forward_one(chain, x, tau, qdd, M, Minv):  # pragma: no cover - compiled
    """The forward dynamics at state x (d,) with torque τ (n,): writes M(q, λ) (n, n), M⁻¹ and qdd = M⁻¹ (τ − h)
    (n,), from one CRBA and RNEA (λ on its standard columns, module docstring) and the friction law; False where
    M is singular or its inverse not finite."""
    kind, parent, axis, R0, p0, g, colmap, nrot, fkind, alpha, vs, smoothing, unit, standard = chain
    n = tau.shape[0]
    k = unit.shape[0]
    inert, rotor, fvals = np.empty((n, 10)), np.empty(n), np.empty((1, n, k))
    _on_standard_columns(chain, x[2 * n :], inert, rotor, fvals)
    q = np.empty((1, n))
    qd = np.empty((1, n))
    q[0] = x[:n]
    qd[0] = x[n : 2 * n]
    Ms = np.empty((1, n, n))
    h = np.empty((1, n))
    mass_bias_serial(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, Ms, h, True)
    friction = np.zeros((1, n))
    if k:
        friction_per_copy(fkind, fvals, alpha, vs, smoothing, qd, friction)
    M[:] = Ms[0]
    try:
        Minv[:] = np.linalg.inv(M)
    except Exception:  # noqa: BLE001 - numba catches no narrower class: an exactly singular M
        return False
    if not np.all(np.isfinite(Minv)):
        return False
    qdd[:] = Minv @ (tau - h[0] - friction[0])
    return True


@numba.njit(cache=True)
def acceleration_jacobian(chain, x, qdd, Minv, A):  # pragma: no cover - compiled
    """A = ∂qdd/∂x = −M⁻¹ [∂τ/∂q, ∂τ/∂qd, Y(q, qd, qdd)] (n, d) at state x (d,) with acceleration qdd (n,):
    ∂τ/∂q and ∂τ/∂qd at fixed qdd by forward differences (steps 1e-6·max(1, |·|), a velocity's away from zero and
    from +0 at zero, :data:`~robotid_sim_plugins.ekf.process.TINY`: no difference crosses Coulomb's sign) of the
    inverse dynamics (one batched RNEA; the friction law at x's velocities and at each joint's stepped one, a
    joint's friction depending on its own velocity only; the rotor term does not depend on q, qd), Y from one
    regressor evaluation."""
    kind, parent, axis, R0, p0, g, colmap, nrot, fkind, alpha, vs, smoothing, unit, standard = chain
    n = qdd.shape[0]
    b = x.shape[0] - 2 * n
    k = unit.shape[0]
    r = 2 * n + 1
    inert, rotor, fvals = np.empty((n, 10)), np.empty(n), np.empty((2, n, k))
    _on_standard_columns(chain, x[2 * n :], inert, rotor, fvals)
    eps = np.empty(2 * n)
    Q = np.empty((r, n))
    QD = np.empty((r, n))
    ACC = np.empty((r, n))
    for s in range(r):
        Q[s] = x[:n]
        QD[s] = x[n : 2 * n]
        ACC[s] = qdd
    for i in range(n):
        eps[i] = 1e-6 * max(1.0, abs(x[i]))
        # the velocity's step away from zero, from +0 at zero: never across Coulomb's sign (its jump is no slope)
        eps[n + i] = math.copysign(1e-6 * max(1.0, abs(x[n + i])), x[n + i])
        if x[n + i] == 0.0:
            for s in range(r):
                QD[s, i] = TINY
        Q[1 + i, i] += eps[i]
        QD[n + 1 + i, i] += eps[n + i]
    tq = np.empty((r, n))
    rnea_serial(kind, parent, axis, R0, p0, inert, g, Q, QD, ACC, tq)
    if k:  # a joint's friction depends on its own velocity only: at x's and at each joint's stepped velocity
        speeds, friction = np.empty((2, n)), np.empty((2, n))
        speeds[0] = QD[0]
        for i in range(n):
            speeds[1, i] = QD[n + 1 + i, i]
        friction_per_copy(fkind, fvals, alpha, vs, smoothing, speeds, friction)
        for s in range(r):
            for i in range(n):
                tq[s, i] += friction[1 if s == n + 1 + i else 0, i]
    J = np.empty((n, 2 * n + b))
    for i in range(n):
        for s in range(2 * n):
            J[i, s] = (tq[s + 1, i] - tq[0, i]) / eps[s]
    Y = np.empty((1, n, b))
    base_regressor(chain, Q[:1], QD[:1], ACC[:1], Y)
    J[:, 2 * n :] = Y[0]
    A[:] = -(Minv @ J)


@numba.njit(cache=True)
def linearize(chain, x, tau, qdd, Minv, A):  # pragma: no cover - compiled
    """The forward dynamics and their Jacobian at state x (d,) with torque τ (n,), as
    :meth:`~robotid_sim_plugins.ekf.process.EulerProcessModel.linearize` computes them (:func:`forward_one`,
    :func:`acceleration_jacobian`): writes qdd (n,), M⁻¹ (n, n) and A = ∂qdd/∂x (n, d); False where M(q, λ) is
    singular or its inverse not finite."""
    n = tau.shape[0]
    M = np.empty((n, n))
    if not forward_one(chain, x, tau, qdd, M, Minv):
        return False
    acceleration_jacobian(chain, x, qdd, Minv, A)
    return True


@numba.njit(cache=True)
def forward_batch(chain, X, tau, qdd, ok):  # pragma: no cover - compiled
    """Forward dynamics qdd (S, n) of S states X (S, d) = [q, qd, λ] with torques τ (S, n); ``ok`` (S,) False
    where M(q, λ) is singular. λ goes on its standard columns (module docstring)."""
    kind, parent, axis, R0, p0, g, colmap, nrot, fkind, alpha, vs, smoothing, unit, standard = chain
    S, n = tau.shape
    block = colmap.shape[1]
    k = unit.shape[0]
    inert = np.zeros((S, n, 10))
    rotor = np.zeros((S, n))
    fvals = np.zeros((S, n, k))
    for c in range(standard.shape[0]):
        j, e = divmod(standard[c], block)
        for s in range(S):
            v = X[s, 2 * n + c]
            if e < 10:
                inert[s, j, e] = v
            elif e < 10 + nrot:
                rotor[s, j] = v
            else:
                fvals[s, j, e - 10 - nrot] = v
    q = np.ascontiguousarray(X[:, :n])
    qd = np.ascontiguousarray(X[:, n : 2 * n])
    friction = np.zeros((S, n))
    if k:
        friction_per_copy(fkind, fvals, alpha, vs, smoothing, qd, friction)
    rhs = np.empty((S, n))
    for s in range(S):
        for j in range(n):
            rhs[s, j] = tau[s, j] - friction[s, j]
    forward_per_copy(kind, parent, axis, R0, p0, inert, g, rotor, q, qd, rhs, qdd, ok)


@numba.njit(cache=True)
def sigma_dynamics(chain, x, L, gamma, tau, states, qdd, Minv):  # pragma: no cover - compiled
    """The dynamics of the sigma points x, x + γ·Lₖ, x − γ·Lₖ (Lₖ the columns of the lower-triangular L (d, d))
    with torque τ (n,), as :meth:`~robotid_sim_plugins.ekf.process.EulerProcessModel.sigma_dynamics` computes
    them, in one call: fills ``states`` (2d + 1, 2n) the points' [q, qd], ``qdd`` (2d + 1, n) their forward
    dynamics and ``Minv`` (n, n) M⁻¹ at x. The 4n points that move q or qd by :func:`forward_batch`; the others
    from the basis of x's q, qd (:func:`~robotid_sim_plugins.ekf.sigma_kernel.packed_basis`), each column's
    change γ·Σⱼ L[2n + j, 2n + k]·basisⱼ (L's λ block is lower-triangular, its upper triangle zero) and
    :func:`~robotid_sim_plugins.ekf.sigma_kernel.lambda_points`. False where M(q, λ) is singular at a point."""
    d, n = x.shape[0], tau.shape[0]
    n2 = 2 * n
    b = d - n2
    moving, moved = np.empty((2 * n2, d)), np.empty((2 * n2, n))
    sigma_states(x, L, gamma, n, states, moving)
    taus = np.empty((2 * n2, n))
    for s in range(2 * n2):
        taus[s] = tau
    ok = np.empty(2 * n2, dtype=np.bool_)
    forward_batch(chain, moving, taus, moved, ok)
    if not (ok.all() and np.isfinite(moved).all()):
        return False
    qdd[1 : n2 + 1] = moved[:n2]
    qdd[d + 1 : d + n2 + 1] = moved[n2:]
    q, qd, acc = np.empty((n + 1, n)), np.empty((n + 1, n)), np.zeros((n + 1, n))
    for s in range(n + 1):
        q[s] = x[:n]
        qd[s] = x[n:n2]
    for j in range(n):
        acc[1 + j, j] = 1.0  # the regressor at zero, then unit accelerations: M's columns and h
    Y = np.empty((n + 1, n, b))
    base_regressor(chain, q, qd, acc, Y)
    T = n * (n + 3) // 2
    basis, mean = np.empty((T, b)), np.empty(T)
    packed_basis(Y, x[n2:], basis, mean)
    # (b, T): γ·(L's λ block)ᵀ @ basisᵀ, one BLAS product (the block's zeros above the diagonal included: twice
    # the triangular product's flops, at several times its speed in a compiled loop)
    change = np.dot(np.ascontiguousarray(L[n2:, n2:].T), np.ascontiguousarray(basis.T))
    change *= gamma
    return lambda_points(mean, change.T, tau, qdd[0], qdd[n2 + 1 : d + 1], qdd[d + n2 + 1 :], Minv)

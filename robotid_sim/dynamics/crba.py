"""Fast rigid-body dynamics from standard parameters: CRBA mass matrix, RNEA bias, forward dynamics.

The joint-space mass matrix comes from the composite-rigid-body algorithm (CRBA), the bias and
inverse dynamics from the recursive Newton–Euler algorithm (RNEA), the forward dynamics from
both and an LU solve, all per sample in compiled numba kernels (``@njit(cache=True)``, compiled
once and cached on disk; serial for small batches, threaded over samples for large ones). numba
is imported the first time a kernel runs, never by ``import robotid_sim``. Without numba the
functions fall back to batched numpy (the Newton–Euler recursion of
:mod:`robotid_sim.dynamics.newton_euler`; exact, much slower at small N).

Everything is linear-algebraic in the 10 standard parameters of each link
(XX XY XZ YY YZ ZZ MX MY MZ M about the link frame origin, SPEC §4): physically inconsistent
parameters (negative masses, indefinite inertias, as identified models may give) are fine, only
an exactly singular M makes :func:`forward_dynamics` fail.

Rigid body only: friction, which lives in Python model objects, is the caller's to add
(:class:`robotid_sim.robot.model.Robot` does). Rotor inertia is an optional diagonal added to M.

Functions (q, qd, qdd, tau are (N, n), or (n,) for one sample; ``joints`` is a sequence of
:class:`~robotid_sim.dynamics.chain.Joint`, whose ``inertial`` fields are ignored, or
:func:`pack_chain` of one; ``inertials`` is (n, 10)):

- :func:`mass_matrix_and_bias` ``(joints, inertials, gravity, q, qd, rotor_inertia=None) -> (M, h)``
- :func:`mass_matrix` ``(joints, inertials, q, rotor_inertia=None) -> M``
- :func:`inverse_dynamics` ``(joints, inertials, gravity, q, qd, qdd) -> tau`` (rigid body)
- :func:`forward_dynamics` ``(joints, inertials, gravity, q, qd, tau, rotor_inertia=None) -> qdd``

A model holding a full standard vector ``theta`` of a robot (e.g. the base values put at
``base.independent``, zeros elsewhere) can use them without a ``robot.with_parameters(theta)``
copy::

    from robotid_sim.dynamics import crba

    sl = robot.parameter_slices()
    inertials = theta[sl["inertial"]].reshape(robot.n_dof, 10)
    rotor = theta[sl["rotor"]] if len(sl["rotor"]) else None
    friction = np.einsum("nik,ik->ni", robot.friction.columns(qd), theta[sl["friction"]].reshape(robot.n_dof, -1))
    qdd = crba.forward_dynamics(robot.joints, inertials, robot.gravity, q, qd, tau - friction, rotor)
    M, h = crba.mass_matrix_and_bias(robot.joints, inertials, robot.gravity, q, qd, rotor)  # h without friction

Threads: batches of :data:`PARALLEL_MIN_SAMPLES` samples or more run on numba's thread pool
(``prange``; ``NUMBA_NUM_THREADS`` sets its size) where it has more than one thread
(:func:`threaded`); smaller ones, and N = 1, run serially with no thread start-up. With the GNU
OpenMP threading layer a process that forks after a threaded call must not make threaded calls in
the child: set ``PARALLEL_MIN_SAMPLES`` to ``sys.maxsize`` where that matters. The first call in a
fresh install compiles the kernels (about 5 s for the serial ones, 5 s more for the threaded ones
on a 2-core machine); later processes load them from numba's cache (``__pycache__`` next to the
kernels, or ``NUMBA_CACHE_DIR``) in well under a second.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from robotid_sim.dynamics.chain import Joint, chain_parents
from robotid_sim.errors import DataError, ModelError

#: batches of at least this many samples use the threaded (prange) kernels (:func:`threaded`)
PARALLEL_MIN_SAMPLES = 2048


def threaded(N: int) -> bool:
    """Whether a batch of N samples runs on the threaded kernels: from :data:`PARALLEL_MIN_SAMPLES` on, where
    numba's thread pool has more than one thread. With one (``NUMBA_NUM_THREADS=1``, as in each of a sweep's
    workers and the test suite's) a threaded kernel is the serial one plus its scheduling, and its first
    compilation costs as much again."""
    if N < PARALLEL_MIN_SAMPLES:
        return False
    import numba

    return numba.get_num_threads() > 1


@dataclass(frozen=True)
class ChainArrays:
    """A kinematic chain packed as contiguous arrays for the kernels.

    Attributes:
        kind: (n,) int64, 0 revolute, 1 prismatic.
        parent: (n,) int64, the parent joint of each joint, -1 for the base
            (:func:`~robotid_sim.dynamics.chain.chain_parents`).
        axis: (n, 3) joint axes in the joint frames.
        origin_rotation: (n, 3, 3) joint frames at q = 0 in their parent frames.
        origin_translation: (n, 3) joint frame origins in their parent frames.
        joints: the joints it was packed from (for the numpy fallback).
    """

    kind: np.ndarray
    parent: np.ndarray
    axis: np.ndarray
    origin_rotation: np.ndarray
    origin_translation: np.ndarray
    joints: tuple[Joint, ...]

    @property
    def n_dof(self) -> int:
        return len(self.kind)

    @property
    def kernel_arrays(self) -> tuple[np.ndarray, ...]:
        """``(kind, parent, axis, origin_rotation, origin_translation)``: the chain arguments every kernel
        of :mod:`robotid_sim.dynamics.crba_kernels` starts with."""
        return self.kind, self.parent, self.axis, self.origin_rotation, self.origin_translation


class SingularMassMatrixError(DataError, np.linalg.LinAlgError):
    """The mass matrix is exactly singular at some sample (inconsistent parameters).

    Both a :class:`~robotid_sim.errors.DataError` and a ``numpy.linalg.LinAlgError`` (what
    ``numpy.linalg.solve`` raises), so callers catching either keep working.
    """


#: packed chains by the ids of their Joint objects, and by the ids of the kinematic arrays (which
#: ``Robot.with_parameters`` shares between a robot and its copies). Each entry holds the objects
#: whose ids make its key alive, so no other object can take those ids while it is cached: a hit
#: is a hit on the very same objects.
_BY_JOINTS: OrderedDict[tuple[int, ...], tuple[tuple[Joint, ...], ChainArrays]] = OrderedDict()
_BY_KINEMATICS: OrderedDict[tuple, ChainArrays] = OrderedDict()
_CACHE_SIZE = 64


def _remember(cache: OrderedDict, key, value) -> None:
    cache[key] = value
    if len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


def pack_chain(joints: Sequence[Joint] | ChainArrays) -> ChainArrays:
    """Pack ``joints`` for the kernels (a :class:`ChainArrays` is returned as is).

    Packed chains are cached per tuple of :class:`Joint` objects and per tuple of their kinematic
    arrays (Joint is frozen: its kinematics are taken as immutable, arrays included; the inertial
    parameters are never cached), so packing is paid once per robot, not per
    ``with_parameters`` copy. Pass a :class:`ChainArrays` to skip even the look-up.
    """
    if isinstance(joints, ChainArrays):
        return joints
    key = tuple(map(id, joints))
    hit = _BY_JOINTS.get(key)
    if hit is not None:
        return hit[1]
    joints = tuple(joints)
    kinematic_key = tuple(
        (j.kind, j.parent, id(j.axis), id(j.origin_rotation), id(j.origin_translation)) for j in joints
    )
    packed = _BY_KINEMATICS.get(kinematic_key)
    if packed is None:
        for j in joints:
            if j.kind not in ("revolute", "prismatic"):
                raise ModelError(f"joint '{j.name}': unknown kind '{j.kind}'")
        packed = ChainArrays(
            kind=np.array([0 if j.kind == "revolute" else 1 for j in joints], dtype=np.int64),
            parent=chain_parents(joints),
            axis=np.ascontiguousarray([j.axis for j in joints], dtype=float).reshape(-1, 3),
            origin_rotation=np.ascontiguousarray([j.origin_rotation for j in joints], dtype=float).reshape(-1, 3, 3),
            origin_translation=np.ascontiguousarray([j.origin_translation for j in joints], dtype=float).reshape(-1, 3),
            joints=joints,  # holds the arrays of kinematic_key alive
        )
        _remember(_BY_KINEMATICS, kinematic_key, packed)
    _remember(_BY_JOINTS, key, (joints, packed))
    return packed


_KERNELS = None


def kernels():
    """The numba kernel module, imported (and compiled or loaded from cache) on first use; None
    without numba."""
    global _KERNELS
    if _KERNELS is None:
        try:
            from robotid_sim.dynamics import crba_kernels
        except ImportError:  # pragma: no cover - numba is a dependency
            _KERNELS = False
        else:
            _KERNELS = crba_kernels
    return _KERNELS or None


def kernel_array(x, shape: tuple[int, ...] | None = None, what: str = "") -> np.ndarray:
    """Float C-contiguous and writable (numba compiles read-only arrays as another type)."""
    arr = np.ascontiguousarray(x, dtype=float)
    if not arr.flags.writeable:
        arr = arr.copy()
    if shape is not None and arr.shape != shape:
        raise DataError(f"{what} must have shape {shape}, got {arr.shape}")
    return arr


def kernel_states(n: int, *arrays) -> list[np.ndarray]:
    """Float C-contiguous (N, n) arrays; a 1-D (n,) array is one sample."""
    out = []
    for x in arrays:
        arr = kernel_array(x)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != n or (out and arr.shape[0] != out[0].shape[0]):
            raise DataError(f"joint states must be (N, {n}) arrays with the same N, got {np.shape(x)}")
        out.append(arr)
    return out


def _params(chain: ChainArrays, inertials, gravity, rotor_inertia=None):
    n = chain.n_dof
    inert = kernel_array(inertials, (n, 10), "inertials")
    g = kernel_array(gravity, (3,), "gravity")
    rotor = np.zeros(n) if rotor_inertia is None else kernel_array(rotor_inertia, (n,), "rotor_inertia")
    return inert, g, rotor


def _joints_with(chain: ChainArrays, inert: np.ndarray) -> list[Joint]:
    return [replace(j, inertial=inert[i]) for i, j in enumerate(chain.joints)]


# ----------------------------------------------------------------------------- public API


def mass_matrix_and_bias(
    joints: Sequence[Joint] | ChainArrays,
    inertials: np.ndarray,
    gravity: np.ndarray,
    q: np.ndarray,
    qd: np.ndarray | None,
    rotor_inertia: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Mass matrix and bias torque of a chain (serial or tree) with the given standard parameters.

    Args:
        joints: the chain (its ``inertial`` fields are ignored), or :func:`pack_chain` of it.
        inertials: (n, 10) standard parameters XX XY XZ YY YZ ZZ MX MY MZ M per link.
        gravity: (3,) in the base frame.
        q, qd: joint positions and velocities (N, n), or (n,) for one sample. ``qd=None``
            computes M only.
        rotor_inertia: (n,) added to M's diagonal, or None.

    Returns:
        ``M`` (N, n, n) and ``h`` (N, n) = C(q, qd) qd + g(q), the rigid-body torque at
        qdd = 0 (no friction); ``h`` is None when ``qd`` is None.
    """
    chain = pack_chain(joints)
    n = chain.n_dof
    inert, g, rotor = _params(chain, inertials, gravity, rotor_inertia)
    want_h = qd is not None
    q, qd = kernel_states(n, q, qd if want_h else q)
    N = q.shape[0]
    k = kernels()
    if k is None:
        return _mass_matrix_and_bias_numpy(chain, inert, g, rotor, q, qd if want_h else None)
    M = np.empty((N, n, n))
    h = np.empty((N, n)) if want_h else np.empty((N, 0))
    kernel = k.mass_bias_parallel if threaded(N) else k.mass_bias_serial
    kernel(*chain.kernel_arrays, inert, g, rotor, q, qd, M, h, want_h)
    return M, (h if want_h else None)


def mass_matrix(
    joints: Sequence[Joint] | ChainArrays,
    inertials: np.ndarray,
    q: np.ndarray,
    rotor_inertia: np.ndarray | None = None,
) -> np.ndarray:
    """Mass matrix M (N, n, n) by the CRBA (see :func:`mass_matrix_and_bias`)."""
    return mass_matrix_and_bias(joints, inertials, np.zeros(3), q, None, rotor_inertia)[0]


def inverse_dynamics(
    joints: Sequence[Joint] | ChainArrays,
    inertials: np.ndarray,
    gravity: np.ndarray,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
) -> np.ndarray:
    """Rigid-body torque (N, n) by the RNEA: M(q) qdd + h(q, qd), no rotor inertia, no friction."""
    chain = pack_chain(joints)
    n = chain.n_dof
    inert, g, _ = _params(chain, inertials, gravity)
    q, qd, qdd = kernel_states(n, q, qd, qdd)
    k = kernels()
    if k is None:
        from robotid_sim.dynamics.newton_euler import rnea

        return rnea(_joints_with(chain, inert), inert, q.T.copy(), qd.T.copy(), qdd.T.copy(), g).T
    tau = np.empty(q.shape)
    kernel = k.rnea_parallel if threaded(q.shape[0]) else k.rnea_serial
    kernel(*chain.kernel_arrays, inert, g, q, qd, qdd, tau)
    return tau


def forward_dynamics(
    joints: Sequence[Joint] | ChainArrays,
    inertials: np.ndarray,
    gravity: np.ndarray,
    q: np.ndarray,
    qd: np.ndarray,
    tau: np.ndarray,
    rotor_inertia: np.ndarray | None = None,
) -> np.ndarray:
    """qdd (N, n) solving (M(q) + diag(rotor_inertia)) qdd = tau - h(q, qd).

    ``tau`` is the torque acting on the rigid body: subtract friction first. M is factored by
    LU with partial pivoting (it may be indefinite for inconsistent parameters).

    Raises:
        SingularMassMatrixError: M is exactly singular at some sample (a zero pivot).
    """
    chain = pack_chain(joints)
    n = chain.n_dof
    inert, g, rotor = _params(chain, inertials, gravity, rotor_inertia)
    q, qd, tau = kernel_states(n, q, qd, tau)
    N = q.shape[0]
    k = kernels()
    if k is None:
        M, h = _mass_matrix_and_bias_numpy(chain, inert, g, rotor, q, qd)
        try:
            return np.linalg.solve(M, (tau - h)[..., None])[..., 0]
        except np.linalg.LinAlgError as exc:
            raise SingularMassMatrixError(_SINGULAR.format(sample="some sample")) from exc
    qdd = np.empty((N, n))
    args = (*chain.kernel_arrays, inert, g, rotor, q, qd, tau, qdd)
    if threaded(N):
        ok = np.empty(N, dtype=np.bool_)
        k.forward_parallel(*args, ok)
        bad = -1 if ok.all() else int(np.argmin(ok))
    else:
        bad = k.forward_serial(*args)
    if bad >= 0:
        raise SingularMassMatrixError(_SINGULAR.format(sample=f"sample {bad}"))
    return qdd


_SINGULAR = (
    "Singular matrix: the mass matrix is singular at {sample}; the inertial parameters are not "
    "physically consistent there"
)


def _mass_matrix_and_bias_numpy(chain: ChainArrays, inert, g, rotor, q, qd):
    """Reference and fallback: M column by column and h from the batched numpy RNEA."""
    from robotid_sim.dynamics.newton_euler import rnea

    joints = _joints_with(chain, inert)
    N, n = q.shape
    q_rep = np.tile(q, (n, 1)).T.copy()
    e = np.repeat(np.eye(n), N, axis=0).T.copy()
    cols = rnea(joints, inert, q_rep, np.zeros_like(q_rep), e, np.zeros(3)).T
    M = cols.reshape(n, N, n).transpose(1, 2, 0) + np.diag(rotor)
    if qd is None:
        return M, None
    h = rnea(joints, inert, q.T.copy(), qd.T.copy(), np.zeros((n, N)), g).T
    return M, h

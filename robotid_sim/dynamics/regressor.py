"""The standard-parameter layout and the regressor of a chain: what a robot and its structure share.

Parameter vector theta, per joint j (1-based in names), in this order (SPEC §4, seed 001 Eq. 8):
``XXj XYj XZj YYj YZj ZZj MXj MYj MZj Mj`` (standard inertial parameters of link j about its
frame origin), then ``Iaj`` if rotor inertia is modelled, then the linear friction parameters of
the friction model (e.g. ``fcj fvj Sj``). Each joint's block has :attr:`RegressorChain.parameter_block`
entries. A robot with coupled drives (:mod:`robotid_sim.dynamics.coupling`) has their parameters after every
joint's block (``Fvm6 Fcm6``): a robot without keeps its layout.

:class:`RegressorChain` computes everything that needs only the kinematics, gravity, the friction
law and whether rotor inertia is modelled: parameter names, count and groups, the regressor Y
(N, n, p) with ``Y @ theta`` = motor torque, and random states inside the limits. Both
:class:`~robotid_sim.robot.Robot` (with its true values) and
:class:`~robotid_sim.robot.structure.RobotStructure` (without any) are one, so neither needs the
other to answer these queries.
"""

from __future__ import annotations

from functools import cached_property, lru_cache

import numpy as np

from robotid_sim.dynamics import crba
from robotid_sim.dynamics.chain import INERTIAL_NAMES, JointChain
from robotid_sim.dynamics.coupling import Coupling
from robotid_sim.dynamics.friction import FrictionModel
from robotid_sim.dynamics.newton_euler import inertial_regressor
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import DataError

#: half-width of the range of a joint without position limits: continuous revolute joints (rad), and
#: prismatic joints (m: a stroke of 0.4 m, where ±π m would reach far outside any real arm)
UNLIMITED_REVOLUTE_RANGE = float(np.pi)
UNLIMITED_PRISMATIC_RANGE = 0.2


class RegressorChain(JointChain):
    """A chain whose standard parameters are laid out as in the module docstring.

    A subclass provides ``joints``, ``gravity`` (3,), ``friction`` (a
    :class:`~robotid_sim.dynamics.friction.FrictionModel`: its law gives the friction columns and
    names; its linear values are not used here), :attr:`has_rotor_inertia`, ``coupling`` (a
    :class:`~robotid_sim.dynamics.coupling.Coupling`, empty without coupled drives; its values are not used
    here either), and ``velocity_limit``, ``acceleration_limit`` (n,).
    """

    gravity: np.ndarray
    friction: FrictionModel
    coupling: Coupling
    velocity_limit: np.ndarray
    acceleration_limit: np.ndarray

    @property
    def has_rotor_inertia(self) -> bool:
        """Whether each joint has a rotor-inertia parameter ``Ia``."""
        raise NotImplementedError

    # ----------------------------------------------------------------- layout
    @property
    def parameter_block(self) -> int:
        """Number of standard parameters per joint: 10 inertial, ``Ia`` if modelled, then the friction ones."""
        return 10 + self.has_rotor_inertia + len(self.friction.suffixes)

    @cached_property
    def parameter_names(self) -> list[str]:
        """Names of the p standard parameters, in regressor order."""
        names = []
        for j in range(self.n_dof):
            names += [f"{k}{j + 1}" for k in INERTIAL_NAMES]
            if self.has_rotor_inertia:
                names.append(f"Ia{j + 1}")
            names += self.friction.parameter_names(j)
        return names + self.coupling.parameter_names

    @property
    def n_parameters(self) -> int:
        return self.n_dof * self.parameter_block + len(self.coupling.parameter_names)

    def parameter_slices(self) -> dict[str, np.ndarray]:
        """Indices into theta of each parameter group: 'inertial', 'rotor', 'friction' (each joint's block), and
        'coupling' (the coupled drives' parameters after them; empty without)."""
        blocks = self.n_dof * self.parameter_block
        idx = np.arange(blocks).reshape(self.n_dof, self.parameter_block)
        has_ia = self.has_rotor_inertia
        return {
            "inertial": idx[:, :10].ravel(),
            "rotor": idx[:, 10 : 10 + has_ia].ravel(),
            "friction": idx[:, 10 + has_ia :].ravel(),
            "coupling": np.arange(blocks, self.n_parameters),
        }

    # ----------------------------------------------------------------- regressor
    def regressor(self, q, qd, qdd, columns=None) -> np.ndarray:
        """Regressor Y (N, n, p) with Y @ theta = inverse dynamics incl. rotor and friction.

        Computed per sample by compiled Newton–Euler kernels
        (:mod:`robotid_sim.dynamics.crba_kernels`; serial for small batches, threaded over
        samples from :data:`robotid_sim.dynamics.crba.PARALLEL_MIN_SAMPLES` on where numba has
        several threads: :func:`robotid_sim.dynamics.crba.threaded`), or by the
        batched numpy :func:`reference_regressor` without numba.

        Args:
            q, qd, qdd: joint states (N, n).
            columns: increasing indices into theta; only those columns are computed, giving
                (N, n, len(columns)) (how the base regressor is made). Default: all p.

        Raises:
            DataError: malformed states or ``columns``.
        """
        n, p, b = self.n_dof, self.n_parameters, self.parameter_block
        q, qd, qdd = as_states(n, q=q, qd=qd, qdd=qdd)
        colmap, P, coupled = _column_map(n, p, b, columns)
        kernels = crba.kernels()
        if kernels is None:  # no numba
            return reference_regressor(self, q, qd, qdd, columns)
        chain = crba.pack_chain(self.joints)
        q, qd, qdd = crba.kernel_states(n, q, qd, qdd)  # C-contiguous and writable, as numba wants them
        N = q.shape[0]
        friction = self.friction.columns(qd) if self.friction.suffixes else np.empty((N, n, 0))
        friction = crba.kernel_array(friction, (N, n, len(self.friction.suffixes)), "friction columns")
        Y = np.empty((N, n, P))
        kernel = kernels.regressor_parallel if crba.threaded(N) else kernels.regressor_serial
        kernel(
            *chain.kernel_arrays,
            crba.kernel_array(self.gravity, (3,), "gravity"),
            q,
            qd,
            qdd,
            friction,
            colmap,
            int(self.has_rotor_inertia),
            Y,
        )
        if len(coupled):  # the kernels zeroed these last columns
            Y[:, :, P - len(coupled) :] = self.coupling.columns(qd, qdd, self.friction.sign_smoothing)[:, :, coupled]
        return Y

    def random_states(self, rng: np.random.Generator, N: int) -> tuple[np.ndarray, ...]:
        """Random (q, qd, qdd), each (N, n), inside the position, velocity, acceleration limits.

        A joint without position limits is drawn in ±:data:`UNLIMITED_REVOLUTE_RANGE` rad (continuous) or
        ±:data:`UNLIMITED_PRISMATIC_RANGE` m (prismatic), the ranges the generic default excitation uses.
        """
        lo, hi = self.position_limits
        half = np.where(np.array(self.joint_kinds) == "prismatic", UNLIMITED_PRISMATIC_RANGE, UNLIMITED_REVOLUTE_RANGE)
        lo = np.where(np.isfinite(lo), lo, -half)
        hi = np.where(np.isfinite(hi), hi, half)
        q = rng.uniform(lo, hi, size=(N, self.n_dof))
        qd = rng.uniform(-1, 1, size=(N, self.n_dof)) * self.velocity_limit
        qdd = rng.uniform(-1, 1, size=(N, self.n_dof)) * self.acceleration_limit
        return q, qd, qdd


def _column_map(n: int, p: int, b: int, columns) -> tuple[np.ndarray, int, np.ndarray]:
    """The kernels' (n, b) map from each joint-block parameter to its output column (-1: not computed), P, and the
    selected coupled-drive parameters (indices among theirs), whose columns come last. Kept for the last few
    ``columns`` seen (a filter asks for the base columns at every sample: checking and mapping them again cost
    more than a small batch's regressor): callers share the arrays returned and do not change them (they stay
    writable: numba compiles a read-only array as another type)."""
    if columns is None:
        return _mapped_columns(n, p, b, None, None)
    selected = np.asarray(columns)
    if selected.ndim != 1 or (selected.size and selected.dtype.kind not in "iu"):
        raise DataError(f"columns must be a 1-D array of indices, got dtype {selected.dtype}, shape {selected.shape}")
    return _mapped_columns(n, p, b, selected.dtype.str, selected.tobytes())


@lru_cache(maxsize=16)
def _mapped_columns(n: int, p: int, b: int, dtype: str | None, data: bytes | None) -> tuple:
    """:func:`_column_map` of the columns with this dtype and buffer (None: all p)."""
    blocks = n * b
    if data is None:
        return np.arange(blocks, dtype=np.int64).reshape(n, b), p, np.arange(p - blocks)
    selected = np.frombuffer(data, dtype=dtype)
    if selected.size and (selected[0] < 0 or selected[-1] >= p or np.any(np.diff(selected) <= 0)):
        raise DataError(f"columns must be increasing indices in [0, {p}), got {selected.tolist()}")
    selected = selected.astype(np.int64)
    in_blocks = selected[selected < blocks]
    colmap = np.full(blocks, -1, dtype=np.int64)
    colmap[in_blocks] = np.arange(len(in_blocks))
    return colmap.reshape(n, b), len(selected), selected[selected >= blocks] - blocks


def reference_regressor(chain: RegressorChain, q, qd, qdd, columns=None) -> np.ndarray:
    """Batched numpy regressor of ``chain``: what :meth:`RegressorChain.regressor` computes, same arguments and result.

    ``RegressorChain.regressor`` runs compiled kernels (:mod:`robotid_sim.dynamics.crba_kernels`);
    this is the reference they are tested against, and their fallback where numba is missing.
    :func:`~robotid_sim.dynamics.newton_euler.inertial_regressor` gives the inertial columns, then the
    rotor (qdd), friction (``chain.friction.columns(qd)``) and coupled-drive columns are written in. ``chain``: a
    :class:`~robotid_sim.robot.Robot` or a :class:`~robotid_sim.robot.structure.RobotStructure`;
    ``columns``: increasing indices into theta, as for ``regressor``.
    """
    n = chain.n_dof
    q, qd, qdd = as_states(n, q=q, qd=qd, qdd=qdd)
    N, b = q.shape[0], chain.parameter_block
    selected = np.arange(chain.n_parameters) if columns is None else np.asarray(columns)
    position = {int(c): k for k, c in enumerate(selected)}
    link_columns = []
    for j in range(n):
        local = selected[(selected >= j * b) & (selected < j * b + 10)] - j * b
        link_columns.append((local, position[j * b + int(local[0])] if len(local) else 0))
    Y = np.zeros((N, n, len(selected)))
    inertial_regressor(
        chain.joints, q.T.copy(), qd.T.copy(), qdd.T.copy(), chain.gravity, out=Y, link_columns=link_columns
    )
    has_ia = chain.has_rotor_inertia
    friction = chain.friction.columns(qd) if chain.friction.suffixes else None
    for j in range(n):
        if has_ia and j * b + 10 in position:
            Y[:, j, position[j * b + 10]] = qdd[:, j]
        for c in range(len(chain.friction.suffixes)):
            k = position.get(j * b + 10 + has_ia + c)
            if k is not None:
                Y[:, j, k] = friction[:, j, c]
    coupled = [(k, c - n * b) for c, k in position.items() if c >= n * b]
    if coupled:
        drive_columns = chain.coupling.columns(qd, qdd, chain.friction.sign_smoothing)
        for k, c in coupled:
            Y[:, :, k] = drive_columns[:, :, c]
    return Y

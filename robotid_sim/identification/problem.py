"""The identification problem every estimator receives (SPEC §8)."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterator, Sequence
from dataclasses import InitVar, dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from robotid_sim.dynamics.base_parameters import BaseParameters
from robotid_sim.errors import ConfigError, DataError, IdentificationError
from robotid_sim.excitation.base import Segment
from robotid_sim.identification.least_squares import JointWeightedLeastSquares, RowBlock
from robotid_sim.robot.model import Robot
from robotid_sim.robot.structure import RobotStructure
from robotid_sim.safety import memory_limit_bytes
from robotid_sim.sim.logs import experiments

#: condition number above which the excitation is called rank-deficient
RANK_DEFICIENT_CONDITION = 1e10
#: bytes of base regressor computed at once when the rows are streamed (samples per chunk follow)
CHUNK_BYTES = 8 * 2**20
#: condition numbers the Gram matrix resolves; above, the excitation checks take a QR of the rows
GRAM_CONDITION_LIMIT = 1e6
#: stacked base regressors held at once where one is formed: the regressor, its rows in use, a column-scaled
#: copy and the QR/SVD factors (the run budget, :mod:`robotid_sim.scenario.budget`, counts the same)
STACKED_REGRESSOR_COPIES = 5


#: the one experiment of a dataset whose metadata names none


def _generic_names(n: int) -> list[str]:
    return [f"joint{i + 1}" for i in range(n)]


def check_data_matches_robot(dataset, structure) -> None:
    """Refuse data recorded on another robot, or with other joints, than ``structure``'s.

    Compared: the robot name the data carries (``dataset.metadata["robot"]``, written by
    :func:`~robotid_sim.sim.simulate`), its joint names (``dataset.joint_names``) and its joint
    count. Data without a robot name (a real-robot log) and data with the generic names
    ``joint1`` … ``jointn`` (a log saved without names) are taken as the robot's joints, in its
    order. A record that really belongs to this robot but carries another name (a renamed URDF,
    say) is accepted once its ``metadata["robot"]`` is removed or corrected.

    Raises:
        DataError: naming the data's robot and joints, the robot's, and the fix.
    """
    q = np.asarray(dataset.q)
    n_data = q.shape[1] if q.ndim == 2 else 0
    metadata = getattr(dataset, "metadata", None)
    data_robot = metadata.get("robot") if isinstance(metadata, dict) else None
    data_joints = getattr(dataset, "joint_names", None)
    data_joints = [str(j) for j in data_joints] if data_joints is not None else None
    name, joints, n = structure.name, list(structure.joint_names), structure.n_dof

    def described(robot, names, count) -> str:
        who = f"robot '{robot}'" if robot is not None else "an unnamed robot"
        return f"{who} ({', '.join(names)})" if names else f"{who} ({count} joints)"

    recorded = described(data_robot, data_joints, n_data)
    target = described(name, joints, n)
    if n_data != n:
        raise DataError(
            f"the dataset has {n_data} joints but robot '{name}' has {n}: the data was recorded on {recorded}, "
            f"not on {target}; identify with the robot the data was recorded on"
        )
    if isinstance(data_robot, str) and data_robot != name:
        raise DataError(
            f"the data was recorded on {recorded} but is being identified with {target}; identify it "
            f"with robot '{data_robot}', or record the data on '{name}'"
        )
    if data_joints is None or data_joints == joints or data_joints == _generic_names(n):
        return
    if sorted(data_joints) == sorted(joints):
        raise DataError(
            f"the data's joints are in another order ({', '.join(data_joints)}) than those of robot '{name}' "
            f"({', '.join(joints)}); load the file with load_dataset(path, joint_names=robot.joint_names) so the "
            "columns are matched by name, or reorder them"
        )
    raise DataError(
        f"the data was recorded on joints {', '.join(data_joints)} but robot '{name}' has joints "
        f"{', '.join(joints)}; identify with the robot the data was recorded on, or name the data's joints "
        "after the robot's (CSV columns q_<joint>, tau_<joint>)"
    )


def _checked_initial(value, structure) -> np.ndarray:
    """``value`` as p finite floats, or a ConfigError naming what is wrong."""
    p = len(structure.parameter_names)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"'initial' must be {p} numbers (the robot's standard parameters): {exc}") from None
    if arr.shape != (p,):
        raise ConfigError(
            f"'initial' must have shape ({p},), one value per standard parameter of robot '{structure.name}', "
            f"got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ConfigError("'initial' contains NaN or inf; give finite standard parameters")
    return arr


def validate_velocity_deadband(value, n_dof: int | None) -> np.ndarray | None:
    """The per-joint dead-band thresholds (n,) of ``velocity_deadband``, or None when it is None.

    Args:
        value: None, one number for every joint, or a sequence of ``n_dof`` numbers (rad/s for a
            revolute joint, m/s for a prismatic one), each finite and ≥ 0.
        n_dof: the robot's joint count; None where it is not known yet (a scenario being read): the
            numbers are checked, not the length, and one number comes back as (1,).

    Raises:
        ConfigError: naming ``velocity_deadband``, the value and what is allowed.
    """
    if value is None:
        return None
    count = "them" if n_dof is None else f"{n_dof} of them"
    allowed = (
        f"one number ≥ 0 (rad/s, or m/s for a prismatic joint) for every joint, or a list of {count}, one per joint"
    )

    def number(x) -> float:
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise ConfigError(f"velocity_deadband must be {allowed}; got {value!r}")
        x = float(x)
        if math.isnan(x) or math.isinf(x):
            raise ConfigError(f"velocity_deadband must be finite; got {value!r} ({allowed})")
        if x < 0:
            raise ConfigError(f"velocity_deadband must not be negative; got {value!r} ({allowed})")
        return x

    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return np.full(1 if n_dof is None else n_dof, number(value))
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise ConfigError(f"velocity_deadband must be {allowed}; got {value!r}")
    values = list(value)
    if n_dof is not None and len(values) != n_dof:
        raise ConfigError(
            f"velocity_deadband has {len(values)} values but the robot has {n_dof} joints; give {allowed}"
        )
    return np.array([number(x) for x in values], dtype=float)


@dataclass(frozen=True, eq=False)
class JointRows:
    """The rows in use of one joint: its equations ``torque[k] = regressor[k] @ beta`` (seed 001 Eq. 14, row j).

    The per-joint view an estimator needs for anything computed joint by joint (a residual variance per
    joint, a robust scale, a filter along time): with a velocity dead-band each joint keeps its own
    samples, so the stacked rows are not N whole samples and ``reshape(-1, n)`` of them mixes joints.

    Attributes:
        joint: the joint (0-based).
        name: its name.
        samples: (m_j,) sample index of each row (ascending; m_j = N less the dead-band's rows of this joint).
        rows: (m_j,) position of each row among the stacked rows in use (:meth:`IdentificationProblem.base_regressor`).
        regressor: (m_j, b) base regressor rows.
        torque: (m_j,) measured torque of joint j at ``samples``.
    """

    joint: int
    name: str
    samples: np.ndarray
    rows: np.ndarray
    regressor: np.ndarray
    torque: np.ndarray


@dataclass(eq=False)
class IdentificationProblem:
    """What an estimator is given: the robot's structure, the measured data and its segments.

    It holds no truth. The structure (:class:`~robotid_sim.robot.structure.RobotStructure`)
    has the kinematics, the friction law and the parameter layout but no parameter value, and
    the dataset is stored without its noise-free ``truth``. The runner and the metrics keep the
    :class:`~robotid_sim.robot.Robot` with its true parameters; estimators never see it.

    **Rows in use (the velocity dead-band).** The linear equations are the rows
    ``tau[i, j] = Y[i, j, :] @ beta`` of sample i and joint j, stacked sample-major (row
    ``i * n + j``). With ``velocity_deadband``, the rows where ``|qd[i, j]|`` is below joint
    j's threshold are *left out* of joint j's equations: there sign(qd) of the Coulomb terms is
    decided by the velocity noise, not by the motion. :meth:`base_regressor` and
    :meth:`torque_vector` return only the rows in use (m ≤ N·n of them), so an estimator that
    solves least squares on them, computes residual variances or a robust scale from them,
    honours the dead-band without knowing of it. Per-row structure is given alongside, for
    the rows in use: :meth:`row_joint`, :meth:`row_sample`, :meth:`row_experiment`,
    :meth:`row_index` (position in the full N·n stacking). :meth:`row_weights` is the 0/1 weight
    of every one of the N·n rows. Do not ``reshape(-1, n)`` the stacked arrays: with a
    dead-band they are not N whole samples; take :meth:`joint_rows` (each joint's rows, regressor
    and torque) or group by :meth:`row_joint` instead.
    ``base_regressor(stacked=False)`` (N, n, b) keeps the layout and sets the rows out of use to
    zero (a least-squares solve on it with any torque gives the same estimate), and
    ``all_rows=True`` gives every row, the dead-band not applied. Without a dead-band every
    row is in use and nothing changes.

    Args:
        robot: a :class:`Robot` (only its structure is kept) or a :class:`RobotStructure`.
        dataset: measured signals (``t, q, qd, qdd, tau``, each (N, n)).
        velocity_deadband: None (default), or a velocity threshold in rad/s (m/s for a prismatic
            joint), one for all joints or one per joint; 0 for a joint keeps all its rows.

    Raises:
        DataError: the data was recorded on another robot or with other joints (its
            ``metadata["robot"]``, ``joint_names`` or joint count differ; see
            :func:`check_data_matches_robot`), or its ``metadata["experiments"]`` is malformed.
        ConfigError: ``velocity_deadband`` is negative, NaN, not a number or has the wrong length; ``initial``
            is not p finite numbers.
        IdentificationError: the dead-band leaves a joint no row at all. A dead-band that makes
            the base regressor rank-deficient is refused by :meth:`base_regressor`.

    Attributes:
        structure: the robot structure.
        dataset: the measured dataset, ``truth`` removed.
        base: base-parameter reduction of the structure (names, columns, ``K``; no values).
        velocity_deadband: the validated thresholds as a tuple of n floats, or None.
    """

    robot: InitVar[Robot | RobotStructure]
    dataset: Any
    velocity_deadband: float | Sequence[float] | None = field(default=None, kw_only=True)
    initial: np.ndarray | None = field(default=None, kw_only=True)
    structure: RobotStructure = field(init=False)
    base: BaseParameters = field(init=False)

    def __post_init__(self, robot):
        self.structure = robot if isinstance(robot, RobotStructure) else robot.structure()
        if getattr(self.dataset, "truth", None) is not None:
            self.dataset = dataclasses.replace(self.dataset, truth=None)
        check_data_matches_robot(self.dataset, self.structure)
        thresholds = validate_velocity_deadband(self.velocity_deadband, self.structure.n_dof)
        self.velocity_deadband = None if thresholds is None else tuple(float(x) for x in thresholds)
        self._experiments = experiments(self.dataset)
        self._keep = None
        if thresholds is not None:
            qd = np.asarray(self.dataset.qd, float)
            keep = np.abs(qd) >= thresholds  # (N, n)
            empty = [j for j in range(keep.shape[1]) if not keep[:, j].any()]
            if empty:
                names = [self.structure.joint_names[j] for j in empty]
                raise IdentificationError(
                    f"velocity_deadband {list(self.velocity_deadband)} removes every sample of joint(s) {names} "
                    f"(|qd| never reaches the threshold: max |qd| = "
                    f"{[round(float(np.abs(qd[:, j]).max()), 6) for j in empty]}); lower it for those joints"
                )
            if not keep.all():
                self._keep = keep.reshape(-1)
        self.base = self.structure.base_parameters()
        if self.initial is not None:
            self.initial = _checked_initial(self.initial, self.structure)

    @property
    def initial_base(self) -> np.ndarray | None:
        """The initial estimate's base parameters K·θ₀ (b,), or None without ``initial``."""
        return None if self.initial is None else self.base.K @ self.initial

    @property
    def n_dof(self) -> int:
        return self.structure.n_dof

    @property
    def n_samples(self) -> int:
        return self.dataset.q.shape[0]

    @property
    def n_rows(self) -> int:
        """Number m of equations in use: N·n less the rows the velocity dead-band removed."""
        return self.n_samples * self.n_dof if self._keep is None else int(np.count_nonzero(self._keep))

    @property
    def base_parameter_names(self) -> list[str]:
        return list(self.base.names)

    @property
    def experiments(self) -> list[tuple[str, slice]]:
        """The recordings stacked in the data, (name, sample slice) in order (:func:`robotid_sim.sim.logs.experiments`).

        From the dataset's ``metadata["experiments"]`` (validated on construction); data
        without it is one experiment ``"all"``.
        """
        return list(self._experiments)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Labelled time ranges of the data (static, constant velocity, one joint moving, ...).

        Read from the dataset's ``metadata['segments']`` (written by :func:`simulate` from the
        excitation); a record without them is one ``'excitation'`` segment per experiment
        (:attr:`experiments`), each from its first sample to the next experiment's first.
        """
        t = np.asarray(self.dataset.t, float)
        stored = self.dataset.metadata.get("segments") if isinstance(self.dataset.metadata, dict) else None
        if stored:
            return tuple(Segment(str(s["label"]), float(s["start"]), float(s["end"]), s.get("joint")) for s in stored)
        end = float(t[-1]) + self.dataset.dt
        return tuple(
            Segment("excitation", float(t[sl.start]), float(t[sl.stop]) if sl.stop < len(t) else end)
            for _, sl in self._experiments
        )

    # ------------------------------------------------------------------ rows in use
    def row_weights(self) -> np.ndarray:
        """(N·n,) weight of every stacked row (sample-major, as ``base_regressor(all_rows=True)``):
        1 for a row in use, 0 for one the velocity dead-band removed."""
        if self._keep is None:
            return np.ones(self.n_samples * self.n_dof)
        return self._keep.astype(float)

    def row_index(self) -> np.ndarray:
        """(m,) position of each row in use in the full N·n sample-major stacking."""
        return self._row_index

    @cached_property
    def _row_index(self) -> np.ndarray:
        index = np.arange(self.n_samples * self.n_dof) if self._keep is None else np.flatnonzero(self._keep)
        index.setflags(write=False)
        return index

    def row_joint(self) -> np.ndarray:
        """(m,) joint (0-based) of each row in use of :meth:`base_regressor` / :meth:`torque_vector`."""
        return self._row_index % self.n_dof

    def row_sample(self) -> np.ndarray:
        """(m,) sample index of each row in use."""
        return self._row_index // self.n_dof

    def row_experiment(self) -> np.ndarray:
        """(m,) index into :attr:`experiments` of each row in use."""
        starts = np.array([sl.start for _, sl in self._experiments])
        return np.searchsorted(starts, self.row_sample(), side="right") - 1

    def joint_rows(self) -> list[JointRows]:
        """Per joint, its rows in use (:class:`JointRows`): the per-joint view of :meth:`base_regressor` and
        :meth:`torque_vector`, for estimators; never ``reshape(-1, n)`` the stacked rows instead.

        Forms the stacked base regressor, as :meth:`base_regressor` does (an estimator using it does not
        stream the regressor).

        Raises:
            IdentificationError: as :meth:`base_regressor`.
        """
        W, y, joint = self.base_regressor(), self.torque_vector(), self.row_joint()
        sample = self.row_sample()
        views = []
        for j, name in enumerate(self.structure.joint_names):
            rows = np.flatnonzero(joint == j)
            views.append(JointRows(j, name, sample[rows], rows, W[rows], y[rows]))
        return views

    @property
    def deadband_rows_removed(self) -> list[int]:
        """Per joint, how many of its N rows the velocity dead-band removed (zeros without one)."""
        if self._keep is None:
            return [0] * self.n_dof
        return [int(x) for x in np.count_nonzero(~self._keep.reshape(-1, self.n_dof), axis=0)]

    def diagnostics(self) -> dict[str, Any]:
        """What the problem did to the data, for an estimator's model diagnostics:
        ``deadband_rows_removed`` (list of n ints)."""
        return {"deadband_rows_removed": self.deadband_rows_removed}

    # ------------------------------------------------------------------ streamed least squares
    def least_squares(self) -> JointWeightedLeastSquares:
        """The least-squares solver of this problem's rows in use, built once and shared.

        Its one pass computes the base regressor chunk by chunk (:data:`CHUNK_BYTES` at a time)
        and keeps per experiment and joint only the Gram matrix WᵀW, Wᵀτ and counts, so the
        stacked (m, b) regressor is never formed; residuals come from the batched torque of the
        compiled Newton–Euler kernels. Cells are ``experiment * n + joint``
        (:meth:`row_experiment`, :meth:`row_joint`). ``solve()`` gives the OLS estimate,
        ``solve(weights_per_joint)`` or ``solve(weights_per_cell)`` a weighted one, ``keep``
        drops rows (an outlier rejection), all equal to the dense QR of
        :func:`~robotid_sim.identification.least_squares.weighted_least_squares` on
        :meth:`base_regressor` to rounding.
        """
        return self._least_squares

    @cached_property
    def _least_squares(self) -> JointWeightedLeastSquares:
        return JointWeightedLeastSquares(_ProblemRows(self))

    def predict_rows(self, beta: np.ndarray) -> np.ndarray:
        """W β (m,) for base parameters ``beta`` on the rows in use, by the batched Newton–Euler torque
        of the equivalent standard parameters (no regressor formed)."""
        theta = np.zeros(self.structure.n_parameters)
        theta[self.base.independent] = beta
        ds = self.dataset
        tau = Robot.from_structure(self.structure, theta).inverse_dynamics(ds.q, ds.qd, ds.qdd)
        return tau.reshape(-1) if self._keep is None else tau.reshape(-1)[self._keep]

    # ------------------------------------------------------------------ regressor and torque
    @cached_property
    def _base_regressor(self) -> np.ndarray:
        ds = self.dataset
        return self.base.regressor(ds.q, ds.qd, ds.qdd)

    @cached_property
    def _kept_regressor(self) -> np.ndarray:
        Y = self._base_regressor
        W = Y.reshape(-1, Y.shape[-1])
        return W if self._keep is None else W[self._keep]

    @cached_property
    def _zeroed_regressor(self) -> np.ndarray:
        Y = self._base_regressor.copy()
        Y[~self._keep.reshape(Y.shape[:2])] = 0.0
        return Y

    def base_regressor(self, stacked: bool = True, *, all_rows: bool = False) -> np.ndarray:
        """Base regressor on the dataset.

        Args:
            stacked: True: (m, b), the rows in use stacked sample-major (m = N·n without a
                velocity dead-band). False: (N, n, b), the rows out of use set to zero.
            all_rows: every row, the dead-band not applied: (N·n, b) or (N, n, b).

        Raises:
            IdentificationError: the velocity dead-band leaves the rows in use rank-deficient
                while the data without it is not (checked once, when the dead-band removed rows), or
                the stacked regressor would not fit in memory (:meth:`check_stacked_memory`).
        """
        self.check_stacked_memory("the stacked base regressor (problem.base_regressor())")
        Y = self._base_regressor
        if all_rows or self._keep is None:
            return Y.reshape(-1, Y.shape[-1]) if stacked else Y
        self._check_deadband_rank()
        return self._kept_regressor if stacked else self._zeroed_regressor

    def torque_vector(self, *, all_rows: bool = False) -> np.ndarray:
        """Measured torque stacked like :meth:`base_regressor`: (m,) rows in use, or (N·n,) with ``all_rows``."""
        tau = np.asarray(self.dataset.tau, float).reshape(-1)
        return tau if all_rows or self._keep is None else tau[self._keep]

    def check_stacked_memory(self, what: str) -> None:
        """Refuse to stack the base regressor (N·n, b) where it would not fit in this machine's memory.

        The budget of :mod:`robotid_sim.scenario.budget` counts no stacked regressor for estimators that stream
        it; the excitation check's QR (where the Gram matrix cannot decide) and the dense fallback of an
        ill-conditioned solve stack it all the same, so each asks here first, with
        :data:`STACKED_REGRESSOR_COPIES` copies against the machine's RAM (twice
        :func:`robotid_sim.safety.memory_limit_bytes`, the limit of ``simulation.allow_large``).

        Raises:
            IdentificationError: naming ``what``, the estimate, its sizes, the limit and the fix.
        """
        b = self.base.count
        needed = float(self.n_samples) * self.n_dof * b * 8 * STACKED_REGRESSOR_COPIES
        limit = 2 * memory_limit_bytes()
        if needed > limit:
            raise IdentificationError(
                f"{what} would need about {needed / 1e9:.3g} GB ({self.n_samples:,} samples × {self.n_dof} joints × "
                f"{b} base parameters × 8 bytes × {STACKED_REGRESSOR_COPIES} working copies), more than this "
                f"machine's {limit / 1e9:.3g} GB of RAM; identify on fewer samples (trim or decimate the recording, "
                "or record at a lower rate)"
            )

    # ------------------------------------------------------------------ excitation checks
    def check_excitation(self) -> float:
        """Condition number of the base regressor on this data (as seed 001 reports it), on the rows in use.

        Rank deficiency is judged on the column-normalised regressor, so that parameters of very
        different scales (masses, small inertias) do not look unexcited.

        Raises:
            IdentificationError: naming the least-excited base parameters when the data is
                rank-deficient (some parameter combination is not excited at all).
        """
        return self._excitation_condition

    def _cause_note(self) -> str:
        """The known cause of a rank-deficient excitation: a simulation cut short before some joints moved
        (``dataset.metadata["excitation_cut"]``, :func:`robotid_sim.sim.simulate.excitation_cut_note`)."""
        metadata = getattr(self.dataset, "metadata", None)
        cut = metadata.get("excitation_cut") if isinstance(metadata, dict) else None
        return "" if cut is None else f". The cause: {cut}"

    def _deadband_note(self) -> str:
        if self._keep is None:
            return ""
        return (
            f" (after velocity_deadband {list(self.velocity_deadband)} removed {self.deadband_rows_removed} rows "
            "per joint; a lower dead-band keeps more)"
        )

    @staticmethod
    def _rank_test(W: np.ndarray) -> tuple[np.ndarray, float, np.ndarray | None, float]:
        """(dead columns, scaled condition number, last right singular vector of the scaled W, cond(W)).

        One QR of W (R only) and SVDs of the b×b factor: W D⁻¹ = Q (R D⁻¹) has the singular values and
        right singular vectors of R D⁻¹, for any column scaling D.
        """
        import scipy.linalg

        scale = np.linalg.norm(W, axis=0)
        dead = np.flatnonzero(scale < 1e-12 * max(scale.max(), 1e-300))
        if dead.size:
            return dead, np.inf, None, np.inf
        if W.shape[0] < W.shape[1]:  # fewer equations than parameters: a null space, whatever the values
            Vt = np.linalg.svd(W / scale)[2]
            return dead, np.inf, Vt[-1], np.inf
        (R,) = scipy.linalg.qr(W, mode="r", check_finite=False)
        R = R[: W.shape[1]]
        _, s, Vt = np.linalg.svd(R / scale)
        scaled = float(s[0] / s[-1]) if s[-1] > 0 else np.inf
        raw = np.linalg.svd(R, compute_uv=False)
        tiny = raw.size == 0 or raw[0] == 0 or raw[-1] <= np.finfo(float).eps * raw[0] * max(W.shape)
        return dead, scaled, Vt[-1], float("inf") if tiny else float(raw[0] / raw[-1])

    @cached_property
    def _kept_rank_test(self):
        gram = _gram_rank_test(self.least_squares().gram_matrix())
        if gram is not None:
            return gram
        self.check_stacked_memory("the excitation check (a QR of the stacked rows: the Gram matrix cannot decide)")
        return self._rank_test(self._kept_regressor)

    @cached_property
    def _deadband_rank_checked(self) -> bool:
        dead, cond, v, _ = self._kept_rank_test
        if not dead.size and cond <= RANK_DEFICIENT_CONDITION:
            return True
        self.check_stacked_memory("the velocity dead-band's rank check (a QR of every row)")
        full_dead, full_cond, _, _ = self._rank_test(self.base_regressor(all_rows=True))
        if full_dead.size or full_cond > RANK_DEFICIENT_CONDITION:
            return True  # the excitation itself is deficient: check_excitation's business
        if dead.size:
            what = f"base parameter(s) {[self.base.names[i] for i in dead]} have an all-zero regressor column"
        else:
            weakest = np.argsort(-np.abs(v))[:3]
            what = f"the combination of {[self.base.names[i] for i in weakest]} is not excited (condition {cond:.3g})"
        raise IdentificationError(
            f"velocity_deadband {list(self.velocity_deadband)} makes the problem rank-deficient: on the rows it "
            f"keeps, {what}; it removed {self.deadband_rows_removed} of {self.n_samples} rows per joint. Lower "
            "velocity_deadband, or record more motion above it"
        )

    def _check_deadband_rank(self) -> None:
        if self._keep is not None:
            self._deadband_rank_checked  # noqa: B018 - cached: raises once per problem

    @cached_property
    def _excitation_condition(self) -> float:
        """:meth:`check_excitation`, computed once per problem (every estimator of a study asks)."""
        self._check_deadband_rank()
        dead, scaled_cond, v, cond = self._kept_rank_test
        if dead.size:
            names = [self.base.names[i] for i in dead]
            raise IdentificationError(
                f"rank-deficient excitation: base parameter(s) {names} have an all-zero regressor column on "
                f"this data (the joints that excite them do not move){self._deadband_note()}; use a richer excitation"
                f"{self._cause_note()}"
            )
        if scaled_cond > RANK_DEFICIENT_CONDITION:
            weakest = np.argsort(-np.abs(v))[:3]
            names = [self.base.names[i] for i in weakest]
            raise IdentificationError(
                f"rank-deficient excitation: condition number {scaled_cond:.3g} of the base regressor; the "
                f"combination of {names} is not excited{self._deadband_note()}. Use a longer or optimised "
                f"excitation (e.g. excitation.type: fourier with optimize){self._cause_note()}"
            )
        return cond  # = metrics.condition_number of the rows in use


def _gram_rank_test(G: np.ndarray):
    """:meth:`IdentificationProblem._rank_test` from the Gram matrix WᵀW, or None where its condition
    numbers exceed :data:`GRAM_CONDITION_LIMIT` (the Gram matrix squares them; the QR of W decides there)."""
    scale = np.sqrt(np.diag(G))
    dead = np.flatnonzero(scale < 1e-12 * max(scale.max(), 1e-300))
    if dead.size:
        return dead, np.inf, None, np.inf
    ev, V = np.linalg.eigh(G / np.outer(scale, scale))
    raw = np.linalg.eigvalsh(G)
    if ev[0] <= 0 or raw[0] <= 0:
        return None
    scaled, cond = float(np.sqrt(ev[-1] / ev[0])), float(np.sqrt(raw[-1] / raw[0]))
    if max(scaled, cond) > GRAM_CONDITION_LIMIT:
        return None
    return dead, scaled, V[:, 0], cond


class _ProblemRows:
    """The rows in use of a problem as a :class:`~robotid_sim.identification.least_squares.RowSource`:
    the base regressor computed a chunk of samples at a time, cells ``experiment * n + joint``."""

    def __init__(self, problem: IdentificationProblem):
        self.problem = problem
        self.n_dof = problem.n_dof
        self.n_cells = len(problem.experiments) * self.n_dof
        self.row_cell = problem.row_experiment() * self.n_dof + problem.row_joint()
        self.y = problem.torque_vector()

    @cached_property
    def chunks(self) -> list[tuple[int, slice]]:
        """(experiment, samples) of every chunk: :data:`CHUNK_BYTES` of regressor, within one experiment."""
        p = self.problem
        size = max(64, CHUNK_BYTES // (8 * self.n_dof * max(p.base.count, 1)))
        return [
            (e, slice(first, min(first + size, experiment.stop)))
            for e, (_, experiment) in enumerate(p.experiments)
            for first in range(experiment.start, experiment.stop, size)
        ]

    @cached_property
    def parts(self) -> int:
        """Threads that may compute chunks at once: numba's thread count, at most one per chunk."""
        import numba  # loaded by the regressor kernels anyway

        return max(1, min(numba.get_num_threads(), len(self.chunks) // 2))

    def blocks(self, part: int = 0, parts: int = 1) -> Iterator[RowBlock]:
        p, n = self.problem, self.n_dof
        ds = p.dataset
        keep = None if p._keep is None else p._keep.reshape(-1, n)
        position = None if keep is None else self._position  # full row index -> row in use
        start = self.column_start
        for e, s in self.chunks[part::parts]:
            Y = p.base.regressor(ds.q[s], ds.qd[s], ds.qdd[s])
            tau = np.asarray(ds.tau[s], float)
            for j in range(n):
                full = np.arange(s.start, s.stop) * n + j
                if keep is None:
                    yield RowBlock(e * n + j, full, Y[:, j, start[j] :], tau[:, j], start[j])
                else:
                    use = keep[s, j]
                    yield RowBlock(e * n + j, position[full[use]], Y[use, j, start[j] :], tau[use, j], start[j])

    @cached_property
    def _position(self) -> np.ndarray:
        return np.cumsum(self.problem._keep) - 1

    @cached_property
    def column_start(self) -> np.ndarray:
        """(n,) first base column that joint j's rows can hold: the regressor's row j is zero for
        the parameters of the links before j (the kernels write exact zeros there)."""
        block = self.problem.structure.n_parameters // self.n_dof
        link = self.problem.base.independent // block
        return np.searchsorted(link, np.arange(self.n_dof))

    def rows(self, index: np.ndarray) -> np.ndarray:
        p, n = self.problem, self.n_dof
        full = p.row_index()[index]
        samples, joints = np.divmod(full, n)
        unique, inverse = np.unique(samples, return_inverse=True)
        ds = p.dataset
        Y = p.base.regressor(ds.q[unique], ds.qd[unique], ds.qdd[unique])
        return Y[inverse, joints]

    def predict(self, beta: np.ndarray) -> np.ndarray:
        return self.problem.predict_rows(beta)

    def matrix(self) -> np.ndarray:
        self.problem.check_stacked_memory("the dense QR fallback of an ill-conditioned least-squares solve")
        return self.problem.base_regressor()

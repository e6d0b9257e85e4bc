"""The identification problem every estimator receives (SPEC §8)."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from robotid_sim.dynamics.base_parameters import BaseParameters
from robotid_sim.errors import DataError, IdentificationError
from robotid_sim.excitation.base import Segment
from robotid_sim.identification.metrics import condition_number
from robotid_sim.robot.model import Robot
from robotid_sim.robot.structure import RobotStructure

#: condition number above which the excitation is called rank-deficient
RANK_DEFICIENT_CONDITION = 1e10


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


@dataclass(eq=False)
class IdentificationProblem:
    """What an estimator is given: the robot's structure, the measured data and its segments.

    It holds no truth. The structure (:class:`~robotid_sim.robot.structure.RobotStructure`)
    has the kinematics, the friction law and the parameter layout but no parameter value, and
    the dataset is stored without its noise-free ``truth``. The runner and the metrics keep the
    :class:`~robotid_sim.robot.Robot` with its true parameters; estimators never see it.

    Args:
        robot: a :class:`Robot` (only its structure is kept) or a :class:`RobotStructure`.
        dataset: measured signals (``t, q, qd, qdd, tau``, each (N, n)).

    Raises:
        DataError: the data was recorded on another robot or with other joints (its
            ``metadata["robot"]``, ``joint_names`` or joint count differ; see
            :func:`check_data_matches_robot`).

    Attributes:
        structure: the robot structure.
        dataset: the measured dataset, ``truth`` removed.
        base: base-parameter reduction of the structure (names, columns, ``K``; no values).
    """

    robot: InitVar[Robot | RobotStructure]
    dataset: Any
    structure: RobotStructure = field(init=False)
    base: BaseParameters = field(init=False)

    def __post_init__(self, robot):
        self.structure = robot if isinstance(robot, RobotStructure) else robot.structure()
        if getattr(self.dataset, "truth", None) is not None:
            self.dataset = dataclasses.replace(self.dataset, truth=None)
        check_data_matches_robot(self.dataset, self.structure)
        self.base = self.structure.base_parameters()

    @property
    def n_dof(self) -> int:
        return self.structure.n_dof

    @property
    def n_samples(self) -> int:
        return self.dataset.q.shape[0]

    @property
    def base_parameter_names(self) -> list[str]:
        return list(self.base.names)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Labelled time ranges of the data (static, constant velocity, one joint moving, ...).

        Read from the dataset's ``metadata['segments']`` (written by :func:`simulate` from the
        excitation); a record without them is one ``'excitation'`` segment.
        """
        t = self.dataset.t
        stored = self.dataset.metadata.get("segments") if isinstance(self.dataset.metadata, dict) else None
        if not stored:
            return (Segment("excitation", float(t[0]), float(t[-1]) + self.dataset.dt),)
        return tuple(Segment(str(s["label"]), float(s["start"]), float(s["end"]), s.get("joint")) for s in stored)

    @cached_property
    def _base_regressor(self) -> np.ndarray:
        ds = self.dataset
        return self.base.regressor(ds.q, ds.qd, ds.qdd)

    def base_regressor(self, stacked: bool = True) -> np.ndarray:
        """Base regressor on the dataset: (N·n, b) stacked sample-major, or (N, n, b)."""
        Y = self._base_regressor
        return Y.reshape(-1, Y.shape[-1]) if stacked else Y

    def torque_vector(self) -> np.ndarray:
        """Measured torque stacked like :meth:`base_regressor`: (N·n,)."""
        return np.asarray(self.dataset.tau, float).reshape(-1)

    def check_excitation(self) -> float:
        """Condition number of the base regressor on this data (as seed 001 reports it).

        Rank deficiency is judged on the column-normalised regressor, so that parameters of very
        different scales (masses, small inertias) do not look unexcited.

        Raises:
            IdentificationError: naming the least-excited base parameters when the data is
                rank-deficient (some parameter combination is not excited at all).
        """
        return self._excitation_condition

    @cached_property
    def _excitation_condition(self) -> float:
        """:meth:`check_excitation`, computed once per problem (every estimator of a study asks)."""
        W = self.base_regressor()
        scale = np.linalg.norm(W, axis=0)
        dead = np.flatnonzero(scale < 1e-12 * max(scale.max(), 1e-300))
        if dead.size:
            names = [self.base.names[i] for i in dead]
            raise IdentificationError(
                f"rank-deficient excitation: base parameter(s) {names} have an all-zero regressor column on "
                "this data (the joints that excite them do not move); use a richer excitation"
            )
        Wn = W / scale
        _, s, Vt = np.linalg.svd(Wn, full_matrices=False)
        scaled_cond = float(s[0] / s[-1]) if s[-1] > 0 else np.inf
        if scaled_cond > RANK_DEFICIENT_CONDITION:
            cond = scaled_cond
            weakest = np.argsort(-np.abs(Vt[-1]))[:3]
            names = [self.base.names[i] for i in weakest]
            raise IdentificationError(
                f"rank-deficient excitation: condition number {cond:.3g} of the base regressor; the "
                f"combination of {names} is not excited. Use a longer or optimised excitation "
                "(e.g. excitation.type: fourier with optimize)"
            )
        return condition_number(W)

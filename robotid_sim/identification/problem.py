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
        self.base = self.structure.base_parameters()
        n = self.structure.n_dof
        if self.dataset.q.shape[1] != n:
            raise DataError(
                f"the dataset has {self.dataset.q.shape[1]} joints but robot '{self.structure.name}' has {n}; "
                "identify with the robot the data was recorded on"
            )

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

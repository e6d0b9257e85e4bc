"""The identification problem every estimator receives (SPEC §8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from robotid_sim.dynamics.base_parameters import BaseParameters
from robotid_sim.errors import DataError, IdentificationError
from robotid_sim.identification.metrics import condition_number
from robotid_sim.robot.model import Robot

#: condition number above which the excitation is called rank-deficient
RANK_DEFICIENT_CONDITION = 1e10


@dataclass
class IdentificationProblem:
    """A dataset, the robot model structure, and the base-parameter reduction.

    Only the robot's *structure* (kinematics, friction law, which parameters exist) is used by
    estimators; its true parameters serve only for ``true_base_values`` (metrics).

    Attributes:
        robot: the robot model.
        dataset: measured signals (``t, q, qd, qdd, tau``, each (N, n)).
        base: base parameters of the robot.
        options: free-form options from the scenario (passed through to estimators).
    """

    robot: Robot
    dataset: Any
    base: BaseParameters = None  # type: ignore[assignment]
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.base is None:
            self.base = self.robot.base_parameters()
        n = self.robot.n_dof
        if self.dataset.q.shape[1] != n:
            raise DataError(
                f"the dataset has {self.dataset.q.shape[1]} joints but robot '{self.robot.name}' has {n}; "
                "identify with the robot the data was recorded on"
            )

    @property
    def n_dof(self) -> int:
        return self.robot.n_dof

    @property
    def n_samples(self) -> int:
        return self.dataset.q.shape[0]

    @property
    def base_parameter_names(self) -> list[str]:
        return list(self.base.names)

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

    def true_base_values(self) -> np.ndarray:
        """Base parameters of the robot's true model (b,)."""
        return self.base.true_values()

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

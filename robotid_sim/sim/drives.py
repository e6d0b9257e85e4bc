"""Motor drives of a recording: motor currents to joint torque, motor-side to joint-side motion.

A robot that logs its motor currents ``i`` (A) instead of joint torques is read through a
:class:`DriveModel`, the ``drives`` field of a :class:`~robotid_sim.sim.logs.LogSource`:

* per-motor drive gains ``k`` (N·m per A of motor current, N per A for a linear motor), either given
  (``gains``) or as ``torque_constant × gear_ratio`` (seed 001 Eq. 1 without the efficiency); the motor torque
  is ``τ_motor = k · i``;
* optionally a transmission matrix ``N`` (n, n) for coupled joints (a wrist whose joint-6 motor also
  turns joint 5): ``q_motor = N q``, so the logged motor positions, velocities and accelerations give the
  joint ones by ``q = N⁻¹ q_motor``, and the joint torques are ``τ = Nᵀ τ_motor`` (power balance
  ``τᵀ qd = τ_motorᵀ qd_motor``). ``N`` holds the gear ratios then (``diag(N)`` for an uncoupled drive),
  and ``k`` is the motors' own torque constant;
* or ``gains: unknown``: the currents are loaded as they are (the dataset's ``tau`` holds the motor
  currents, motion converted through ``N``) and ``robotid-sim identify`` estimates the gains with the
  dynamic parameters from recordings with and without a payload of known mass
  (:mod:`robotid_sim.identification.drive_gains`, Gautier & Briot).

Every per-joint list and the rows and columns of ``N`` are in the robot's joint order.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from robotid_sim.errors import ConfigError

__all__ = ["MAX_TRANSMISSION_CONDITION", "DriveModel"]

#: a transmission matrix whose condition number exceeds this is refused as (nearly) singular
MAX_TRANSMISSION_CONDITION = 1e8


class DriveModel(BaseModel):
    """How a recording's motor currents and motor-side motion map to joint torque and motion (module docstring).

    Example (YAML, in a LogSource; the currents in CSV columns ``i_<joint>``)::

        keys: {i: i_}
        drives:
          torque_constant: [0.21, 0.21, 0.13]
          gear_ratio: [160, 160, 100]

    or, a coupled wrist whose last motor also turns the joint before it::

        drives:
          gains: [0.21, 0.13, 0.13]
          transmission: [[160, 0, 0], [0, 100, 0], [0, 100, 100]]
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    gains: list[float] | Literal["unknown"] | None = Field(
        None,
        description="per-motor drive gain k (N*m/A; N/A for a linear motor): motor torque = k * current; "
        "'unknown' to estimate the gains (identify with --payload-mass recordings)",
    )
    torque_constant: list[float] | None = Field(
        None, description="per-motor torque constant (N*m/A); the gains are torque_constant * gear_ratio"
    )
    gear_ratio: list[float] | None = Field(
        None, description="per-joint gear ratio, with torque_constant (not with a transmission, which holds them)"
    )
    transmission: list[list[float]] | None = Field(
        None,
        description="(n, n) matrix N with q_motor = N q: the file's q, qd, qdd are motor-side (q = N^-1 q_motor) "
        "and the joint torque is N^T times the motor torque",
    )

    @field_validator("gains", "torque_constant", "gear_ratio", "transmission", mode="before")
    @classmethod
    def _finite(cls, value, info: ValidationInfo):
        if isinstance(value, str) and info.field_name == "gains" and value != "unknown":
            raise ValueError(f"must be a list of gains (N*m/A, one per motor) or 'unknown', got {value!r}")
        if isinstance(value, list | tuple):
            entries = [x for row in value for x in (row if isinstance(row, list | tuple) else [row])]
            try:  # YAML reads 1e-3 as text: pydantic converts what float() reads
                finite = all(not isinstance(x, bool) and np.isfinite(float(x)) for x in entries)
            except (TypeError, ValueError):
                finite = False
            if not finite:
                raise ValueError(f"must hold finite numbers only, got {list(value)}")
        return value

    @field_validator("transmission")
    @classmethod
    def _invertible(cls, value):
        if value is not None:
            _checked_transmission(value)
        return value

    @field_validator("gains", "torque_constant", "gear_ratio")
    @classmethod
    def _nonzero(cls, value):
        if isinstance(value, list):
            if not value:
                raise ValueError("is empty; give one value per joint, in the robot's joint order")
            if any(v == 0 for v in value):
                raise ValueError(f"must not hold 0 (a drive that gives no torque), got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self):
        if (self.gains is None) == (self.torque_constant is None):
            raise ValueError(
                "give either 'gains' (N*m/A per motor, or 'unknown' to estimate them) or 'torque_constant' (with "
                "'gear_ratio'), not both or neither"
            )
        if self.gear_ratio is not None and self.torque_constant is None:
            raise ValueError("'gear_ratio' goes with 'torque_constant'; with 'gains', fold it into the gains")
        if self.gear_ratio is not None and self.transmission is not None:
            raise ValueError(
                "'gear_ratio' and 'transmission' both given: the transmission matrix holds the gear ratios "
                "(q_motor = N q); give the motors' torque_constant without gear_ratio"
            )
        if self.torque_constant is not None and self.gear_ratio is not None:
            if len(self.torque_constant) != len(self.gear_ratio):
                raise ValueError(
                    f"torque_constant has {len(self.torque_constant)} values but gear_ratio {len(self.gear_ratio)}; "
                    "give one of each per joint"
                )
        return self

    @property
    def gains_unknown(self) -> bool:
        """Whether the gains are to be estimated (``gains: unknown``)."""
        return self.gains == "unknown"

    def motor_gains(self, n: int) -> np.ndarray | None:
        """The per-motor gains k (n,), or None when they are unknown.

        Raises:
            ConfigError: a gain count other than the robot's joint count ``n``.
        """
        self._check_size(n)
        if self.gains_unknown:
            return None
        if self.gains is not None:
            return np.asarray(self.gains, float)
        ratio = np.ones(n) if self.gear_ratio is None else np.asarray(self.gear_ratio, float)
        return np.asarray(self.torque_constant, float) * ratio

    def transmission_matrix(self, n: int) -> np.ndarray:
        """N (n, n): the layout's transmission, or the identity (joint-side motion).

        Raises:
            ConfigError: a matrix that is not (n, n).
        """
        self._check_size(n)
        return np.eye(n) if self.transmission is None else np.asarray(self.transmission, float)

    def _check_size(self, n: int) -> None:
        sizes = {
            "gains": self.gains if isinstance(self.gains, list) else None,
            "torque_constant": self.torque_constant,
            "gear_ratio": self.gear_ratio,
        }
        for name, values in sizes.items():
            if values is not None and len(values) != n:
                raise ConfigError(
                    f"drives.{name} has {len(values)} values but the robot has {n} joints; give one per joint, in the "
                    "robot's joint order"
                )
        if self.transmission is not None and np.shape(self.transmission) != (n, n):
            raise ConfigError(
                f"drives.transmission is {len(self.transmission)} x {len(self.transmission[0])} but the robot has "
                f"{n} joints; give an {n} x {n} matrix (q_motor = N q), rows and columns in the robot's joint order"
            )

    def joint_signals(self, signals: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The joint-side signals of a recording's motor-side ones (each (N, n), SI units, robot joint order).

        ``q, qd, qdd``: ``N⁻¹`` times the motor-side ones (unchanged without a transmission); ``tau`` (the motor
        currents): ``Nᵀ (k · i)``, or the currents unchanged when the gains are unknown.

        Raises:
            ConfigError: a gain count or transmission size other than the robot's joint count.
        """
        n = signals["q"].shape[1]
        gains = self.motor_gains(n)
        N = self.transmission_matrix(n)
        out = dict(signals)
        if self.transmission is not None:
            inverse_T = np.linalg.inv(N).T  # row form of q = N⁻¹ q_motor
            for name in ("q", "qd", "qdd"):
                if name in out:
                    out[name] = out[name] @ inverse_T
        if gains is not None:
            out["tau"] = (out["tau"] * gains) @ N  # row form of τ = Nᵀ (k · i)
        return out

    def current_matrix(self, currents: np.ndarray) -> np.ndarray:
        """C (N, n, n) with ``τ[s] = C[s] @ k``: the joint torques as linear in the unknown gains k.

        ``C[s, j, m] = N[m, j] i[s, m]`` (the diagonal ``diag(i[s])`` without a transmission).
        """
        N = self.transmission_matrix(currents.shape[1])
        return currents[:, None, :] * N.T[None, :, :]


def _checked_transmission(matrix: list[list[float]]) -> None:
    """A ValueError for a transmission matrix that is not square or is (nearly) singular."""
    rows = len(matrix)
    if rows == 0 or any(len(row) != rows for row in matrix):
        raise ValueError(
            f"must be a square matrix (n x n, q_motor = N q), got rows of lengths {[len(r) for r in matrix]}"
        )
    cond = float(np.linalg.cond(np.asarray(matrix, float)))
    if not cond <= MAX_TRANSMISSION_CONDITION:
        raise ValueError(
            f"is singular or nearly so (condition number {cond:.3g} > {MAX_TRANSMISSION_CONDITION:.0e}): every joint "
            "must be driven; check the coupling terms"
        )

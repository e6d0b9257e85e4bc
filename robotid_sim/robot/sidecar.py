"""The YAML sidecar: what a URDF cannot hold (SPEC §3).

Validated with pydantic: a missing or unknown field raises :class:`ConfigError` naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robotid_sim.errors import ConfigError

PerJoint = float | list[float]


class Limits(BaseModel):
    """Joint limits beyond the URDF's: per joint (or one value for all), SI units."""

    model_config = ConfigDict(extra="forbid")
    velocity: PerJoint
    acceleration: PerJoint


class TorqueMeasurement(BaseModel):
    """How the motor torque is measured (seed 001 Eq. 1: tau = eta * K * i_q)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["direct", "current"] = "direct"
    torque_constant: PerJoint | None = Field(
        default=None, description="K, N·m per A at the motor (rated torque coefficient)"
    )

    @model_validator(mode="after")
    def _current_needs_constant(self):
        if self.type == "current" and self.torque_constant is None:
            raise ValueError("type 'current' needs 'torque_constant' (K of seed 001 Eq. 1)")
        return self


class Sidecar(BaseModel):
    """Robot sidecar file ``<robot>.yaml`` next to the URDF."""

    model_config = ConfigDict(extra="forbid")
    citation: str = Field(description="where the robot comes from (seed and table)")
    gravity: list[float] = Field(default=[0.0, 0.0, -9.81], min_length=3, max_length=3)
    friction: dict[str, Any] = Field(description="friction model, see robotid_sim.dynamics.friction")
    rotor_inertia: PerJoint | None = Field(description="Ia per joint (kg·m², link side), or null")
    gear_ratio: PerJoint
    limits: Limits
    torque_measurement: TorqueMeasurement = TorqueMeasurement()
    default_excitation: dict[str, Any] | None = None
    dh: dict[str, Any] | None = Field(default=None, description="the DH table the URDF was made from")
    notes: str | None = None


def _format_validation_error(exc: ValidationError, where: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "<root>"
        kind = err["type"]
        if kind == "missing":
            parts.append(f"missing field '{loc}'")
        elif kind == "extra_forbidden":
            parts.append(f"unknown field '{loc}'")
        else:
            parts.append(f"field '{loc}': {err['msg']}")
    return f"{where}: " + "; ".join(parts)


def load_sidecar(path: str | Path) -> Sidecar:
    """Read and validate a sidecar YAML file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"sidecar {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"sidecar {path} must be a mapping of fields, got {type(data).__name__}")
    return parse_sidecar(data, where=f"sidecar {path}")


def parse_sidecar(data: dict, where: str = "sidecar") -> Sidecar:
    """Validate a sidecar mapping."""
    try:
        return Sidecar.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, where)) from None

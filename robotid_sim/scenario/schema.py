"""Scenario YAML schema (SPEC §13), validated with pydantic: errors name the field and the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from robotid_sim.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SimulationConfig(_Strict):
    """How the data is recorded."""

    rate_hz: float = Field(200.0, gt=0, description="recording rate (must divide 1/dt)")
    dt: float = Field(1e-3, gt=0, description="physics step (s)")
    duration: float | None = Field(None, gt=0, description="seconds; default: the excitation's duration")
    kp: float = Field(400.0, gt=0)
    kd: float = Field(40.0, gt=0)


class ValidationConfig(_Strict):
    """The validation trajectory: always different from the identification one."""

    excitation: dict[str, Any] | None = Field(
        None, description="excitation mapping; default: the identification one with another seed"
    )
    duration: float | None = Field(None, gt=0)
    noise_seed_offset: int = 1
    trajectory_horizon: float = Field(
        1.0, ge=0, description="seconds of open-loop forward simulation of each identified model (0: skip)"
    )


class PreprocessingConfig(_Strict):
    """Optional filtering of the measured signals before identification (SPEC §7)."""

    lowpass_hz: float | None = Field(None, gt=0, description="zero-phase 4th-order Butterworth on q, qd, tau")
    differentiate: bool = Field(False, description="recompute qd, qdd from q by central differences")
    period_average: int | None = Field(None, ge=2, description="average this many periods (periodic excitations)")


class EstimatorEntry(_Strict):
    """One estimator of the study."""

    name: str
    label: str | None = Field(None, description="name shown in tables (default: name)")
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def display(self) -> str:
        return self.label or self.name


class Scenario(_Strict):
    """A study: robot, excitation, noise, estimators, outputs."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description="used in the run folder name")
    description: str = ""
    robot: str = Field(description="bundled robot name or path to a URDF")
    seed: int = 0
    excitation: dict[str, Any] | str = "default"
    noise: dict[str, Any] | None = None
    simulation: SimulationConfig = SimulationConfig()
    validation: ValidationConfig = ValidationConfig()
    preprocessing: PreprocessingConfig = PreprocessingConfig()
    estimators: list[EstimatorEntry] = Field(min_length=1)
    sensitivity: bool = Field(False, description="±50 % parameter sensitivity of the first estimator")

    @field_validator("estimators", mode="before")
    @classmethod
    def _names_to_entries(cls, value):
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("excitation")
    @classmethod
    def _excitation_form(cls, value):
        if isinstance(value, str) and value != "default":
            raise ValueError("must be 'default' or a mapping with a 'type'")
        if isinstance(value, dict) and "type" not in value:
            raise ValueError("a mapping needs a 'type' (fourier, sequential_sine, polynomial, stepwise)")
        return value

    @model_validator(mode="after")
    def _unique_labels(self):
        labels = [e.display for e in self.estimators]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"estimators appear twice: {dupes}; give each a distinct 'label'")
        return self


def _format(exc: ValidationError, where: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "<root>"
        if err["type"] == "missing":
            parts.append(f"missing field '{loc}'")
        elif err["type"] == "extra_forbidden":
            parts.append(f"unknown field '{loc}'")
        else:
            parts.append(f"field '{loc}': {err['msg']}")
    return f"{where}: " + "; ".join(parts)


def parse_scenario(data: Any, where: str = "scenario") -> Scenario:
    """Validate a scenario mapping; :class:`ConfigError` names each bad field and why."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a mapping of fields, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format(exc, where)) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"scenario file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"scenario {path} is not valid YAML: {exc}") from None
    return parse_scenario(data, where=f"scenario {path}")

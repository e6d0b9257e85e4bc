"""Scenario YAML schema (SPEC §13), validated with pydantic: errors name the field and the reason.

Names that become file or folder names (the scenario ``name``, each estimator's ``label`` or
``name``) must pass :func:`robotid_sim.safety.safe_name`, so nothing a scenario says can write outside
its run folder. Numbers must be finite. A scenario file is read with
:func:`robotid_sim.safety.load_yaml_file` (no alias bombs, no binary files); its ``name`` defaults to
the file's stem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from robotid_sim.errors import ConfigError
from robotid_sim.safety import load_yaml_file, safe_name

#: the scenario name of a :class:`Scenario` built without one (a file's scenario defaults to its stem)
DEFAULT_NAME = "scenario"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class SimulationConfig(_Strict):
    """How the data is recorded."""

    rate_hz: float = Field(200.0, gt=0, description="recording rate (must divide 1/dt)")
    dt: float = Field(1e-3, gt=0, description="physics step (s)")
    duration: float | None = Field(None, gt=0, description="seconds; default: the excitation's duration")
    kp: float = Field(400.0, gt=0)
    kd: float = Field(40.0, gt=0)
    allow_large: bool = Field(
        False,
        description=(
            "run even when the estimated memory exceeds half of this machine's RAM (up to all of it) or the "
            "estimated simulation time exceeds 2 hours; without it such a run is refused before it starts with the "
            "estimate (robotid_sim.scenario.budget). Only for runs you know fit"
        ),
    )


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

    name: str = Field(description="registered estimator name (ols, wls, irls, or a plugin's)")
    label: str | None = Field(
        None,
        description="name shown in tables and used as the model's file name (default: name); letters, digits, "
        "'_', '.', '+', '-'",
    )
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _display_is_a_file_name(self):
        safe_name(self.display, "estimator label" if self.label is not None else "estimator name")
        return self

    @property
    def display(self) -> str:
        """The name in tables, of the model files (``models/<display>.json``) and of the figures."""
        return self.label if self.label is not None else self.name


class Scenario(_Strict):
    """A study: robot, excitation, noise, estimators, outputs."""

    name: str = Field(
        DEFAULT_NAME,
        description="used in the run folder name (letters, digits, '_', '.', '+', '-'); default: the file's stem",
    )
    description: str = ""
    robot: str = Field(description="bundled robot name or path to a URDF")
    seed: int = Field(0, ge=0)
    excitation: dict[str, Any] | str = "default"
    noise: dict[str, Any] | None = None
    simulation: SimulationConfig = SimulationConfig()
    validation: ValidationConfig = ValidationConfig()
    preprocessing: PreprocessingConfig = PreprocessingConfig()
    estimators: list[EstimatorEntry] = Field(min_length=1)
    sensitivity: bool = Field(False, description="±50 % parameter sensitivity of the first estimator")

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value):
        return safe_name(value, "scenario name")

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
        # compared without case: their model files must not collide on case-insensitive file systems
        labels = [e.display.casefold() for e in self.estimators]
        dupes = sorted({e.display for e in self.estimators if labels.count(e.display.casefold()) > 1})
        if dupes:
            raise ValueError(
                f"estimators appear twice: {dupes} (labels are compared without case); give each a distinct 'label'"
            )
        return self

    @model_validator(mode="after")
    def _validation_seed(self):
        if self.seed + self.validation.noise_seed_offset < 0:
            raise ValueError(
                f"seed + validation.noise_seed_offset = {self.seed + self.validation.noise_seed_offset} must be >= 0 "
                "(it seeds the validation noise)"
            )
        return self


def _format(exc: ValidationError, where: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "<root>"
        if err["type"] == "missing":
            parts.append(f"missing field '{loc}'")
        elif err["type"] == "extra_forbidden":
            parts.append(f"unknown field '{loc}'")
        elif err["type"] == "value_error" and "error" in err.get("ctx", {}):
            parts.append(f"field '{loc}': {err['ctx']['error']}")  # our own message, without "Value error, "
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
    """Read and validate a scenario YAML file; its ``name`` defaults to the file's stem.

    Raises:
        ConfigError: a missing, unreadable, binary or malformed file, an alias bomb
            (:func:`robotid_sim.safety.load_yaml_file`), or an invalid field.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"scenario file not found: {path}")
    data = load_yaml_file(path, "scenario")
    where = f"scenario {path}"
    if isinstance(data, dict) and "name" not in data:
        try:
            safe_name(path.stem, "scenario name")
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc} (taken from the file name; add a 'name' field)") from None
        data = {"name": path.stem, **data}
    return parse_scenario(data, where=where)

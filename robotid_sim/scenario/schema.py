"""Scenario YAML schema (SPEC §13), validated with pydantic: errors name the field and the reason.

Names that become file or folder names (the scenario ``name``, each estimator's ``label`` or
``name``) must pass :func:`robotid_sim.safety.safe_name`, so nothing a scenario says can write outside
its run folder. Numbers must be finite. A scenario file is read with
:func:`robotid_sim.safety.load_yaml_file` (no alias bombs, no binary files); its ``name`` defaults to
the file's stem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from robotid_sim.errors import ConfigError, format_validation_error
from robotid_sim.safety import load_yaml_file, safe_name

#: the scenario name of a :class:`Scenario` built without one (a file's scenario defaults to its stem)
DEFAULT_NAME = "scenario"
#: the row of the report holding the robot's own (URDF/CAD and sidecar) parameters
CAD_LABEL = "CAD"
#: the study file of a closed-loop run folder (:class:`ClosedLoopStudy`, ``robotid-sim closed-loop``)
CLOSED_LOOP_FILE = "closed_loop.yaml"


def repeated(names: list[str]) -> list[str]:
    """The names that appear more than once, compared without case (sorted)."""
    folded = [name.casefold() for name in names]
    return sorted({name for name in names if folded.count(name.casefold()) > 1})


def check_unique_labels(estimators) -> None:
    """Refuse (ValueError) estimators whose labels repeat, compared without case: their model files must not
    collide on case-insensitive file systems."""
    dupes = repeated([e.display for e in estimators])
    if dupes:
        raise ValueError(
            f"estimators appear twice: {dupes} (labels are compared without case); give each a distinct 'label'"
        )


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

    lowpass_hz: float | None = Field(
        None,
        gt=0,
        description="zero-phase 4th-order Butterworth on q, qd, tau: a cut-off in Hz between one cycle per recording "
        "(1 / its length) and the Nyquist frequency",
    )
    differentiate: bool = Field(False, description="recompute qd, qdd from q by central differences")
    period_average: int | None = Field(None, ge=2, description="average this many periods (periodic excitations)")


class DataConfig(_Strict):
    """Recorded data instead of a simulation (a real robot's logs): see :mod:`robotid_sim.sim.logs`.

    Each file is a path or a :class:`~robotid_sim.sim.logs.LogSource` mapping (``path``, ``keys``, ``units``,
    ``joint_names``, ``trim``, ``decimate``, ``name``); ``defaults`` holds the fields every file shares (three
    recordings of one tool have the same layout). Several identification files are stacked as separate
    experiments: nothing is filtered or differentiated across a join.
    """

    identification: list[str | dict[str, Any]] = Field(min_length=1, description="identification recordings")
    validation: list[str | dict[str, Any]] = Field(
        min_length=1, description="held-out recordings (never the identification ones)"
    )
    defaults: dict[str, Any] = Field(default_factory=dict, description="LogSource fields shared by every file")

    def sources(self, which: str) -> list[dict[str, Any]]:
        """The ``identification`` or ``validation`` files as LogSource mappings, ``defaults`` applied."""
        entries = getattr(self, which)
        return [{**self.defaults, **({"path": e} if isinstance(e, str) else e)} for e in entries]

    @model_validator(mode="after")
    def _distinct_files(self):
        def part(entry: dict) -> tuple:
            return entry.get("path"), json.dumps(entry.get("trim"))

        shared = {part(e) for e in self.sources("identification")} & {part(e) for e in self.sources("validation")}
        if shared:
            raise ValueError(
                f"{sorted(p for p, _ in shared)} are both identification and validation data; validate on other "
                "recordings (or on another part of one: give each entry its own 'trim')"
            )
        return self


class IdentificationConfig(_Strict):
    """Options of the identification problem every estimator is given."""

    velocity_deadband: float | list[float] | None = Field(
        None,
        description="rad/s or m/s per joint (or one for all): samples where |qd_j| is below it are left out of "
        "joint j's equations, where sign(qd) of the Coulomb terms is noise",
    )
    friction_model: dict[str, Any] | None = Field(
        None,
        description="the friction law the estimators assume, as in a sidecar without coefficients ({model: "
        "coulomb_viscous}, {model: nonlinear, alpha: 1.0}); default: the robot's own law. It must have the "
        "robot's friction parameters (coulomb_viscous and nonlinear both have fc, fv, S)",
    )

    @field_validator("velocity_deadband", mode="before")
    @classmethod
    def _deadband_numbers(cls, value):
        # one readable message for NaN, negative or non-numbers (the length is checked against the robot later)
        from robotid_sim.identification.problem import validate_velocity_deadband

        validate_velocity_deadband(value, None)
        return value


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


class ControllerEntry(_Strict):
    """One controller of a closed-loop comparison."""

    name: str = Field(description="registered controller name (pid, feedforward, computed_torque, pd, or a plugin's)")
    label: str | None = Field(
        None,
        description="name shown in the closed-loop table and plot (default: the name, with the model option in "
        "parentheses: 'feedforward(ols)')",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="the controller's options; 'model' names an estimator label of this scenario, 'CAD', or a saved "
        "model's path",
    )

    def display_label(self, model: Any = None) -> str:
        """The name in the closed-loop table, the plot and ``metrics.json``: the label, else the name with the
        ``model`` option (or the section's ``model``, given as ``model``) in parentheses."""
        if self.label is not None:
            return self.label
        model = self.options.get("model", model)
        if not isinstance(model, str):
            return self.name
        return f"{self.name}({Path(model).stem if model.endswith('.json') or '/' in model else model})"


#: the scale factors of ``sensitivity: true``: 11 points from ×0.5 to ×1.5 (seed 004 Table 6, Fig. 8)
DEFAULT_SENSITIVITY_FACTORS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5)


class SensitivityConfig(_Strict):
    """±50 % parameter sensitivity of one estimator's model (seed 004 Table 6, Fig. 8): each identified
    parameter alone scaled by each factor, the open-loop trajectory's RMS against the nominal model's."""

    estimator: str | None = Field(
        None, description="the label of one of the scenario's estimators (its name if it has none); default: the first"
    )
    factors: list[float] = Field(
        default_factory=lambda: list(DEFAULT_SENSITIVITY_FACTORS),
        description="scale factors (> 0); 0.5 and 1.5, the table's minimum and maximum, are always added",
    )

    @field_validator("factors")
    @classmethod
    def _positive_with_the_bounds(cls, value):
        bad = [f for f in value if f <= 0]
        if bad:
            raise ValueError(f"scale factors must be > 0 (a parameter scaled, not negated), got {bad}")
        return sorted({*value, 0.5, 1.5})


class ReportConfig(_Strict):
    """How the report shows the study."""

    figures: bool = Field(
        True,
        description="draw the report's PNG figures; false: its tables and text only (a quick or batch run: the "
        "figures are about half of a small run's time)",
    )

    parameter_labels: dict[str, str] = Field(
        default_factory=dict,
        description="base-parameter name to the label shown beside it (e.g. the seed's grouped parameter, "
        "{M1: 'λ1*'}); names are checked against the robot's base parameters before the run",
    )

    @field_validator("parameter_labels")
    @classmethod
    def _labels_not_empty(cls, value):
        empty = sorted(name for name, label in value.items() if not label.strip())
        if empty:
            raise ValueError(f"empty label for {empty}; give each a text or leave the name out")
        return value


def _names_to_entries(value):
    """A list of entries where a bare name stands for ``{"name": name}`` (estimators, controllers)."""
    if isinstance(value, list):
        return [{"name": v} if isinstance(v, str) else v for v in value]
    return value


def excitation_or_default(value):
    """'default' or a mapping with a 'type', the two forms of an excitation (or reference) field."""
    if isinstance(value, str) and value != "default":
        raise ValueError("must be 'default' or a mapping with a 'type'")
    if isinstance(value, dict) and "type" not in value:
        raise ValueError("a mapping needs a 'type' (fourier, sequential_sine, polynomial, stepwise)")
    return value


class ClosedLoopConfig(_Strict):
    """Closed-loop tracking with each controller after identification (SPEC §10, seed 000 Fig. 15)."""

    controllers: list[ControllerEntry] = Field(min_length=1, description="controllers compared, names or entries")
    reference: dict[str, Any] | str | None = Field(
        None,
        description="excitation mapping or 'default' (the robot's); default: the validation trajectory of a "
        "simulated scenario, the robot's default excitation of a data scenario",
    )
    duration: float | None = Field(None, gt=0, description="seconds; default: the reference's duration")
    model: str | None = Field(
        None,
        description="the model of every controller that takes a 'model' option and is given none: an estimator "
        "label, 'CAD' or a model path; default: the plant's own model",
    )
    plant: str = Field(
        "pybullet", description="'pybullet' (the truth, friction included), an estimator label, 'CAD' or a model path"
    )
    friction: bool = Field(True, description="false: the PyBullet plant without its friction law")
    dt: float = Field(1e-3, gt=0, description="control period and physics step (s)")

    @field_validator("controllers", mode="before")
    @classmethod
    def _names_to_entries(cls, value):
        return _names_to_entries(value)

    @field_validator("reference")
    @classmethod
    def _reference_form(cls, value):
        return excitation_or_default(value)

    @model_validator(mode="after")
    def _unique_labels(self):
        dupes = repeated([e.display_label() for e in self.controllers])
        if dupes:
            raise ValueError(
                f"controllers appear twice: {dupes} (labels are compared without case); give each a distinct 'label'"
            )
        return self


class Scenario(_Strict):
    """A study: robot, excitation, noise, estimators, outputs."""

    name: str = Field(
        DEFAULT_NAME,
        description="used in the run folder name (letters, digits, '_', '.', '+', '-'); default: the file's stem",
    )
    description: str = ""
    robot: str = Field(description="bundled robot name or path to a URDF")
    sidecar: str | None = Field(
        None,
        description="YAML sidecar of a URDF (friction, rotor inertia, limits); default: the robot's own, found beside "
        "its URDF; 'none': no sidecar at all",
    )
    lock_joints: dict[str, float] = Field(
        default_factory=dict, description="joints made fixed at a position (rad or m), e.g. a gripper's fingers"
    )
    data: DataConfig | None = Field(None, description="recorded data files instead of a simulation")
    identification: IdentificationConfig = IdentificationConfig()
    seed: int = Field(0, ge=0)
    excitation: dict[str, Any] | str = "default"
    noise: dict[str, Any] | None = None
    simulation: SimulationConfig = SimulationConfig()
    validation: ValidationConfig = ValidationConfig()
    preprocessing: PreprocessingConfig = PreprocessingConfig()
    estimators: list[EstimatorEntry] = Field(min_length=1)
    sensitivity: SensitivityConfig | None = Field(
        None,
        description="±50 % parameter sensitivity: true (the first estimator, factors 0.5 … 1.5 in steps of 0.1), "
        "false, or a mapping {estimator: <label>, factors: [...]}",
    )
    report: ReportConfig = ReportConfig()
    closed_loop: ClosedLoopConfig | None = Field(
        None, description="closed-loop tracking with the identified models, after identification"
    )

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value):
        return safe_name(value, "scenario name")

    @field_validator("estimators", mode="before")
    @classmethod
    def _names_to_entries(cls, value):
        return _names_to_entries(value)

    @field_validator("excitation")
    @classmethod
    def _excitation_form(cls, value):
        return excitation_or_default(value)

    @field_validator("sensitivity", mode="before")
    @classmethod
    def _sensitivity_switch(cls, value):
        if isinstance(value, bool):
            return {} if value else None
        return value

    @model_validator(mode="after")
    def _sensitivity_estimator(self):
        if self.sensitivity is None:
            return self
        labels = [e.display for e in self.estimators]
        wanted = self.sensitivity.estimator
        match = [label for label in labels if wanted is None or label.casefold() == wanted.casefold()]
        if not match:
            raise ValueError(
                f"sensitivity.estimator '{wanted}' is not an estimator of this scenario; choose one of {labels}"
            )
        # the label as the estimators section spells it (labels are compared without case)
        self.sensitivity = self.sensitivity.model_copy(update={"estimator": match[0]})
        return self

    @model_validator(mode="after")
    def _unique_labels(self):
        check_unique_labels(self.estimators)
        return self

    @model_validator(mode="after")
    def _data_or_simulation(self):
        if self.data is None:
            return self
        simulated = sorted({"excitation", "noise", "simulation"} & self.model_fields_set)
        simulated += [f"validation.{k}" for k in ("excitation", "duration") if k in self.validation.model_fields_set]
        if simulated:
            raise ValueError(
                f"a scenario with 'data' simulates nothing: remove {simulated} (or remove 'data' to simulate)"
            )
        if self.sensitivity is not None:
            raise ValueError("'sensitivity' needs the noise-free validation torque of a simulation; remove it")
        if self.preprocessing.period_average is not None:
            raise ValueError("preprocessing.period_average needs a simulated periodic excitation; remove it")
        return self

    @model_validator(mode="after")
    def _cad_is_reserved(self):
        if any(e.display.casefold() == CAD_LABEL.casefold() for e in self.estimators):
            raise ValueError(f"the label '{CAD_LABEL}' is the report's URDF baseline row; choose another 'label'")
        return self

    @model_validator(mode="after")
    def _validation_seed(self):
        if self.seed + self.validation.noise_seed_offset < 0:
            raise ValueError(
                f"seed + validation.noise_seed_offset = {self.seed + self.validation.noise_seed_offset} must be >= 0 "
                "(it seeds the validation noise)"
            )
        return self


class ClosedLoopStudy(_Strict):
    """A closed-loop comparison on its own, without identification (``robotid-sim closed-loop``): the
    models are files (or ``CAD``, the robot's own parameters)."""

    name: str = Field("closed_loop", description="used in the run folder name")
    robot: str = Field(description="bundled robot name or path to a URDF")
    sidecar: str | None = Field(None, description="as a scenario's: a YAML sidecar, or 'none' for no sidecar")
    lock_joints: dict[str, float] = Field(default_factory=dict)
    closed_loop: ClosedLoopConfig

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value):
        return safe_name(value, "run name")


def parse_closed_loop_study(data: Any, where: str = "closed-loop") -> ClosedLoopStudy:
    """Validate a closed-loop study mapping; :class:`ConfigError` names each bad field and why."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a mapping of fields, got {type(data).__name__}")
    try:
        return ClosedLoopStudy.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where)) from None


def validate_mapping(model: type[BaseModel], data: Any, where: str) -> Any:
    """``model`` validated from the mapping ``data``; :class:`ConfigError` names each bad field and why."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a mapping of fields, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where)) from None


def load_named_mapping(path: Path, kind: str) -> tuple[Any, str]:
    """(data, where) of a YAML file of ``kind`` ('scenario', 'sweep') whose ``name`` defaults to the file's stem.

    Raises:
        ConfigError: an unreadable, binary or malformed file, an alias bomb
            (:func:`robotid_sim.safety.load_yaml_file`), or a stem that is no safe name when the name is left out.
    """
    data = load_yaml_file(path, kind)
    where = f"{kind} {path}"
    if isinstance(data, dict) and "name" not in data:
        try:
            safe_name(path.stem, f"{kind} name")
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc} (taken from the file name; add a 'name' field)") from None
        data = {"name": path.stem, **data}
    return data, where


def parse_scenario(data: Any, where: str = "scenario") -> Scenario:
    """Validate a scenario mapping; :class:`ConfigError` names each bad field and why."""
    return validate_mapping(Scenario, data, where)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file; its ``name`` defaults to the file's stem.

    Raises:
        ConfigError: a missing, unreadable, binary or malformed file, an alias bomb
            (:func:`robotid_sim.safety.load_yaml_file`), or an invalid field.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"scenario file not found: {path}")
    return parse_scenario(*load_named_mapping(path, "scenario"))

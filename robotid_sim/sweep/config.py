"""The sweep YAML schema: a grid of robots × excitations × noise presets × estimators × repetitions.

A sweep file is read with :func:`robotid_sim.safety.load_yaml_file` (no alias bombs, no binary files) and
validated by pydantic; every error names the field and the reason (:func:`robotid_sim.errors.format_validation_error`).
Names that become file or folder names (the sweep ``name``, the ``output`` folder, the excitation and noise
preset labels, each estimator's label) must pass :func:`robotid_sim.safety.safe_name`. Estimator entries are the
scenario's own (:class:`robotid_sim.scenario.schema.EstimatorEntry`), so an estimator is given in a sweep exactly
as in a scenario. Two optional sections make a sweep BIRDy's protocol (:mod:`robotid_sim.sweep.protocol`):
``data.closed_loop`` (BIRDy's closed-loop data generation; ``noise`` then names BIRDy's presets, and an estimator
entry's ``filtered: true`` gives it the prefiltered "_f" data set) and ``initial_estimates`` (each estimator run
from each of ``count`` initial estimates drawn around the truth). A sweep without them is unchanged, its task
hashes too.

Example::

    name: small
    robots: [planar3r, three_axis]
    excitations:
      fourier: {type: fourier, harmonics: 4, base_frequency: 0.2, periods: 1, seed: 1}
    noise:
      tau_0.05: {tau: {std: 0.05}}
      tau_0.1: {tau: {std: 0.1}}
    estimators: [ols, wls, {name: irls, label: irls}]
    repetitions: 5
    seed: 0
    validation:
      excitation: {type: fourier, harmonics: 3, base_frequency: 0.25, periods: 1, seed: 7}
      trajectory_horizon: 0.5
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from robotid_sim.errors import ConfigError
from robotid_sim.safety import safe_name
from robotid_sim.scenario.schema import (
    EstimatorEntry,
    SimulationConfig,
    check_unique_labels,
    excitation_or_default,
    load_named_mapping,
    repeated,
    validate_mapping,
)

#: Monte Carlo repetitions of a sweep that does not say
DEFAULT_REPETITIONS = 10
#: seconds of open-loop simulation behind the trajectory error (BIRDy's short-horizon figure)
DEFAULT_TRAJECTORY_HORIZON = 0.5


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class SweepValidation(_Strict):
    """The validation trajectory every cell is evaluated on (never the identification one)."""

    excitation: dict[str, Any] | None = Field(
        None,
        description="excitation mapping; default: each identification excitation with its seeds moved (as a scenario)",
    )
    duration: float | None = Field(None, gt=0, description="seconds; default: the excitation's duration")
    noise_seed_offset: int = Field(1, description="the validation noise is seeded with the cell's seed plus this")
    trajectory_horizon: float = Field(
        DEFAULT_TRAJECTORY_HORIZON,
        ge=0,
        description="seconds of open-loop forward simulation of each identified model (0: no trajectory error)",
    )


class ClosedLoopData(_Strict):
    """Closed-loop data generation as BIRDy's (:func:`robotid_sim.sim.closed_loop_data.closed_loop_record`): the
    robot tracks the excitation under a PID whose encoder noise is re-injected, and BIRDy's preprocessing
    (:func:`~robotid_sim.sim.closed_loop_data.birdy_dataset`) turns the record into the identification data."""

    duration: float = Field(10.0, gt=0, le=3600, description="seconds of closed loop from t = 0")
    sample_rate_hz: float = Field(1000.0, gt=0, description="rate of the raw record (before decimation)")
    controller: dict[str, Any] | None = Field(
        None,
        description="{kp, kd, ki, anti_windup, control_rate_hz} (PIDLoop.from_dict); default: the robot's BIRDy "
        "gains (tx40)",
    )
    derivatives: Literal["central", "exact"] = Field(
        "central", description="'central': BIRDy's central differences of the measured q; 'exact': the simulator's"
    )
    trim: int = Field(50, ge=0, description="samples dropped at each end")
    decimation: int | None = Field(None, ge=1, description="default: round(0.8·(fs/2)/500), BIRDy's")
    cutoff_hz: float = Field(50.0, gt=0, description="Butterworth cut-off of the 'filtered: true' estimators")

    @model_validator(mode="after")
    def _preprocessing(self):
        if self.derivatives == "central" and self.trim < 2:
            raise ValueError("trim must be at least 2 with central differences (every kept sample's derivatives)")
        if self.cutoff_hz >= self.sample_rate_hz / 2:
            nyquist = self.sample_rate_hz / 2
            raise ValueError(f"cutoff_hz {self.cutoff_hz:g} must be below the Nyquist frequency {nyquist:g} Hz")
        return self


class SweepData(_Strict):
    """Where a sweep's identification data come from; without it, open-loop simulations (``simulation``)."""

    closed_loop: ClosedLoopData


class InitialEstimates(_Strict):
    """BIRDy's initial estimates ('RefSd'): θ₀ = θ_true ∘ (1 + relative_std · N(0, 1)) per standard parameter,
    redrawn until every link is physically consistent; every task of a cell runs once per initial estimate."""

    count: int = Field(ge=1, le=10_000, description="initial estimates (BIRDy: 25)")
    relative_std: float = Field(0.15, gt=0, le=10, description="relative standard deviation of the draws")
    seed: int = Field(0, ge=0, description="initial estimate i is drawn from the generator seeded (seed, i)")


class SweepEstimatorEntry(EstimatorEntry):
    """A scenario's estimator entry, and in a closed-loop sweep which of BIRDy's two data sets it is given."""

    filtered: bool = Field(
        False, description="closed-loop sweeps: BIRDy's '_f' data (zero-phase Butterworth on q and τ first)"
    )


class SweepConfig(_Strict):
    """A Monte Carlo sweep: every (robot, excitation, noise preset, repetition) cell is simulated once and
    identified by every estimator."""

    name: str = Field("sweep", description="the sweep's name (letters, digits, '_', '.', '+', '-')")
    description: str = ""
    output: str | None = Field(
        None, description="run folder name under the output root (default: the name); the same folder resumes"
    )
    robots: list[str] = Field(min_length=1, description="bundled robot names or URDF paths")
    robot_folder: str | None = Field(
        None,
        description="folder relative URDF paths in robots are resolved against, relative to this file's folder "
        "(default: the sweep file's folder); a sweep records it in its folder's sweep.yaml",
    )
    excitations: dict[str, dict[str, Any] | str] = Field(
        default_factory=lambda: {"default": "default"},
        description="label → excitation mapping or 'default' (the robot's own); default: {default: default}",
    )
    noise: dict[str, dict[str, Any] | str | None] = Field(
        min_length=1,
        description="preset label → noise mapping as in a scenario (null: noise-free); with data.closed_loop, "
        "label → BIRDy preset name (NOISE_PRESETS) or null, or a list of preset names",
    )
    estimators: list[SweepEstimatorEntry] = Field(min_length=1, description="estimators, names or entries")
    repetitions: int = Field(DEFAULT_REPETITIONS, ge=1, le=100_000, description="Monte Carlo repetitions per cell")
    seed: int = Field(0, ge=0, description="repetition r uses noise seed seed + r")
    simulation: SimulationConfig = SimulationConfig()
    validation: SweepValidation = SweepValidation()
    data: SweepData | None = Field(None, description="closed-loop data generation (BIRDy's); default: open loop")
    initial_estimates: InitialEstimates | None = Field(
        None, description="BIRDy's initial estimates around the truth, each run on every cell; default: none"
    )

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, value):
        return safe_name(value, "sweep name")

    @field_validator("output")
    @classmethod
    def _output_is_a_file_name(cls, value):
        return None if value is None else safe_name(value, "sweep output folder")

    @field_validator("estimators", mode="before")
    @classmethod
    def _names_to_entries(cls, value):
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("excitations")
    @classmethod
    def _excitations(cls, value):
        if not value:
            raise ValueError("give at least one excitation (label: mapping or 'default')")
        for label, config in value.items():
            safe_name(label, "excitation label")
            excitation_or_default(config)
        return value

    @field_validator("noise", mode="before")
    @classmethod
    def _preset_list(cls, value):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return {name: name for name in value}
        return value

    @field_validator("noise")
    @classmethod
    def _noise_labels(cls, value):
        for label in value:
            safe_name(label, "noise preset label")
        return value

    @field_validator("robots")
    @classmethod
    def _distinct_robots(cls, value):
        dupes = repeated(value)
        if dupes:
            raise ValueError(f"robots appear twice: {dupes}")
        return value

    @model_validator(mode="after")
    def _unique_labels(self):
        check_unique_labels(self.estimators)
        for what, labels in (("excitation", list(self.excitations)), ("noise preset", list(self.noise))):
            dupes = repeated(labels)
            if dupes:
                raise ValueError(f"{what} labels differ only by case: {dupes}")
        if self.data is None:
            self._check_open_loop()
        else:
            self._check_closed_loop()
        return self

    def _check_open_loop(self) -> None:
        named = [label for label, noise in self.noise.items() if isinstance(noise, str)]
        if named:
            raise ValueError(
                f"noise preset '{named[0]}' names a BIRDy preset, which needs closed-loop data: add "
                "'data: {closed_loop: {}}', or give a noise mapping as in a scenario"
            )
        filtered = [e.display for e in self.estimators if e.filtered]
        if filtered:
            raise ValueError(
                f"estimator '{filtered[0]}': 'filtered: true' selects BIRDy's prefiltered closed-loop data; add "
                "'data: {closed_loop: {}}' or remove it"
            )

    def _check_closed_loop(self) -> None:
        from robotid_sim.sim.closed_loop_data import NOISE_PRESETS

        for label, noise in self.noise.items():
            if noise is not None and not (isinstance(noise, str) and noise in NOISE_PRESETS):
                raise ValueError(
                    f"noise preset '{label}': with data.closed_loop give a BIRDy preset name "
                    f"({', '.join(NOISE_PRESETS)}) or null, got {noise!r}"
                )
        # compared with the defaults, not with the fields given: the sweep's folder records every field
        unused = [f"validation.{k}" for k, v in SweepValidation() if getattr(self.validation, k) != v]
        unused += [
            f"simulation.{k}" for k, v in SimulationConfig() if k != "allow_large" and getattr(self.simulation, k) != v
        ]
        if unused:
            raise ValueError(
                f"'{unused[0]}' does not apply with data.closed_loop (the data come from the closed loop, the "
                "figures from its noise-free run; of 'simulation' only allow_large is read); remove it"
            )

    @property
    def folder_name(self) -> str:
        """The run folder's name under the output root."""
        return self.output or self.name

    @property
    def task_count(self) -> int:
        """(cell, estimator) tasks of the grid."""
        cells = len(self.robots) * len(self.excitations) * len(self.noise) * self.repetitions
        return cells * len(self.estimators) * self.initial_count

    @property
    def initial_count(self) -> int:
        """Runs of each estimator per cell: one per initial estimate (1 without initial estimates)."""
        return 1 if self.initial_estimates is None else self.initial_estimates.count


def check_finite(config: SweepConfig) -> None:
    """Refuse a NaN or infinite number anywhere in the sweep (excitation, noise and estimator mappings are free-form,
    so pydantic does not see them); the task hashes need finite numbers, and so does every stage.

    Raises:
        ConfigError: naming the field.
    """
    data = config.model_dump(mode="python")
    where = non_finite_entry(data)
    if where is not None:
        raise ConfigError(
            f"sweep '{config.name}': field '{where}' is not a finite number; give a finite value "
            "(.nan and .inf are not allowed)"
        )


def non_finite_entry(value: Any, where: str = "") -> str | None:
    """The dotted path of the first NaN or infinite float in ``value`` (nested mappings and lists), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else where
    if isinstance(value, dict):
        items = ((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{where}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for path, item in items:
        found = non_finite_entry(item, path)
        if found is not None:
            return found
    return None


def parse_sweep_config(data: Any, where: str = "sweep") -> SweepConfig:
    """Validate a sweep mapping; :class:`ConfigError` names each bad field and why."""
    return validate_mapping(SweepConfig, data, where)


def bundled_sweeps() -> dict[str, Path]:
    """Bundled sweep files (``scenarios/sweeps/*.yaml``) by stem."""
    import robotid_sim_scenarios

    root = Path(robotid_sim_scenarios.__file__).parent / "sweeps"
    return {p.stem: p for p in sorted(root.glob("*.yaml"))}


def resolve_sweep_path(name_or_path: str | Path) -> Path:
    """A sweep file from a path or a bundled sweep name (``birdy``, ``small``)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    bundled = bundled_sweeps()
    if str(name_or_path) in bundled:
        return bundled[str(name_or_path)]
    raise ConfigError(
        f"sweep '{name_or_path}' is neither a file nor a bundled sweep ({', '.join(bundled) or 'none installed'})"
    )


def load_sweep_config(path: str | Path) -> SweepConfig:
    """Read and validate a sweep YAML file (a path or a bundled sweep name); ``name`` defaults to the file's stem.

    Raises:
        ConfigError: a missing, unreadable, binary or malformed file, an alias bomb, or an invalid field.
    """
    return parse_sweep_config(*load_named_mapping(resolve_sweep_path(path), "sweep"))

"""The ``closed_loop:`` section of a scenario: checked before anything is simulated, run after
identification (SPEC §10, seed 000 Fig. 15).

:func:`prepare_closed_loop` resolves and checks everything the section needs: each controller is
registered and takes its options (built and reset on the robot once), each ``model`` (of a
controller, or the ``plant``) names an estimator label of the run, ``CAD`` (the robot's own
parameters) or a model file that loads for this robot, the reference is inside the joint limits,
and the run fits the time and memory limits. :func:`robotid_sim.control.comparison.run_closed_loop_plan`
then drives the plant with each controller, the labels replaced by the models just identified.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from robotid_sim.control import Plant
from robotid_sim.control.closed_loop import PYBULLET
from robotid_sim.errors import ConfigError, PluginError, RobotIdError
from robotid_sim.scenario.schema import CAD_LABEL, ClosedLoopConfig, repeated
from robotid_sim.sim.cost import check_closed_loop
from robotid_sim.sim.simulate import resolve_excitation

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A model named in the section: a ``label`` of this run (an estimator's, or ``CAD``), resolved once
    identified, or a ``model`` loaded from the file ``text`` names.

    Attributes:
        text: the option as written (label or path).
        label: the label it matched (as the scenario spells it), else None.
        model: the loaded model when ``text`` is a file, else None.
    """

    text: str
    label: str | None = None
    model: Any = None

    def get(self, models: dict[str, Any]) -> Any:
        """The model: the loaded one, or ``models[label.casefold()]``."""
        return self.model if self.label is None else models[self.label.casefold()]


@dataclasses.dataclass(frozen=True)
class ControllerPlan:
    """One controller of the section: its label, class, options, and the source of its ``model`` option."""

    label: str
    cls: type
    options: dict[str, Any]
    model: ModelSource | None = None
    takes_model: bool = False

    def build(self, models: dict[str, Any]):
        """The controller, its ``model`` option resolved against the run's models."""
        options = dict(self.options)
        if self.model is not None:
            options["model"] = self.model.get(models)
        return self.cls.from_options(**options)


@dataclasses.dataclass(frozen=True)
class ClosedLoopPlan:
    """The section, checked by :func:`prepare_closed_loop`.

    Attributes:
        config: the validated section.
        controllers: one :class:`ControllerPlan` per controller.
        plant: ``"pybullet"`` or the :class:`ModelSource` of the model plant.
        reference: the excitation tracked, checked against the joint limits.
        reference_text: how the reference was chosen, for the report.
        duration: seconds per controller.
    """

    config: ClosedLoopConfig
    controllers: list[ControllerPlan]
    plant: str | ModelSource
    reference: Any
    reference_text: str
    duration: float


def prepare_closed_loop(
    config: ClosedLoopConfig,
    robot,
    labels: list[str],
    cad_available: bool,
    default_reference: Any,
    base_dir: Path,
    allow_large: bool = False,
) -> ClosedLoopPlan:
    """Check the ``closed_loop`` section against the robot and the run's estimator ``labels``.

    Args:
        config: the validated section.
        robot: the robot of the run.
        labels: the run's estimator labels (a ``model`` may name one).
        cad_available: whether ``CAD`` (the robot's own parameters as a model) is available.
        default_reference: the excitation tracked when ``reference`` is not given, or None to use the
            robot's default excitation.
        base_dir: folder that relative model paths are resolved against.
        allow_large: lift the time limit (``simulation.allow_large``).

    Raises:
        ConfigError: naming the field: an unknown controller, an option it does not take or of a bad value,
            a model that is neither a label nor a model file of this robot, a reference outside the joint
            limits, a run above the limits.
    """
    known = {label.casefold(): label for label in labels}
    if cad_available:
        known[CAD_LABEL.casefold()] = CAD_LABEL
    source = _ModelSources(known, robot, base_dir)
    controllers = _controller_plans(config, robot, source)
    plant: str | ModelSource = PYBULLET
    if config.plant != PYBULLET:
        plant = source(config.plant, "closed_loop.plant")
        if not config.friction:
            raise ConfigError(
                "closed_loop.friction: false switches off the friction of the PyBullet plant; a model plant has the "
                "friction it was identified with (remove 'friction')"
            )
    reference, text = _reference(config, robot, default_reference)
    duration = float(reference.duration if config.duration is None else config.duration)
    check_closed_loop(robot.n_dof, duration, config.dt, len(controllers), allow_large=allow_large)
    reference.check_limits(robot, duration=min(duration, reference.duration))
    return ClosedLoopPlan(config, controllers, plant, reference, text, duration)


@dataclasses.dataclass(frozen=True)
class _ModelSources:
    """Resolves a ``model`` option: an estimator label of the run (or ``CAD``) in ``known`` (case-folded to the
    label as spelled), else a model file of ``robot`` relative to ``base_dir``."""

    known: dict[str, str]
    robot: Any
    base_dir: Path

    def __call__(self, value: Any, where: str) -> ModelSource:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must name an estimator label, '{CAD_LABEL}' or a model file, got {value!r:.80}")
        if value.casefold() in self.known:
            return ModelSource(value, label=self.known[value.casefold()])
        from robotid_sim.identification import load_model

        path = Path(value) if Path(value).is_absolute() else self.base_dir / value
        try:
            return ModelSource(value, model=load_model(path, robot=self.robot))
        except RobotIdError as exc:
            choices = ", ".join(f"'{label}'" for label in self.known.values()) or "none in this run"
            raise ConfigError(
                f"{where}: '{value}' is neither an estimator label ({choices}) nor a model file of this robot: {exc}"
            ) from None


def _controller_plans(config: ClosedLoopConfig, robot, source: _ModelSources) -> list[ControllerPlan]:
    """Each controller of the section: registered, its options and model resolved, built and reset on the robot
    once; labels distinct. ConfigError naming the entry otherwise."""
    from robotid_sim.plugins import get_controller

    controllers = []
    for k, entry in enumerate(config.controllers):
        where = f"closed_loop.controllers[{k}]"
        try:
            cls = get_controller(entry.name)
        except PluginError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        options = dict(entry.options)
        takes_model = "model" in cls.Options.model_fields
        if config.model is not None and takes_model and "model" not in options:
            options["model"] = config.model
        model = None
        if options.get("model") is not None:
            model = source(options["model"], f"{where}.options.model")
        trial = dict(options)
        if model is not None:  # a label is checked as the robot itself until the model is identified
            trial["model"] = model.model
        try:
            cls.from_options(**trial).reset(Plant(robot, config.dt))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        controllers.append(ControllerPlan(entry.display_label(options.get("model")), cls, options, model, takes_model))
    if config.model is not None and not any(c.model is not None for c in controllers):
        raise ConfigError(
            f"closed_loop.model: none of the controllers takes a model ({', '.join(c.label for c in controllers)}); "
            "add a model-based one (feedforward, computed_torque) or remove 'model'"
        )
    dupes = repeated([c.label for c in controllers])
    if dupes:
        raise ConfigError(
            f"closed_loop.controllers: {dupes} appear twice once 'model' is applied; give each a distinct 'label'"
        )
    return controllers


def _reference(config: ClosedLoopConfig, robot, default_reference: Any) -> tuple[Any, str]:
    """(the excitation tracked, how it was chosen for the report)."""
    if config.reference == "default":
        return resolve_excitation(robot, "default"), f"the default excitation of '{robot.name}'"
    if config.reference is not None:
        return (
            resolve_excitation(robot, config.reference),
            f"the {config.reference['type']} excitation of closed_loop.reference",
        )
    if default_reference is not None:
        return default_reference, "the validation trajectory"
    return resolve_excitation(robot, "default"), f"the default excitation of '{robot.name}'"

"""Controllers built on a dynamics model: :class:`Feedforward` and :class:`ComputedTorque` (SPEC §10,
seed 000 Eqs. 35–36).

Any model plugs into either: an identified model (any kind: ``predict_torque``, ``mass_matrix``,
``bias_torque``), a :class:`~robotid_sim.robot.Robot`, or a saved model's path, given as the
``model`` option. ``model=None`` uses the plant's own model (in PyBullet: the true robot). The
option is resolved against the :class:`~robotid_sim.control.Plant` in :meth:`reset`
(:func:`resolve_model`): a path is loaded with :func:`robotid_sim.load_model`, checked against the
plant's robot, and a model for other joints is refused, each with a :class:`ConfigError` naming
the controller and the option.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from robotid_sim.control.pid import PID
from robotid_sim.errors import ConfigError, RobotIdError
from robotid_sim.sim.tracking import (
    ComputedTorquePD,
    Controller,
    Gain,
    Plant,
    Reference,
    model_torque,
)

#: the description of the ``model`` option of the model-based controllers
MODEL_OPTION = "the model: an identified model, a Robot or a saved model's path; None: the plant's own model"


def resolve_model(value: Any, plant: Plant, controller: str, methods: tuple[str, ...] = ()) -> Any:
    """The model a model-based controller uses on ``plant``, from its ``model`` option.

    Args:
        value: None (the plant's own model), a model object (an identified model or a
            :class:`~robotid_sim.robot.Robot`), or the path of a saved model, loaded with
            :func:`robotid_sim.load_model` and checked against the plant's robot when the plant is one.
        plant: the plant the controller is reset with.
        controller: the controller's name, for messages.
        methods: methods the controller calls on the model besides its torque (``mass_matrix``, ...).

    Raises:
        ConfigError: naming the controller and the option: a model file that cannot be loaded,
            something that is not a model, a model without ``methods``, a model of other joints than the
            plant's, or, on a robot plant, a model identified on a robot of another structure
            (kinematics or friction law: ``check_structure``).
    """
    where = f"controller '{controller}': option 'model'"
    if value is None:
        return plant.model
    from robotid_sim.robot import Robot

    robot = plant.model if isinstance(plant.model, Robot) else None
    if isinstance(value, str | os.PathLike):
        from robotid_sim.identification import load_model

        try:
            model = load_model(value, robot=robot)
        except RobotIdError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    else:
        model = value
    if not hasattr(model, "n_dof") or not (hasattr(model, "inverse_dynamics") or hasattr(model, "predict_torque")):
        raise ConfigError(
            f"{where} must be an identified model, a Robot, the path of a saved model, or None (the plant's own "
            f"model), got {type(model).__name__}"
        )
    missing = [m for m in methods if not callable(getattr(model, m, None))]
    if missing:
        raise ConfigError(f"{where}: a {type(model).__name__} has no {', '.join(missing)}, which '{controller}' needs")
    if model.n_dof != plant.n_dof:
        raise ConfigError(f"{where}: the model has {model.n_dof} joints, the plant {plant.n_dof}")
    if robot is not None and model is not robot and callable(getattr(model, "check_structure", None)):
        try:
            model.check_structure(robot.structure())
        except RobotIdError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    names, plant_names = getattr(model, "joint_names", None), getattr(plant.model, "joint_names", None)
    if names is not None and plant_names is not None and list(names) != list(plant_names):
        raise ConfigError(
            f"{where}: the model's joints {list(names)} are not the plant's {list(plant_names)}; give a model "
            "identified on this robot"
        )
    return model


def describe_model(value: Any) -> Any:
    """A ``model`` option as JSON-able metadata: None, a path, ``{"robot": name}`` or
    ``{"kind": ..., "estimator": ...}`` of an identified model."""
    if value is None or isinstance(value, str | os.PathLike):
        return None if value is None else os.fspath(value)
    if hasattr(value, "kind") and hasattr(value, "estimator"):
        return {"kind": value.kind, "estimator": value.estimator}
    if hasattr(value, "name") and hasattr(value, "inverse_dynamics"):
        return {"robot": value.name}
    return type(value).__name__


class ModelOption(Controller):
    """Base of the controllers that take a ``model`` option (module docstring).

    The option is kept as :attr:`model_option`; :attr:`model` is the model it resolved to at the
    last :meth:`reset` (None before).
    """

    option_attributes: ClassVar[dict[str, str]] = {"model": "model_option"}
    #: methods the controller calls on its model besides its torque
    model_methods: ClassVar[tuple[str, ...]] = ()
    model_option: Any = None
    _model: Any = None

    @property
    def model(self) -> Any:
        """The model in use: the ``model`` option resolved against the plant by :meth:`reset`."""
        return self._model

    def reset(self, plant: Plant) -> None:
        super().reset(plant)
        self._model = resolve_model(self.model_option, plant, self.label, self.model_methods)

    def describe(self) -> dict:
        """``{"type": name, "model": ..., **options}`` with the model as :func:`describe_model` gives it."""
        return {**Controller.describe(self), "model": describe_model(self.model_option)}


class Feedforward(ModelOption, PID):
    """A model's torque at the reference + PID (seed 000 Eqs. 35–36):
    tau = τ̂(q_ref, qd_ref, qdd_ref) + kp e + ki ∫e dt + kd ė.

    τ̂ is the model's motor torque (``predict_torque`` of an identified model, ``inverse_dynamics``
    of a Robot: rigid body, rotor inertia and friction). Seed 000's Eq. 35 uses its Step I model
    (gravity and dry friction), Eq. 36 the complete Step III model; any identified model fits here.
    There is no separate gravity compensation: τ̂ holds gravity already.

    Args:
        model: the model (module docstring); None: the plant's own model.
        kp, ki, kd, integral_limit: the PID part, as :class:`~robotid_sim.control.pid.PID`'s.
    """

    name = "feedforward"
    gravity_compensation = False

    class Options(Controller.Options):
        model: Any = Field(None, description=MODEL_OPTION)
        kp: Gain = PID.Options.model_fields["kp"]
        ki: Gain = PID.Options.model_fields["ki"]
        kd: Gain = PID.Options.model_fields["kd"]
        integral_limit: Gain = PID.Options.model_fields["integral_limit"]

    def __call__(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        return model_torque(self._model, reference.q, reference.qd, reference.qdd) + self.feedback(q, qd, reference)


class ComputedTorque(ModelOption, ComputedTorquePD):
    """Computed torque on a model: tau = M̂(q) (qdd_ref + kd ė + kp e) + ĥ(q, qd).

    M̂ and ĥ are the model's ``mass_matrix`` and ``bias_torque`` (Coriolis, centrifugal, gravity,
    friction). On an exact model the error follows ë + kd ė + kp e = 0; the defaults are
    :class:`~robotid_sim.control.ComputedTorquePD`'s. With the simulated robot itself as the model
    (``model=None`` in PyBullet) the simulator realises the commanded acceleration exactly, as for
    ``computed_torque_pd``; with any other model the torque goes through the plant's dynamics.

    Args:
        model: the model (module docstring); None: the plant's own model.
        kp: position gain (1/s²), a scalar or one per joint.
        kd: velocity gain (1/s), a scalar or one per joint.
    """

    name = "computed_torque"
    model_methods = ("mass_matrix", "bias_torque")

    class Options(Controller.Options):
        model: Any = Field(None, description=MODEL_OPTION)
        kp: Gain = ComputedTorquePD.Options.model_fields["kp"]
        kd: Gain = ComputedTorquePD.Options.model_fields["kd"]

    def __call__(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        qdd = self.acceleration(t, q, qd, reference)
        q1 = q[None]
        return self._model.mass_matrix(q1)[0] @ qdd + self._model.bias_torque(q1, qd[None])[0]

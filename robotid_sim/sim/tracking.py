"""The controller interface the simulator drives, and its default tracking controller (SPEC §5, §10).

:class:`Plant`, :class:`Reference`, :class:`Controller` and :class:`AccelerationController`, and
:class:`ComputedTorquePD`, computed torque + PD, the controller :meth:`PyBulletSimulator.track
<robotid_sim.sim.pybullet_sim.PyBulletSimulator.track>` and :func:`~robotid_sim.sim.simulate` use by default.
They live in the simulation layer because the simulator drives them; :mod:`robotid_sim.control`
exports them with the other controllers (``from robotid_sim.control import Controller``), and its
closed-loop runs use them the same way.

A controller is a small object with options (keyword arguments with defaults, stored by the
constructor), :meth:`Controller.reset` called with the :class:`Plant` before a run, and
``controller(t, q, qd, reference) -> tau`` called once per control step with the measured state
and the reference at that step; ``tau`` is the motor torque (n,) (N·m, or N for prismatic
joints).

Two kinds:

- a **torque controller** subclasses :class:`Controller` and defines ``__call__``;
- an **acceleration controller** subclasses :class:`AccelerationController` and defines
  :meth:`~AccelerationController.acceleration`; its torque is the inverse dynamics of its model
  at the commanded acceleration. When that model is the simulated robot itself, the simulator
  realises the commanded acceleration exactly instead of going through a torque (computed
  torque on the true model, :meth:`robotid_sim.sim.PyBulletSimulator.track`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from pydantic import Field

from robotid_sim._json import jsonable
from robotid_sim.errors import ConfigError
from robotid_sim.hookspecs import Registrable
from robotid_sim.options import Options, option_values, validate_options

#: gains of computed torque + PD (``computed_torque_pd``, ``computed_torque``): ë + kd ė + kp e = 0 is a
#: critically damped error dynamics at 20 rad/s (kp in 1/s², kd in 1/s)
COMPUTED_TORQUE_KP = 400.0
COMPUTED_TORQUE_KD = 40.0


def model_torque(model: Any, q, qd, qdd) -> np.ndarray:
    """Motor torque (n,) of ``model`` at one state (q, qd, qdd), each (n,).

    Args:
        model: a :class:`~robotid_sim.robot.Robot` (its ``inverse_dynamics``: rigid body + rotor
            inertia + friction) or an identified model (its ``predict_torque``).
    """
    torque = model.inverse_dynamics if hasattr(model, "inverse_dynamics") else model.predict_torque
    return torque(np.asarray(q, float)[None], np.asarray(qd, float)[None], np.asarray(qdd, float)[None])[0]


@dataclass(frozen=True, eq=False)
class Plant:
    """What a controller controls, given to :meth:`Controller.reset` before a run.

    Attributes:
        model: the plant's dynamics model: the :class:`~robotid_sim.robot.Robot` (the truth, in
            the PyBullet simulator) or an identified model (anything with ``n_dof`` and
            ``inverse_dynamics(q, qd, qdd)`` or ``predict_torque(q, qd, qdd)``, batched (N, n)).
        dt: control period in seconds (the physics step in the simulator).
    """

    model: Any
    dt: float

    def __post_init__(self):
        if not hasattr(self.model, "n_dof") or not (
            hasattr(self.model, "inverse_dynamics") or hasattr(self.model, "predict_torque")
        ):
            raise ConfigError(
                f"a plant model must be a Robot or an identified model (n_dof and inverse_dynamics or "
                f"predict_torque), got {type(self.model).__name__}"
            )
        if not self.dt > 0:
            raise ConfigError(f"the plant's dt must be > 0 s, got {self.dt}")

    @property
    def n_dof(self) -> int:
        """Number of joints n."""
        return self.model.n_dof

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """Motor torque (n,) of the plant's model at one state, see :func:`model_torque`."""
        return model_torque(self.model, q, qd, qdd)

    def gravity_torque(self, q) -> np.ndarray:
        """Torque (n,) that holds the plant's model at rest at ``q`` (n,): gravity, plus the
        friction offset where the friction law has one."""
        zero = np.zeros(self.n_dof)
        return model_torque(self.model, q, zero, zero)


class Reference(NamedTuple):
    """The reference at one control step: position ``q``, velocity ``qd`` and acceleration
    ``qdd``, each (n,)."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray


#: the type of a gain option: a number for every joint, or one number per joint, stored as given (no
#: conversion, so that :meth:`Controller.describe` writes it as it was given) and checked against the
#: plant's joints by :func:`per_joint_gain` when the controller is reset
Gain = Any


def per_joint_gain(value, n: int, option: str, controller: str) -> np.ndarray:
    """A gain option as (n,) floats: a scalar applies to every joint.

    Raises:
        ConfigError: naming the controller and the option, for a wrong length or a gain that is
            negative or not finite.
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"controller '{controller}': option '{option}' must be a number or {n} numbers") from exc
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ConfigError(
            f"controller '{controller}': option '{option}' must be a scalar or have {n} values (one per joint), "
            f"got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ConfigError(f"controller '{controller}': option '{option}' must be finite and >= 0, got {arr.tolist()}")
    return arr


def flag_option(value, option: str, controller: str) -> bool:
    """A yes/no option as a bool.

    Raises:
        ConfigError: naming the controller and the option, for anything but True or False.
    """
    if not isinstance(value, bool | np.bool_):
        raise ConfigError(f"controller '{controller}': option '{option}' must be true or false, got {value!r:.80}")
    return bool(value)


class Controller(Registrable, ABC):
    """Base class of every controller.

    Subclasses set ``name`` (the name it is registered under) and declare their options as a nested
    pydantic class ``Options`` (a subclass of ``Controller.Options``, :mod:`robotid_sim.options`: one
    field per option, with its default and description); the base constructor validates the keyword
    options against it (an unknown option is a :class:`ConfigError` listing the valid ones) and stores
    each as an attribute of the same name, or of the name :attr:`option_attributes` gives. Values that
    depend on the plant (a gain per joint) are checked by :meth:`reset`, which prepares per-run state;
    ``__call__`` computes the motor torque.

    Attributes:
        plant: the :class:`Plant` given to the last :meth:`reset` (None before).
    """

    name: ClassVar[str] = ""
    #: the options (none here); a subclass declares ``class Options(Controller.Options)`` with its fields
    Options: ClassVar[type[Options]] = Options
    #: option -> the attribute it is stored under, where the two differ (a model-based controller keeps its
    #: ``model`` option as ``model_option``, and ``model`` is the model it resolved against the plant)
    option_attributes: ClassVar[dict[str, str]] = {}
    # registered through register_controllers under ``name`` (robotid_sim.hookspecs.Registrable)
    registry_hook = "register_controllers"
    registry_base = "robotid_sim.control.Controller"
    plant: Plant | None = None

    @property
    def label(self) -> str:
        """``name``, or the class name of an unregistered controller (used in messages)."""
        return self.name or type(self).__name__

    def __init__(self, **options: Any) -> None:
        validated = validate_options("controller", self.label, type(self).Options, options)
        for key, value in option_values(validated).items():
            setattr(self, self.option_attributes.get(key, key), value)

    def get_params(self) -> dict:
        """The options this controller was configured with, in the order ``Options`` declares them."""
        return {k: getattr(self, self.option_attributes.get(k, k)) for k in type(self).Options.model_fields}

    @classmethod
    def from_options(cls, **options) -> Controller:
        """Build from scenario options; an unknown option raises :class:`ConfigError` listing valid ones."""
        return cls(**options)

    def describe(self) -> dict:
        """JSON-able description for dataset metadata: ``{"type": name, **options}``."""
        return {"type": self.label, **jsonable(self.get_params())}

    def reset(self, plant: Plant) -> None:
        """Prepare a run on ``plant``: the base class only keeps it as :attr:`plant`.

        Subclasses that resolve options against the plant (per-joint gains) or hold state
        (integrators, filters) override this and call ``super().reset(plant)``.
        """
        self.plant = plant

    @abstractmethod
    def __call__(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        """Motor torque (n,) at time ``t`` (s) for the measured state ``q``, ``qd`` (n,) and the
        :class:`Reference` at this step."""


class AccelerationController(Controller):
    """A controller that commands a joint acceleration; its torque is the inverse dynamics of
    :attr:`model` at that acceleration.

    Subclasses define :meth:`acceleration`. If :attr:`model` is the simulated robot itself,
    :meth:`robotid_sim.sim.PyBulletSimulator.track` realises the commanded acceleration exactly
    (Bullet receives its own inverse dynamics at it) and calls :meth:`acceleration_lists`;
    otherwise the controller is used through ``__call__`` like a torque controller. A
    model-based controller that takes an identified model as an option overrides :attr:`model`
    to return it.
    """

    @property
    def model(self) -> Any:
        """The model whose inverse dynamics turn the commanded acceleration into a torque: the
        plant's model."""
        return self.plant.model

    @abstractmethod
    def acceleration(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        """Commanded joint acceleration (n,) for the state ``q``, ``qd`` (n,) and the
        :class:`Reference` at time ``t``."""

    def acceleration_lists(
        self,
        t: float,
        q: list[float],
        qd: list[float],
        q_ref: list[float],
        qd_ref: list[float],
        qdd_ref: list[float],
    ) -> Sequence[float]:
        """:meth:`acceleration` on Python lists, as the simulator's step loop holds them.

        The default converts to arrays and calls :meth:`acceleration`; a controller whose
        arithmetic is a few operations per joint overrides it with plain Python arithmetic,
        which costs less than numpy per step for a handful of joints (the loop runs ~10⁵ steps).
        """
        reference = Reference(np.array(q_ref), np.array(qd_ref), np.array(qdd_ref))
        return self.acceleration(t, np.array(q), np.array(qd), reference)

    def __call__(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        """Motor torque (n,): :attr:`model`'s inverse dynamics at (q, qd, :meth:`acceleration`)."""
        return model_torque(self.model, q, qd, self.acceleration(t, q, qd, reference))


class ComputedTorquePD(AccelerationController):
    """Computed torque + PD: qdd_cmd = qdd_ref + kd (qd_ref - qd) + kp (q_ref - q).

    On the plant's own model this linearises the arm exactly, so every joint's error follows
    ë + kd ė + kp e = 0; the defaults give a critically damped 20 rad/s error dynamics. In the
    PyBullet simulator it is computed torque on the true model: Bullet realises qdd_cmd exactly.

    Args:
        kp: position gain (1/s²), a scalar or one per joint.
        kd: velocity gain (1/s), a scalar or one per joint.
    """

    name = "computed_torque_pd"

    class Options(Controller.Options):
        kp: Gain = Field(COMPUTED_TORQUE_KP, description="position gain (1/s²), a scalar or one per joint")
        kd: Gain = Field(COMPUTED_TORQUE_KD, description="velocity gain (1/s), a scalar or one per joint")

    def reset(self, plant: Plant) -> None:
        super().reset(plant)
        self._kp = per_joint_gain(self.kp, plant.n_dof, "kp", self.label).tolist()
        self._kd = per_joint_gain(self.kd, plant.n_dof, "kd", self.label).tolist()
        self._joints = range(plant.n_dof)

    def acceleration(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        return np.array(self.acceleration_lists(t, q, qd, reference.q, reference.qd, reference.qdd))

    def acceleration_lists(self, t, q, qd, q_ref, qd_ref, qdd_ref) -> list[float]:
        # per joint in plain Python, cheaper than numpy for a few joints; the recorded data
        # depend bit for bit on this order of the operations
        kp, kd = self._kp, self._kd
        return [qdd_ref[i] + kd[i] * (qd_ref[i] - qd[i]) + kp[i] * (q_ref[i] - q[i]) for i in self._joints]

    def describe(self) -> dict:
        """``{"type": "computed_torque_true_model_pd", "kp": ..., "kd": ...}``, the metadata
        datasets have carried since before controllers were pluggable (gains as floats, or lists
        of floats per joint)."""

        def gain(value):
            arr = np.asarray(value, dtype=float)
            return float(arr) if arr.ndim == 0 else arr.tolist()

        return {"type": "computed_torque_true_model_pd", "kp": gain(self.kp), "kd": gain(self.kd)}

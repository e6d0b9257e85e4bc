"""Stepping identified models in the envs: the integrator, and parameters drawn from a model's covariance.

**Integrator.** :func:`~robotid_sim.dynamics.forward.semi_implicit_euler` is the scheme PyBullet's
multibody world uses at each ``stepSimulation`` (velocity first, then position with the new
velocity), so an identified env stepped at PyBullet's time step with the true parameters follows
PyBullet's trajectory to rounding. Batched over copies: one forward-dynamics call per physics
substep for all of them.

**Compiled step.** For a model linear in its parameters (:class:`CopyParameters`, ``compiled``: numba
present, the friction law one of :data:`FRICTION_CODES`, no coupled drives), :meth:`CopyParameters.step` makes a
whole control step of every copy one call of :func:`robotid_sim.dynamics.crba_kernels.step_per_copy`: all
substeps of the same semi-implicit Euler over the same CRBA + RNEA + LU, friction and rotor inertia
included, on work arrays allocated once. ``IdentifiedArm-v0`` steps this way (its trajectory equals the
Python integration to rounding); other models (nonlinear ones: feature libraries, Lagrangian and
residual networks) keep :func:`~robotid_sim.dynamics.forward.semi_implicit_euler` over their
``forward_dynamics``.

**Parameter draws** (``parameter_draws="covariance"``): at every reset the identified
parameters are drawn from N(θ̂, s²·Σ), Σ the model's covariance and s the
``parameter_draw_scale``: domain randomisation from the identification's own uncertainty. Σ may
be singular (a parameter the data fixed exactly): draws use its symmetric square root (negative
eigenvalues from rounding clipped to 0). Only models linear in their parameters
(:class:`~robotid_sim.identification.models.linear.LinearParameterModel`: OLS, WLS, IRLS, ...) with a
covariance can be drawn. Each copy's draw becomes a full standard parameter vector
(:meth:`~robotid_sim.identification.models.linear.LinearParameterModel.standard_equivalent`), and
:class:`CopyParameters` steps all copies, each with its own parameters, through the compiled
per-sample CRBA + RNEA + LU of :mod:`robotid_sim.dynamics.crba_kernels` in one call.
"""

from __future__ import annotations

import numpy as np

from robotid_sim.dynamics import crba
from robotid_sim.dynamics.friction import (
    CoulombViscous,
    CoulombViscousNoOffset,
    NoFriction,
    NonlinearExponent,
    NonlinearStribeck,
    Stribeck,
)
from robotid_sim.errors import ConfigError, DataError

#: the friction laws the compiled stepping kernel knows, by its code (``crba_kernels._friction``)
FRICTION_CODES = {
    NoFriction: 0,
    CoulombViscous: 1,
    NonlinearExponent: 2,
    Stribeck: 3,
    NonlinearStribeck: 4,
    CoulombViscousNoOffset: 5,
}


class CovarianceDraws:
    """Draws of a linear model's parameters from N(θ̂, scale²·Σ) (see the module docstring).

    Raises:
        ConfigError: the model is not linear in its parameters or has no covariance.
    """

    def __init__(self, model, scale: float = 1.0):
        from robotid_sim.identification.models import LinearParameterModel

        what = f"this {model.kind} model" + (f" (estimator '{model.estimator}')" if model.estimator else "")
        if not isinstance(model, LinearParameterModel):
            raise ConfigError(
                f"parameter_draws='covariance' needs a model linear in its parameters (kind 'base_linear' or "
                f"'standard_linear', e.g. from ols, wls, irls); {what} is not"
            )
        if model.covariance is None:
            raise ConfigError(
                f"parameter_draws='covariance' needs the model's parameter covariance, and {what} has none: "
                "identify with an estimator that gives one (ols, wls, irls), or leave parameter_draws=None"
            )
        self.model = model
        self.scale = float(scale)
        w, V = np.linalg.eigh(np.asarray(model.covariance, float))
        self._root = V * np.sqrt(np.clip(w, 0.0, None))  # root @ root.T == covariance

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """Standard parameters (p,) of one draw of the model's parameters."""
        z = rng.standard_normal(len(self.model.values))
        values = np.asarray(self.model.values) + self.scale * (self._root @ z)
        return self.model.with_values(values).standard_equivalent()


class CopyParameters:
    """Standard parameters per copy of a linear model's robot, and the forward dynamics of all copies.

    Args:
        model: a :class:`~robotid_sim.identification.models.linear.LinearParameterModel`.
        copies: B.

    Every copy starts with the model's own parameters; :meth:`set` gives copy i its draw.

    Attributes:
        compiled: True where :meth:`step` can step the copies in one compiled call (numba is there, the
            robot's friction law is one of :data:`FRICTION_CODES` and it has no coupled drives: a robot with some
            steps each copy's :meth:`~robotid_sim.robot.Robot.forward_dynamics`, which has them).
        ok: with ``compiled``, the (B,) result buffer of :meth:`step`.
    """

    def __init__(self, model, copies: int):
        robot = model.equivalent_robot
        n = robot.n_dof
        self._robot = robot
        self._chain = crba.pack_chain(robot.joints)
        self._gravity = np.ascontiguousarray(robot.gravity, dtype=float)
        self._slices = robot.parameter_slices()
        k = len(robot.friction.suffixes)
        self.inertials = np.empty((copies, n, 10))
        self.rotor = np.zeros((copies, n))
        self.friction = np.empty((copies, n, k))
        self._coupled = [robot] * copies if robot.coupling else None  # each copy's robot, coupled drives included
        for i in range(copies):
            self.set(i, model.standard_equivalent())
        self.compiled = _step_kernel() is not None and type(robot.friction) in FRICTION_CODES and not robot.coupling
        if self.compiled:
            friction = robot.friction
            ones = np.ones(n)
            self._law = (
                FRICTION_CODES[type(friction)],
                self.friction,
                np.ascontiguousarray(getattr(friction, "alpha", ones), dtype=float),
                np.ascontiguousarray(getattr(friction, "vs", ones), dtype=float),
                float(friction.sign_smoothing),
            )
            shapes = ((n, 3, 3), (n, 3), (n, 10), (n, 3), (n, 3), (n, 3), (n, n)) + ((n,),) * 5
            self._work = tuple(np.zeros(shape) for shape in shapes)
            self.ok = np.ones(copies, dtype=np.bool_)
            c = self._chain
            self._robot_arrays = (*c.kernel_arrays, self.inertials)
            self._robot_arrays += (self._gravity, self.rotor)

    def set(self, i: int, theta: np.ndarray) -> None:
        """Give copy ``i`` the standard parameters ``theta`` (p,)."""
        n = self._robot.n_dof
        self.inertials[i] = theta[self._slices["inertial"]].reshape(n, 10)
        if len(self._slices["rotor"]):
            self.rotor[i] = theta[self._slices["rotor"]]
        self.friction[i] = theta[self._slices["friction"]].reshape(n, -1)
        if self._coupled is not None:
            self._coupled[i] = self._robot.with_parameters(theta)

    def forward(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(qdd, ok)`` (B, n), (B,) of every copy with its own parameters; ok False where M is singular."""
        q, qd = np.ascontiguousarray(q), np.ascontiguousarray(qd)
        if self._coupled is not None:
            return _forward_each(self._coupled, q, qd, tau)
        if self.compiled:  # the friction of step(), to the last bit
            friction = np.empty_like(qd)
            crba.kernels().friction_per_copy(*self._law, qd, friction)
        else:
            friction = np.einsum("bjk,bjk->bj", self._robot.friction.columns(qd), self.friction)
        rhs = np.ascontiguousarray(tau - friction)
        qdd = np.empty_like(q)
        ok = np.empty(q.shape[0], dtype=np.bool_)
        c = self._chain
        kernel = _per_copy_kernel()
        if kernel is not None:
            args = (*c.kernel_arrays, self.inertials, self._gravity)
            kernel(*args, self.rotor, q, qd, rhs, qdd, ok)
        else:  # no numba: one call per copy
            for i in range(q.shape[0]):
                try:
                    qdd[i] = crba.forward_dynamics(
                        c, self.inertials[i], self._gravity, q[i], qd[i], rhs[i], self.rotor[i]
                    )[0]
                    ok[i] = True
                except DataError:
                    ok[i] = False
        qdd[~ok] = 0.0
        return qdd, ok

    def step(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray, h: float, substeps: int) -> np.ndarray:
        """One control step of every copy in one compiled call (only where :attr:`compiled`), in place.

        The same steps as :func:`~robotid_sim.dynamics.forward.semi_implicit_euler` over :meth:`forward`
        (friction and rotor inertia included), all substeps inside
        :func:`robotid_sim.dynamics.crba_kernels.step_per_copy`, on preallocated work arrays.

        Args:
            q, qd: (B, n) float C-contiguous state, advanced in place.
            tau: (B, n) motor torque, held over the substeps.
            h: physics step (s).
            substeps: physics steps per control step.

        Returns:
            ok (B,) (a buffer of this object, overwritten by the next call): False for copies whose mass
            matrix was singular or whose state stopped being finite; those keep their starting state.
        """
        _step_kernel()(*self._robot_arrays, self._law, q, qd, tau, float(h), int(substeps), self.ok, self._work)
        return self.ok


def _forward_each(robots: list, q: np.ndarray, qd: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(qdd, ok)`` of :meth:`CopyParameters.forward` by each copy's own robot (one call per copy)."""
    qdd = np.zeros_like(q)
    ok = np.ones(q.shape[0], dtype=np.bool_)
    for i, robot in enumerate(robots):
        try:
            qdd[i] = robot.forward_dynamics(q[i], qd[i], tau[i])[0]
        except DataError:
            ok[i] = False
    return qdd, ok


def _step_kernel():
    """:func:`robotid_sim.dynamics.crba_kernels.step_per_copy` (cached on disk), or None without numba."""
    kernels = crba.kernels()
    return None if kernels is None else kernels.step_per_copy


def _per_copy_kernel():
    """:func:`robotid_sim.dynamics.crba_kernels.forward_per_copy` (cached on disk), or None without numba."""
    from robotid_sim.dynamics import crba

    kernels = crba.kernels()
    return None if kernels is None else kernels.forward_per_copy

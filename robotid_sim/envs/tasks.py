"""The tasks of the arm environments: what is drawn at reset and what the target is at time t.

A task is drawn per episode from the env's random generator and held as a flat parameter row,
so that a vector env keeps the tasks of all its copies in one array (B, size) and evaluates
their targets in one call. Both tasks start at rest.

- ``reach``: start pose and goal pose drawn uniformly inside the position bounds with
  :data:`REACH_MARGIN` of the range kept free at each end; the target is the goal at zero velocity.
- ``track``: a random finite Fourier series (seed 001 Eq. 10, in the form of
  :mod:`robotid_sim.excitation.fourier`: q(0) = q0, zero velocity and acceleration at t = 0)
  of :data:`TRACK_HARMONICS` harmonics of :data:`TRACK_BASE_FREQUENCY`, its coefficients drawn
  in the start/stop-constrained coordinates and scaled into the limits shrunk by
  :data:`TRACK_MARGIN` (:func:`~robotid_sim.excitation.fourier.fit_coefficients_into_limits`);
  the arm starts at q0 at rest and the target is the reference position and velocity at the
  current time (periodic, so defined for any episode length).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from robotid_sim.envs.spec import ArmSpec
from robotid_sim.excitation.base import JointLimits
from robotid_sim.excitation.fourier import fit_coefficients_into_limits, harmonic_pulsations, start_stop_basis

#: fraction of each joint's range kept free at both ends for reach start and goal poses
REACH_MARGIN = 0.1

#: track references: harmonics, base frequency (Hz; period 4 s), fraction of each limit kept free
TRACK_HARMONICS = 3
TRACK_BASE_FREQUENCY = 0.25
TRACK_MARGIN = 0.2
#: grid points per harmonic on which the reference's peaks are found when it is scaled into the limits
TRACK_POINTS_PER_HARMONIC = 64


class Task(ABC):
    """A task of an arm env: draws an episode (:meth:`sample`) and gives its target (:meth:`target`).

    Attributes:
        spec: the arm's :class:`~robotid_sim.envs.spec.ArmSpec`.
        size: length of the parameter row of one episode.
    """

    name: ClassVar[str]
    size: int

    def __init__(self, spec: ArmSpec):
        self.spec = spec

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One episode: start pose (n,), start velocity (n,) and the task's parameter row (size,)."""

    @abstractmethod
    def target(self, params: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Target position and velocity, each (B, n), of B episodes ``params`` (B, size) at times ``t`` (B,) in s."""


class Reach(Task):
    """Reach a goal pose drawn at reset; the parameter row is the goal (n,)."""

    name = "reach"

    def __init__(self, spec: ArmSpec):
        super().__init__(spec)
        self.size = spec.n_dof
        free = REACH_MARGIN * spec.position_range
        self._low, self._high = spec.lower + free, spec.upper - free

    def sample(self, rng):
        q0 = rng.uniform(self._low, self._high)
        goal = rng.uniform(self._low, self._high)
        return q0, np.zeros_like(q0), goal

    def target(self, params, t):
        return params, np.zeros_like(params)


class Track(Task):
    """Track a random Fourier reference; the parameter row is ``[q0 (n), a (n·L), b (n·L)]``."""

    name = "track"

    def __init__(self, spec: ArmSpec):
        super().__init__(spec)
        n, L = spec.n_dof, TRACK_HARMONICS
        self.size = n + 2 * n * L
        self.omega_f = 2 * np.pi * TRACK_BASE_FREQUENCY
        self._w = harmonic_pulsations(self.omega_f, L)
        self._basis = start_stop_basis(L)
        self._limits = JointLimits(
            spec.lower, spec.upper, spec.velocity_limit, spec.acceleration_limit, spec.joint_names
        ).shrunk(TRACK_MARGIN)

    def sample(self, rng):
        n, L = self.spec.n_dof, TRACK_HARMONICS
        Na, Nb = self._basis
        x = rng.uniform(-1.0, 1.0, size=(n, 2, L - 1))
        centre = rng.uniform(0.0, 1.0, size=n)
        q0, a, b, _ = fit_coefficients_into_limits(
            x[:, 0] @ Na.T,
            x[:, 1] @ Nb.T,
            self.omega_f,
            self._limits,
            centre=centre,
            points_per_harmonic=TRACK_POINTS_PER_HARMONIC,
        )
        return q0, np.zeros(n), np.concatenate([q0, a.ravel(), b.ravel()])

    def target(self, params, t):
        """Seed 001 Eq. 10 at one time per episode (the fourier module evaluates one time grid for all)."""
        n, L = self.spec.n_dof, TRACK_HARMONICS
        B = params.shape[0]
        q0 = params[:, :n]
        a = params[:, n : n + n * L].reshape(B, n, L)
        b = params[:, n + n * L :].reshape(B, n, L)
        phase = np.asarray(t, float).reshape(B, 1) * self._w
        s, c = np.sin(phase)[:, None, :], np.cos(phase)[:, None, :]
        q = q0 + np.sum(a / self._w * s - b / self._w * (c - 1.0), axis=-1)
        qd = np.sum(a * c + b * s, axis=-1)
        return q, qd


TASKS: dict[str, type[Task]] = {cls.name: cls for cls in (Reach, Track)}


def make_task(spec: ArmSpec) -> Task:
    """The task named by ``spec.options.task``."""
    return TASKS[spec.options.task](spec)

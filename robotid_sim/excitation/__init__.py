"""Excitation trajectories (SPEC §6): what the arm is asked to follow while data is recorded.

- :class:`FourierExcitation` — finite Fourier series with start/stop constraints (seed 001
  Eq. 10–11), :func:`optimize_fourier` minimising cond(base regressor) (Eq. 12);
- :class:`SequentialSine` — one joint at a time, distal to base (seed 003 §4);
- :class:`QuinticPolynomial` — fifth-order rest-to-rest moves through waypoints, optional
  sinusoids on the prismatic joints (seed 004 Eq. 39);
- :class:`StepwiseExcitation` — static, constant-velocity and variable-velocity segments for
  stepwise SINDy (seed 000 §3);
- :func:`excitation_from_config` — any of them from a YAML-style mapping.

Every excitation evaluates in closed form, ``evaluate(t) -> (q, qd, qdd)`` each (N, n),
checks itself against a robot's limits (``check_limits``), labels its time ranges
(``segments``) and describes itself as JSON (``describe``).
"""

from robotid_sim.excitation.base import (
    STEPWISE_LABELS,
    Concatenation,
    Excitation,
    Hold,
    JointLimits,
    Segment,
    concatenate,
    rest_to_rest_duration,
    time_grid,
)
from robotid_sim.excitation.fourier import FourierExcitation, project_start_stop
from robotid_sim.excitation.from_config import EXCITATION_BUILDERS, excitation_from_config
from robotid_sim.excitation.optimize import OptimizationResult, condition_number, optimize_fourier
from robotid_sim.excitation.polynomial import QuinticPolynomial, minimum_durations, prismatic_sines
from robotid_sim.excitation.sequential import SequentialSine, SingleJointSine
from robotid_sim.excitation.stepwise import SLOW_SPEED, ConstantVelocity, StepwiseExcitation

__all__ = [
    "EXCITATION_BUILDERS", "SLOW_SPEED", "STEPWISE_LABELS", "Concatenation", "ConstantVelocity",
    "Excitation", "FourierExcitation", "Hold", "JointLimits", "OptimizationResult",
    "QuinticPolynomial", "Segment", "SequentialSine", "SingleJointSine", "StepwiseExcitation",
    "concatenate", "condition_number", "excitation_from_config", "minimum_durations",
    "optimize_fourier", "prismatic_sines", "project_start_stop", "rest_to_rest_duration",
    "time_grid",
]

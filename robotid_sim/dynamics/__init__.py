"""Dynamics core: batched Newton–Euler regressor, base parameters, friction, forward dynamics."""

from robotid_sim.dynamics.base_parameters import BaseParameters, compute_base_parameters
from robotid_sim.dynamics.forward import forward_dynamics_from_inverse, mass_matrix_from_inverse
from robotid_sim.dynamics.friction import (
    CoulombViscous,
    CoulombViscousNoOffset,
    FrictionModel,
    NoFriction,
    NonlinearExponent,
    NonlinearStribeck,
    Stribeck,
    friction_from_dict,
)
from robotid_sim.dynamics.regressor import RegressorChain, reference_regressor

__all__ = [
    "BaseParameters",
    "CoulombViscous",
    "CoulombViscousNoOffset",
    "FrictionModel",
    "NoFriction",
    "NonlinearExponent",
    "NonlinearStribeck",
    "RegressorChain",
    "Stribeck",
    "compute_base_parameters",
    "forward_dynamics_from_inverse",
    "friction_from_dict",
    "mass_matrix_from_inverse",
    "reference_regressor",
]

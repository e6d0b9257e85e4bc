"""Identification: the problem given to estimators, the identified model, metrics."""

from robotid_sim.identification.estimator import Estimator
from robotid_sim.identification.least_squares import LeastSquaresFit, per_joint_variance, weighted_least_squares
from robotid_sim.identification.model import IdentifiedModel, load_model, register_model_kind
from robotid_sim.identification.problem import IdentificationProblem

__all__ = [
    "Estimator", "IdentificationProblem", "IdentifiedModel", "LeastSquaresFit", "load_model",
    "per_joint_variance", "register_model_kind", "weighted_least_squares",
]

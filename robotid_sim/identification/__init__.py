"""Identification: the problem given to estimators, the estimator interface, identified models, metrics."""

from robotid_sim.identification.closed_loop_model import (
    ClosedLoopSimulation,
    ClosedLoopSpec,
    closed_loop_of,
    simulate_closed_loop,
    standard_of_base,
)
from robotid_sim.identification.estimator import Estimator, EstimatorOptions, EstimatorSpec
from robotid_sim.identification.features import FeatureLibrary
from robotid_sim.identification.least_squares import (
    JointWeightedLeastSquares,
    LeastSquaresFit,
    per_group_joint_variance,
    per_joint_variance,
    weighted_least_squares,
)
from robotid_sim.identification.model import History, IdentifiedModel, load_model
from robotid_sim.identification.models import (
    BaseParameterModel,
    FeatureLibraryModel,
    LagrangianFeatureModel,
    LinearParameterModel,
    MLPCorrection,
    ResidualModel,
    StandardParameterModel,
)
from robotid_sim.identification.problem import IdentificationProblem, JointRows

__all__ = [
    "BaseParameterModel",
    "ClosedLoopSimulation",
    "ClosedLoopSpec",
    "Estimator",
    "EstimatorOptions",
    "EstimatorSpec",
    "FeatureLibrary",
    "FeatureLibraryModel",
    "History",
    "IdentificationProblem",
    "IdentifiedModel",
    "JointRows",
    "LagrangianFeatureModel",
    "LeastSquaresFit",
    "LinearParameterModel",
    "MLPCorrection",
    "ResidualModel",
    "StandardParameterModel",
    "closed_loop_of",
    "load_model",
    "per_joint_variance",
    "simulate_closed_loop",
    "standard_of_base",
    "per_group_joint_variance",
    "JointWeightedLeastSquares",
    "weighted_least_squares",
]

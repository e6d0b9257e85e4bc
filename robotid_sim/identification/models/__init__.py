"""The built-in kinds of identified model (SPEC §8), one kind per module.

============================  ==================  ==============================================
class                         ``kind``            what it is
============================  ==================  ==============================================
:class:`BaseParameterModel`   ``base_linear``     linear in the base parameters (OLS, WLS, IRLS,
                                                  Adaline, Hopfield, EKF)
:class:`StandardParameterModel` ``standard_linear`` linear in the full standard parameters (a
                                                  physically consistent set from LMI-WLS); its
                                                  base values ``K θ`` serve the metrics
:class:`FeatureLibraryModel`  ``feature_library`` linear in a library of features of q, qd, qdd
                                                  (SINDy): no URDF needed
:class:`ResidualModel`        ``residual``        any model plus a learned correction (a small
                                                  MLP; the semiparametric model)
:class:`LagrangianFeatureModel` ``lagrangian_features`` A(q) (symmetric by construction), B and C
                                                  from its Christoffel symbols, G from a
                                                  potential, friction (seed 002, auto_features)
============================  ==================  ==============================================

Modules: :mod:`~robotid_sim.identification.models.linear` (the linear-parameter base and its two
kinds), :mod:`~robotid_sim.identification.models.feature_library`,
:mod:`~robotid_sim.identification.models.residual` (with the MLP it predicts with) and
:mod:`~robotid_sim.identification.models.lagrangian`. Models linear in inertial parameters get their
mass matrix and bias from the recursive algorithms of :class:`~robotid_sim.robot.Robot`; the generic
construction from n + 1 torque predictions remains only for models that are merely linear in qdd.
"""

from robotid_sim.identification.model import IdentifiedModel
from robotid_sim.identification.models.feature_library import FeatureLibraryModel
from robotid_sim.identification.models.lagrangian import LagrangianFeatureModel
from robotid_sim.identification.models.linear import BaseParameterModel, LinearParameterModel, StandardParameterModel
from robotid_sim.identification.models.residual import MLPCorrection, ResidualModel

#: the built-in model kinds, registered by the built-in plugin ``robotid_sim_plugins.core``
BUILTIN_MODEL_KINDS: tuple[type[IdentifiedModel], ...] = (
    BaseParameterModel,
    StandardParameterModel,
    FeatureLibraryModel,
    ResidualModel,
    LagrangianFeatureModel,
)

__all__ = [
    "BUILTIN_MODEL_KINDS",
    "BaseParameterModel",
    "FeatureLibraryModel",
    "LagrangianFeatureModel",
    "LinearParameterModel",
    "MLPCorrection",
    "ResidualModel",
    "StandardParameterModel",
]

"""The estimator interface (SPEC §8): scikit-learn-like, with a statsmodels-like result.

An estimator's constructor only stores options; the work happens in :meth:`Estimator.fit`,
which returns a separate :class:`~robotid_sim.identification.IdentifiedModel`.

Options are validated by the one option mechanism (:mod:`robotid_sim.options`): an estimator declares
them as a nested class ``Options`` (a subclass of :class:`EstimatorOptions`, with defaults, ``Field``
constraints and descriptions) and does not write ``__init__``: the base constructor validates the
keyword options and stores each as an attribute. Every problem is one
:class:`~robotid_sim.errors.ConfigError` line naming the estimator, the option and what is allowed.

An estimator that uses another (semiparametric on a rigid-body fit, two-loop around IRLS) takes
it as an option of type :class:`EstimatorSpec`, written ``{"name": "irls", "options": {...}}``
in scenarios and JSON, and builds it with :meth:`EstimatorSpec.build` inside ``fit``.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from robotid_sim.errors import IdentificationError
from robotid_sim.hookspecs import Registrable
from robotid_sim.identification.closed_loop_model import closed_loop_of
from robotid_sim.identification.model import IdentifiedModel
from robotid_sim.identification.problem import IdentificationProblem
from robotid_sim.options import Options, option_values, validate_options


class EstimatorOptions(Options):
    """Base of the estimators' ``Options`` classes (:class:`robotid_sim.options.Options`, named for estimators)."""


class EstimatorSpec(BaseModel):
    """Another estimator, as an option: ``{"name": "irls", "options": {"k_sigma": 3}}``."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="registered estimator name")
    options: dict[str, Any] = Field(default_factory=dict, description="that estimator's options")

    def build(self) -> Estimator:
        """The estimator instance (looked up in the plugin registry, options validated)."""
        from robotid_sim.plugins import get_estimator

        return get_estimator(self.name).from_options(**self.options)


class Estimator(Registrable):
    """Base class. Subclasses set ``name``, their ``Options`` and ``_fit``.

    Class attributes:
        name: the registered name (``"ols"``).
        Options: the pydantic options model (:class:`EstimatorOptions`; the base has no options).
        biased: True for an estimator that does not recover the exact parameters from noise-free
            data (a regularised or sparse one); :func:`robotid_sim.testing.check_estimator` then
            skips that check.
        streams_regressor: True for an estimator that never stacks the base regressor (it fits
            from :meth:`IdentificationProblem.least_squares`, never calls ``base_regressor()``); a
            scenario run's memory budget then counts no stacked regressor for it.
        needs_closed_loop: True for an estimator that re-runs the loop the data was recorded in (IDIM-IV, DIDIM,
            CLOE, CLIE: :mod:`robotid_sim.identification.closed_loop_model`); :meth:`fit` refuses data without
            ``metadata['closed_loop']`` in one line before any work.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[EstimatorOptions]] = EstimatorOptions
    biased: ClassVar[bool] = False
    streams_regressor: ClassVar[bool] = False
    needs_closed_loop: ClassVar[bool] = False

    def __init__(self, **options):
        validated = validate_options("estimator", self.name, type(self).Options, options)
        for key, value in option_values(validated).items():
            setattr(self, key, value)

    def given_params(self) -> dict:
        """The options this estimator was configured with, as plain JSON-able data."""
        model = type(self).Options
        return model.model_construct(**{k: getattr(self, k) for k in model.model_fields}).model_dump(mode="json")

    def get_params(self) -> dict:
        """The options; after :meth:`fit`, those the estimator resolved from the data show the value that ran.

        An option left to a preset (``None``, ``"auto"``) is resolved by ``fit``: :meth:`resolved_params` of the
        fitted model, kept as ``resolved_params_`` (scikit-learn's trailing underscore for what ``fit`` sets).
        So ``get_params()`` says what ran, and ``from_options(**get_params())`` runs it again on the same robot.
        """
        return {**self.given_params(), **getattr(self, "resolved_params_", {})}

    def resolved_params(self, model: IdentifiedModel) -> dict:
        """The options ``fit`` resolved for ``model``'s data, each as a valid value of that option; default none.

        Override it in an estimator whose options have data-dependent presets.
        """
        return {}

    @classmethod
    def from_options(cls, **options) -> Estimator:
        """Build from scenario options; any problem raises one :class:`ConfigError` naming the option."""
        return cls(**options)

    def fit(self, problem: IdentificationProblem) -> IdentifiedModel:
        """Identify a model from ``problem``.

        Validates the options (also against the robot: :meth:`check_structure`) and, for an estimator that
        ``needs_closed_loop``, that the data has its closed loop (:func:`closed_loop_of`), times ``_fit``, stamps
        the model with this estimator's name, options as given, ``diagnostics['fit_time_s']`` and
        ``diagnostics['deadband_rows_removed']``, and keeps what the options resolved to as ``resolved_params_``
        (shown by :meth:`get_params`).
        """
        if not isinstance(problem, IdentificationProblem):
            raise IdentificationError(
                f"estimator '{self.name}': fit takes an IdentificationProblem, got {type(problem).__name__}"
            )
        params = self.given_params()
        type(self).from_options(**params)  # validate options set after construction too
        self.check_structure(problem.structure)
        if self.needs_closed_loop:
            closed_loop_of(problem.dataset, f"estimator '{self.name}'", problem.structure)
        t0 = time.perf_counter()
        model = self._fit(problem)
        elapsed = time.perf_counter() - t0
        if not isinstance(model, IdentifiedModel):
            raise IdentificationError(
                f"estimator '{self.name}' returned {type(model).__name__}, not an IdentifiedModel"
            )
        model.estimator = self.name
        model.options = params
        self.resolved_params_ = self.resolved_params(model)
        model.diagnostics.setdefault("fit_time_s", elapsed)
        model.diagnostics.setdefault("deadband_rows_removed", list(problem.deadband_rows_removed))
        return model

    def check_structure(self, structure) -> None:
        """Refuse options that do not fit the robot, before any data exists (plugin API 1.1; unchanged in 2.0).

        Called by a scenario run while it prepares, before anything is simulated or read, with the structure
        the estimators will be given (the robot's, with the scenario's friction law), and by :meth:`fit`.
        Override it for options whose valid values depend on the robot: a value per joint or per base
        parameter (``structure.n_dof``, ``structure.base_parameters().names``), joint kinds, the friction law.
        Raise one :class:`~robotid_sim.errors.ConfigError` naming the estimator and the option. The default
        accepts every robot.
        """

    # registered through register_estimators under ``name`` (robotid_sim.hookspecs.Registrable)
    registry_hook = "register_estimators"
    registry_base = "robotid_sim.identification.Estimator"

    def _fit(self, problem: IdentificationProblem) -> IdentifiedModel:  # pragma: no cover - abstract
        raise NotImplementedError(f"estimator '{self.name}' does not implement _fit(problem)")

"""The estimator interface (SPEC §8): scikit-learn-like, with a statsmodels-like result.

An estimator's constructor only stores options; the work happens in :meth:`Estimator.fit`,
which returns a separate :class:`~robotid_sim.identification.IdentifiedModel`.

Options are validated by one mechanism, a pydantic model per estimator:

- declare it as a nested class ``Options`` (a subclass of :class:`EstimatorOptions`, with
  defaults, ``Field`` constraints and descriptions) and do not write ``__init__``: the base
  constructor validates the keyword options and stores each as an attribute; or
- write a plain ``__init__(self, a: float = 1.0, ...)`` that stores its arguments under their
  own names (scikit-learn style): the options model is derived from its signature and type
  hints, and options are validated in :meth:`Estimator.from_options` and again in
  :meth:`Estimator.fit`.

Every problem is reported by :func:`options_error`, one line naming the estimator, the option
and what is allowed.

An estimator that uses another (semiparametric on a rigid-body fit, two-loop around IRLS) takes
it as an option of type :class:`EstimatorSpec`, written ``{"name": "irls", "options": {...}}``
in scenarios and JSON, and builds it with :meth:`EstimatorSpec.build` inside ``fit``.
"""

from __future__ import annotations

import inspect
import time
import typing
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from robotid_sim.errors import ConfigError, IdentificationError
from robotid_sim.hookspecs import Registrable
from robotid_sim.identification.model import IdentifiedModel
from robotid_sim.identification.problem import IdentificationProblem


class EstimatorOptions(BaseModel):
    """Base of the estimators' option models: unknown keys are errors; values are validated."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, validate_default=True)


class EstimatorSpec(BaseModel):
    """Another estimator, as an option: ``{"name": "irls", "options": {"k_sigma": 3}}``."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="registered estimator name")
    options: dict[str, Any] = Field(default_factory=dict, description="that estimator's options")

    def build(self) -> Estimator:
        """The estimator instance (looked up in the plugin registry, options validated)."""
        from robotid_sim.plugins import get_estimator

        return get_estimator(self.name).from_options(**self.options)


def options_error(estimator: str, exc: ValidationError, model: type[BaseModel]) -> ConfigError:
    """The one error formatter for estimator options: a line per problem, naming the option."""
    valid = list(model.model_fields)
    unknown = sorted(str(e["loc"][0]) for e in exc.errors() if e["type"] == "extra_forbidden" and e["loc"])
    parts = []
    if unknown:
        parts.append(f"unknown option(s) {unknown}")
    for e in exc.errors():
        if e["type"] == "extra_forbidden":
            continue
        where = ".".join(str(x) for x in e["loc"]) or "options"
        if e["type"] == "missing":
            parts.append(f"option '{where}' is required")
        else:
            parts.append(f"option '{where}': {e['msg']} (got {e.get('input')!r})")
    return ConfigError(f"estimator '{estimator}': {'; '.join(parts)}; valid options: {valid}")


_DERIVED: dict[type, type[BaseModel]] = {}


class Estimator(Registrable):
    """Base class. Subclasses set ``name``, their options (``Options`` or ``__init__``) and ``_fit``.

    Class attributes:
        name: the registered name (``"ols"``).
        Options: the pydantic options model, or None to derive it from ``__init__``.
        biased: True for an estimator that does not recover the exact parameters from noise-free
            data (a regularised or sparse one); :func:`robotid_sim.testing.check_estimator` then
            skips that check.
        streams_regressor: True for an estimator that never stacks the base regressor (it fits
            from :meth:`IdentificationProblem.least_squares`, never calls ``base_regressor()``); a
            scenario run's memory budget then counts no stacked regressor for it.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[EstimatorOptions] | None] = None
    biased: ClassVar[bool] = False
    streams_regressor: ClassVar[bool] = False

    def __init__(self, **options):
        model = type(self).options_model()
        try:
            validated = model.model_validate(options)
        except ValidationError as exc:
            raise options_error(self.name, exc, model) from None
        for key in model.model_fields:
            setattr(self, key, getattr(validated, key))

    @classmethod
    def options_model(cls) -> type[BaseModel]:
        """The pydantic model of this estimator's options."""
        if cls.Options is not None:
            return cls.Options
        if cls not in _DERIVED:
            _DERIVED[cls] = _model_from_signature(cls)
        return _DERIVED[cls]

    def get_params(self) -> dict:
        """The options this estimator was configured with, as plain JSON-able data."""
        model = type(self).options_model()
        return model.model_construct(**{k: getattr(self, k) for k in model.model_fields}).model_dump(mode="json")

    @classmethod
    def from_options(cls, **options) -> Estimator:
        """Build from scenario options; any problem raises one :class:`ConfigError` naming the option."""
        model = cls.options_model()
        try:
            validated = model.model_validate(options)
        except ValidationError as exc:
            raise options_error(cls.name, exc, model) from None
        if cls.Options is not None:
            return cls(**options)
        return cls(**{k: getattr(validated, k) for k in model.model_fields if k in options})

    def fit(self, problem: IdentificationProblem) -> IdentifiedModel:
        """Identify a model from ``problem``.

        Validates the options (also against the robot: :meth:`check_structure`), times ``_fit``, and stamps
        the model with this estimator's name, options, ``diagnostics['fit_time_s']`` and
        ``diagnostics['deadband_rows_removed']``.
        """
        if not isinstance(problem, IdentificationProblem):
            raise IdentificationError(
                f"estimator '{self.name}': fit takes an IdentificationProblem, got {type(problem).__name__}"
            )
        params = self.get_params()
        type(self).from_options(**params)  # validate options set after construction too
        self.check_structure(problem.structure)
        t0 = time.perf_counter()
        model = self._fit(problem)
        elapsed = time.perf_counter() - t0
        if not isinstance(model, IdentifiedModel):
            raise IdentificationError(
                f"estimator '{self.name}' returned {type(model).__name__}, not an IdentifiedModel"
            )
        model.estimator = self.name
        model.options = params
        model.diagnostics.setdefault("fit_time_s", elapsed)
        model.diagnostics.setdefault("deadband_rows_removed", list(problem.deadband_rows_removed))
        return model

    def check_structure(self, structure) -> None:
        """Refuse options that do not fit the robot, before any data exists (plugin API 1.1).

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


def _model_from_signature(cls: type) -> type[BaseModel]:
    """An options model with one field per keyword parameter of ``cls.__init__``."""
    signature = inspect.signature(cls.__init__)
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable annotations: validate presence and names only
        hints = {}
    fields: dict[str, Any] = {}
    for name, param in signature.parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (hints.get(name, Any), default)
    return create_model(f"{cls.__name__}Options", __base__=EstimatorOptions, **fields)

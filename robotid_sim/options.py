"""The one option mechanism of every plugin kind: estimators, controllers, excitations and noise models.

An owner (an estimator, a controller, an excitation type, a noise model) declares its options as a nested
pydantic class ``Options`` derived from :class:`Options`: one field per option, with its default, its
constraints (``Field(gt=0)``, ``Literal[...]``, validators) and a description. :func:`validate_options`
checks a mapping against it and reports every problem as one :class:`~robotid_sim.errors.ConfigError`
line naming the kind, the owner, the option and what is allowed, ending with the valid options::

    controller 'pid': unknown option(s) ['kx']; valid options: ['kp', 'kd', 'ki']
    estimator 'irls': option 'k_sigma': Input should be greater than 0 (got -1); valid options: [...]

A controller, for example::

    class PID(Controller):
        name = "pid"

        class Options(robotid_sim.options.Options):
            kp: float = Field(100.0, ge=0, description="proportional gain")

        @classmethod
        def from_options(cls, **options):
            validated = validate_options("controller", cls.name, cls.Options, options)
            return cls(**option_values(validated))

This module is a bottom-layer utility: it imports pydantic and :mod:`robotid_sim.errors` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from robotid_sim.errors import ConfigError, format_validation_error

__all__ = ["KINDS", "Options", "option_values", "validate_options"]

#: the plugin kinds that own options, as named in messages
KINDS = ("estimator", "controller", "excitation", "noise model")

OptionsT = TypeVar("OptionsT", bound=BaseModel)


class Options(BaseModel):
    """Base of every owner's options: unknown names are errors, defaults are validated too.

    Arbitrary types are allowed (an option may be an identified model or a numpy array).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, validate_default=True)


def validate_options(kind: str, owner: str, model: type[OptionsT], options: Mapping[str, Any]) -> OptionsT:
    """``options`` validated against ``model``, or one :class:`ConfigError` line naming what is wrong.

    Args:
        kind: the owner's kind, one of :data:`KINDS` (``"estimator"``), put first in messages.
        owner: the owner's registered name (``"irls"``, ``"pid"``, ``"fourier"``).
        model: the owner's ``Options`` class.
        options: option name -> value, as written in a scenario or passed as keywords.

    Returns:
        The validated options (an instance of ``model``).

    Raises:
        ConfigError: ``"{kind} '{owner}': ...; valid options: [...]"`` for an unknown, missing or invalid
            option, or for ``options`` that is not a mapping.
    """
    where = f"{kind} '{owner}'"
    if not isinstance(options, Mapping):
        raise ConfigError(f"{where}: options must be a mapping of option names to values, got {options!r:.80}")
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where, noun="option", valid=list(model.model_fields))) from None


def option_values(options: BaseModel, *, given_only: bool = False) -> dict[str, Any]:
    """Validated options as ``{name: value}``, values as validated (nested models and arrays kept as objects).

    Unlike ``model_dump()``, which turns nested models into dicts, this gives what a constructor takes.

    Args:
        options: validated options (from :func:`validate_options`).
        given_only: only the options the mapping set (so that the owner's own defaults apply to the others).
    """
    names = options.model_fields_set if given_only else type(options).model_fields
    return {name: getattr(options, name) for name in type(options).model_fields if name in names}

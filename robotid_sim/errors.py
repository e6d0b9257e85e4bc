"""One small exception hierarchy: every error says what was wrong and what is expected."""

from __future__ import annotations


class RobotIdError(Exception):
    """Base class of every error raised by robotid_sim."""


class ConfigError(RobotIdError, ValueError):
    """A scenario, sidecar or option is malformed or has an invalid value."""


class DataError(RobotIdError, ValueError):
    """Input arrays or data files have the wrong shape, NaNs, or missing columns."""


class ModelError(RobotIdError, ValueError):
    """A robot description cannot be turned into a model (unsupported joint, not a chain, ...)."""


class PluginError(RobotIdError, LookupError):
    """A plugin is unknown, failed to load, or misbehaved."""


class IdentificationError(RobotIdError, RuntimeError):
    """An estimator cannot produce a trustworthy result (e.g. rank-deficient excitation)."""


def format_validation_error(exc, where: str, *, noun: str = "field", valid: list[str] | None = None) -> str:
    """A pydantic ``ValidationError`` as one line: each missing, unknown or invalid entry by its dotted path.

    The one formatter of validation errors: scenarios, sidecars and logs give ``where`` only; the option
    mechanism (:func:`robotid_sim.options.validate_options`) also gives ``noun="option"`` and the ``valid``
    names, which groups the unknown names and ends the line with the valid ones.

    Args:
        exc: the pydantic ``ValidationError``.
        where: what was being validated (``"scenario x.yaml"``, ``"estimator 'irls'"``), put first.
        noun: what an entry is called in the message (``"field"``, ``"option"``, ``"key"``).
        valid: the valid top-level names; when given, unknown names are listed together and the valid
            ones close the line.

    A validator's own message that starts with "must " reads as a predicate of the entry
    (``option 'std' must be >= 0, got -1``); any other follows a colon.
    """
    errors = exc.errors()
    parts = []
    if valid is not None:
        unknown = sorted(_dotted(e["loc"]) for e in errors if e["type"] == "extra_forbidden")
        if unknown:
            parts.append(f"unknown {noun}(s) {unknown}")
    for err in errors:
        loc = _dotted(err["loc"])
        if err["type"] == "extra_forbidden":
            if valid is None:
                parts.append(f"unknown {noun} '{loc}'")
        elif err["type"] == "missing":
            parts.append(f"{noun} '{loc}' is required")
        elif err["type"] == "value_error" and "error" in err.get("ctx", {}):
            message = str(err["ctx"]["error"])  # our own message, without "Value error, "
            parts.append(f"{noun} '{loc}'{' ' if message.startswith('must ') else ': '}{message}")
        else:
            parts.append(f"{noun} '{loc}': {err['msg']} (got {_shown(err.get('input'))})")
    if valid is not None:
        parts.append(f"valid {noun}s: {list(valid)}")
    return f"{where}: " + "; ".join(parts)


def _dotted(loc) -> str:
    return ".".join(str(x) for x in loc) or "<root>"


def _shown(value, limit: int = 120) -> str:
    """``repr(value)``, cut to ``limit`` characters (a config value may be a long list)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

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


def format_validation_error(exc, where: str) -> str:
    """A pydantic ``ValidationError`` as one line: each missing, unknown or invalid field by its dotted path.

    Args:
        exc: the pydantic ``ValidationError``.
        where: what was being validated (``"scenario x.yaml"``, ``"sidecar arm.yaml"``), put first.
    """
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "<root>"
        if err["type"] == "missing":
            parts.append(f"missing field '{loc}'")
        elif err["type"] == "extra_forbidden":
            parts.append(f"unknown field '{loc}'")
        elif err["type"] == "value_error" and "error" in err.get("ctx", {}):
            parts.append(f"field '{loc}': {err['ctx']['error']}")  # our own message, without "Value error, "
        else:
            parts.append(f"field '{loc}': {err['msg']}")
    return f"{where}: " + "; ".join(parts)

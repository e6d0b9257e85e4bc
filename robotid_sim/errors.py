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

"""The estimator interface (SPEC §8), scikit-learn-like with a statsmodels-like result.

An estimator's constructor only stores options (plain keyword arguments with defaults); the
work happens in :meth:`Estimator.fit`, which returns a separate :class:`IdentifiedModel`.
"""

from __future__ import annotations

import inspect
import time
from typing import ClassVar

from robotid_sim.errors import ConfigError
from robotid_sim.identification.model import IdentifiedModel
from robotid_sim.identification.problem import IdentificationProblem


class Estimator:
    """Base class. Subclasses define ``name``, keyword options in ``__init__`` and ``_fit``."""

    name: ClassVar[str] = ""

    def get_params(self) -> dict:
        """The options this estimator was configured with."""
        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k != "self"}

    @classmethod
    def from_options(cls, **options) -> Estimator:
        """Build from scenario options; an unknown option raises :class:`ConfigError` listing valid ones."""
        sig = inspect.signature(cls.__init__)
        valid = [k for k in sig.parameters if k != "self"]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ConfigError(f"estimator '{cls.name}': unknown option(s) {unknown}; valid options: {valid}")
        return cls(**options)

    def fit(self, problem: IdentificationProblem) -> IdentifiedModel:
        """Identify a model from ``problem``; records the fit time in ``model.info['fit_time_s']``."""
        t0 = time.perf_counter()
        model = self._fit(problem)
        model.info.setdefault("fit_time_s", time.perf_counter() - t0)
        return model

    def _fit(self, problem: IdentificationProblem) -> IdentifiedModel:  # pragma: no cover - abstract
        raise NotImplementedError

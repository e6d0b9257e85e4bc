"""Built-in estimator ``hopfield``: the Hopfield-network parameter estimator of seed 004 (§2.3, Eq. 12–20)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.errors import ConfigError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator
from robotid_sim.identification.online import ReplayOptions, problem_stream, replay

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

#: a final estimate above this fraction of its bound is reported as pressed against it
BOUND_WARNING = 0.95


class HopfieldEstimator(Estimator):
    """A Hopfield network whose neuron states are the base parameters (seed 004 Eq. 19):

        dλ/dt = (1/(cβ)) · D_c(λ) · Φᵀ (τ − Φ λ),   D_c(λ) = diag(c² − λ_i²),

    with W = ΦᵀΦ and I = Φᵀτ of the current sample (Eq. 17–18). It is integrated along the
    data stream in the neurons' inputs u, λ = c·tanh(u) (Eq. 14, 16), so the estimate is inside
    (−c, c) at every step by construction (u is kept within ±15, where c·tanh(u) is below c by a
    margin no rounding crosses). Each sample advances u by one explicit Euler step whose length
    is set like the normalised delta rule's (a step μ in (0, 2) relative to the sample's input
    power, in coordinates where each regressor column has unit RMS): inside the bounds the
    network then moves as ``adaline`` does, slowed by the factor 1 − λ²/c² near them. Like
    ``adaline`` it replays the stream in time order for up to ``epochs`` epochs with a decaying
    step and returns the last epoch's average.

    The bound: ``c`` (one value, or one per base parameter), or automatically ``c_factor``
    times, per parameter, the largest value it would need to explain a joint's RMS torque on
    its own (max over joints of rms(τ_j) / rms(Φ_ji)) — loose enough not to bias the estimate,
    tight enough to rule out the absurd.

    Diagnostics: ``condition_number``, ``epochs``, ``bound`` (c per parameter),
    ``max_bound_fraction`` (max |λ_i| / c_i of the result; above 0.95 a note says to raise ``c``),
    ``deadband_rows_removed``.
    """

    name = "hopfield"

    class Options(ReplayOptions):
        c: float | list[float] | None = Field(
            None, description="the bound c of Eq. 19 (one value or one per base parameter); null: from the data"
        )
        c_factor: float = Field(10.0, gt=1, description="automatic c: this many times the data-scale bound")

    def _given_bound(self, names: list[str]) -> np.ndarray | None:
        """Option ``c`` as one bound per base parameter ``names``, or None when it comes from the data."""
        if self.c is None:
            return None
        b = len(names)
        c = np.broadcast_to(np.asarray(self.c, float), (b,)) if np.ndim(self.c) == 0 else np.asarray(self.c, float)
        if c.shape != (b,) or not np.all(np.isfinite(c)) or np.any(c <= 0):
            raise ConfigError(
                f"estimator 'hopfield': option 'c' must be one positive number or {b} (one per base parameter "
                f"{names}), got {self.c!r}"
            )
        return c.copy()

    def check_structure(self, structure) -> None:
        self._given_bound(structure.base_parameters().names)

    def _bound(self, problem, stream) -> np.ndarray:
        c = self._given_bound(problem.base_parameter_names)
        if c is not None:
            return c
        rms_tau = np.sqrt(np.mean(stream.tau**2, axis=0))  # (n,)
        rms_col = np.sqrt(np.mean(stream.Y**2, axis=0))  # (n, b)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(rms_col > 0, rms_tau[:, None] / rms_col, 0.0)
        need = ratio.max(axis=0)
        return self.c_factor * np.where(need > 0, need, 1.0)

    def _fit(self, problem) -> BaseParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        stream = problem_stream(problem)
        bound = self._bound(problem, stream)
        values, history, epochs = replay(problem, stream, self, bound)
        fraction = float(np.max(np.abs(values) / bound))
        diagnostics = {
            "condition_number": cond,
            "epochs": epochs,
            "bound": bound.tolist(),
            "max_bound_fraction": fraction,
            **problem.diagnostics(),
        }
        if fraction > BOUND_WARNING:
            worst = problem.base_parameter_names[int(np.argmax(np.abs(values) / bound))]
            diagnostics["note"] = (
                f"'{worst}' ends at {100 * fraction:.1f} % of its bound c: the network is held back there; raise 'c' "
                "or 'c_factor'"
            )
        return BaseParameterModel.from_problem(problem, values, history=history, diagnostics=diagnostics)


@hookimpl
def register_estimators(register):
    register("hopfield", HopfieldEstimator)

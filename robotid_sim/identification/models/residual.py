"""The ``residual`` model kind: any model plus a learned correction, a small MLP (the semiparametric model).

:class:`MLPCorrection` is the network the model predicts with (evaluated with numpy; trained elsewhere,
by the semiparametric estimator with torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robotid_sim.dynamics.forward import solve_forward
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ModelError
from robotid_sim.identification.features import SIGNALS
from robotid_sim.identification.model import (
    IdentifiedModel,
    model_from_state,
    prefixed,
    short_repr,
    state_array,
    state_field,
)

ACTIVATIONS = {"tanh": np.tanh, "relu": lambda x: np.maximum(x, 0.0)}


@dataclass(frozen=True, eq=False)
class MLPCorrection:
    """A small multilayer perceptron evaluated with numpy: the learned part of a residual model.

    ``x = concat(signals in inputs)``, normalised by ``x_mean``, ``x_std``; hidden layers
    ``h = act(W h + b)``; linear output, times ``y_scale``. Weights come from any trainer
    (the semiparametric estimator trains with torch and stores them here).

    Attributes:
        inputs: which signals feed it, in order, from ``("q", "qd", "qdd")``.
        weights: per layer (out, in) matrices; biases: per layer (out,).
        activation: ``"tanh"`` or ``"relu"`` for the hidden layers.
        x_mean, x_std: (len(inputs)·n,) input normalisation; y_scale: (n,) output scale.
    """

    inputs: tuple[str, ...]
    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    activation: str
    x_mean: np.ndarray
    x_std: np.ndarray
    y_scale: np.ndarray

    def __post_init__(self):
        if not self.inputs or any(s not in SIGNALS for s in self.inputs):
            raise ModelError(f"MLP inputs must be a non-empty subset of {SIGNALS}, got {self.inputs}")
        if self.activation not in ACTIVATIONS:
            raise ModelError(f"MLP activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if len(self.weights) != len(self.biases) or not self.weights:
            raise ModelError("MLP needs as many bias vectors as weight matrices, at least one")
        width = len(self.x_mean)
        for W, b in zip(self.weights, self.biases, strict=True):
            if W.ndim != 2 or W.shape[1] != width or b.shape != (W.shape[0],):
                raise ModelError(f"MLP layer shapes do not chain: weight {W.shape}, bias {b.shape}, input {width}")
            width = W.shape[0]
        if width != len(self.y_scale) or len(self.x_std) != len(self.x_mean):
            raise ModelError("MLP output width must equal n (len(y_scale)) and x_std match x_mean")

    def __call__(self, q, qd, qdd) -> np.ndarray:
        signals = {"q": q, "qd": qd, "qdd": qdd}
        h = (np.concatenate([signals[s] for s in self.inputs], axis=1) - self.x_mean) / self.x_std
        act = ACTIVATIONS[self.activation]
        for k, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ W.T + b
            if k < len(self.weights) - 1:
                h = act(h)
        return h * self.y_scale

    def to_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        arrays = {"x_mean": self.x_mean, "x_std": self.x_std, "y_scale": self.y_scale}
        for k, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            arrays[f"W{k}"], arrays[f"b{k}"] = W, b
        return {
            "inputs": list(self.inputs),
            "activation": self.activation,
            "layers": len(self.weights),
            "shapes": [list(W.shape) for W in self.weights],
        }, arrays

    @classmethod
    def from_state(cls, data: dict, arrays: dict[str, np.ndarray]) -> MLPCorrection:
        layers = state_field(data, "layers", int, "a whole number of layers", where="correction")
        if not 1 <= layers <= 1000:
            raise ModelError(f"field 'correction.layers' must be between 1 and 1000, got {layers}")
        inputs = state_field(data, "inputs", list, "a list of signal names", where="correction")
        if not all(isinstance(i, str) for i in inputs):
            raise ModelError(
                f"field 'correction.inputs' must list signal names from {SIGNALS}, got {short_repr(inputs)}"
            )
        activation = state_field(data, "activation", str, "'tanh' or 'relu'", where="correction")
        x_std = state_array(arrays, "x_std", ndim=1)
        if np.any(x_std <= 0):
            raise ModelError("array 'x_std' (input normalisation) must be > 0")
        return cls(
            tuple(inputs),
            tuple(state_array(arrays, f"W{k}", ndim=2) for k in range(layers)),
            tuple(state_array(arrays, f"b{k}", ndim=1) for k in range(layers)),
            activation,
            state_array(arrays, "x_mean", ndim=1),
            x_std,
            state_array(arrays, "y_scale", ndim=1),
        )


class ResidualModel(IdentifiedModel):
    """Any identified model plus a learned correction: tau = base(q, qd, qdd) + MLP (semiparametric).

    When the correction does not read qdd, the mass matrix is the base model's and the
    correction joins the bias, so forward dynamics stay as fast as the base model's.

    Attributes:
        base: the rigid-body (or any) :class:`IdentifiedModel`.
        correction: the :class:`MLPCorrection`.
    """

    kind = "residual"

    def __init__(self, base: IdentifiedModel, correction: MLPCorrection, **common):
        if not isinstance(base, IdentifiedModel):
            raise ModelError(f"base must be an IdentifiedModel, got {type(base).__name__}")
        if len(correction.y_scale) != base.n_dof:
            raise ModelError(f"the correction outputs {len(correction.y_scale)} torques, the base model {base.n_dof}")
        self.base = base
        self.correction = correction
        self._init_common(base.joint_names, **common)

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        return self.base.predict_torque(q, qd, qdd) + self.correction(q, qd, qdd)

    def _qdd_free(self) -> bool:
        return "qdd" not in self.correction.inputs

    def mass_matrix(self, q) -> np.ndarray:
        return self.base.mass_matrix(q) if self._qdd_free() else super().mass_matrix(q)

    def bias_torque(self, q, qd) -> np.ndarray:
        q, qd = as_states(self.n_dof, q=q, qd=qd)
        return self.base.bias_torque(q, qd) + self.correction(q, qd, np.zeros_like(q))

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        if not self._qdd_free():
            return super().forward_dynamics(q, qd, tau)
        q, qd, tau = as_states(self.n_dof, q=q, qd=qd, tau=tau)
        return solve_forward(self.base.mass_matrix(q), self.bias_torque(q, qd), tau)

    def parameter_table(self):
        return self.base.parameter_table()

    def check_structure(self, structure) -> None:
        self.base.check_structure(structure)

    def _state(self):
        base_data, base_arrays = self.base.to_state()
        corr_data, corr_arrays = self.correction.to_state()
        arrays = {
            **{f"base/{k}": v for k, v in base_arrays.items()},
            **{f"correction/{k}": v for k, v in corr_arrays.items()},
        }
        return {"base": base_data, "correction": corr_data}, arrays

    @classmethod
    def _from_state(cls, data, arrays):
        base_data = state_field(data, "base", dict, "the base model (a JSON object)")
        correction = state_field(data, "correction", dict, "the learned correction (a JSON object)")
        base = model_from_state(base_data, prefixed(arrays, "base/"), where="residual model's base")
        try:
            mlp = MLPCorrection.from_state(correction, prefixed(arrays, "correction/"))
        except ModelError as exc:
            raise ModelError(f"residual model's correction: {exc}") from None
        return cls(base, mlp)

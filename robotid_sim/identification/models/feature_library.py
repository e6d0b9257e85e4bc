"""The ``feature_library`` model kind: torque linear in a library of features of q, qd, qdd (SINDy)."""

from __future__ import annotations

import numpy as np

from robotid_sim.errors import ModelError
from robotid_sim.identification.features import FeatureLibrary
from robotid_sim.identification.model import IdentifiedModel, readonly_array, state_array, state_field


class FeatureLibraryModel(IdentifiedModel):
    """tau_i = Σ_f C[i, f] φ_f(q, qd, qdd): a model in a feature library (SINDy, seed 000; seed 002).

    Needs no robot description. Printable as equations (:meth:`equations`).

    Attributes:
        library: the :class:`FeatureLibrary`.
        coefficients: (n, F) coefficient matrix; zeros are features a sparse method dropped.
    """

    kind = "feature_library"

    def __init__(self, library: FeatureLibrary, coefficients, joint_names=None, **common):
        self.library = library
        self.coefficients = readonly_array(coefficients, "coefficients")
        if self.coefficients.shape != (library.n_dof, len(library)):
            raise ModelError(f"coefficients must be ({library.n_dof}, {len(library)}), got {self.coefficients.shape}")
        if not np.all(np.isfinite(self.coefficients)):
            raise ModelError("feature_library model: coefficients contain NaN or inf")
        names = joint_names if joint_names is not None else [f"joint{j + 1}" for j in range(library.n_dof)]
        self._init_common(names, **common)

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        return self.library.evaluate(q, qd, qdd) @ self.coefficients.T

    @property
    def has_forward_dynamics(self) -> bool:
        return self.library.linear_in_qdd()

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        if not self.has_forward_dynamics:
            raise ModelError(
                "this feature-library model is not linear in qdd with q-only inertia terms, so it "
                "has no forward dynamics; restrict the library's qdd features"
            )
        return super().forward_dynamics(q, qd, tau)

    def equations(self, precision: int = 4) -> list[str]:
        """One readable equation per joint, e.g. ``tau1 = 0.5213*qdd1 + 9.81*cos(q1)``."""
        out = []
        for i, row in enumerate(self.coefficients):
            terms = [
                f"{c:.{precision}g}*{name}" if name != "1" else f"{c:.{precision}g}"
                for c, name in zip(row, self.library.names, strict=True)
                if c != 0
            ]
            out.append(f"tau{i + 1} = " + (" + ".join(terms).replace("+ -", "- ") if terms else "0"))
        return out

    def parameter_table(self):
        names, values = [], []
        for i, row in enumerate(self.coefficients):
            for c, name in zip(row, self.library.names, strict=True):
                if c != 0:
                    names.append(f"tau{i + 1}:{name}")
                    values.append(c)
        return names, np.array(values), None

    def _state(self):
        return {"library": self.library.to_dict(), "equations": self.equations()}, {
            "coefficients": np.array(self.coefficients)
        }

    @classmethod
    def _from_state(cls, data, arrays):
        library = FeatureLibrary.from_dict(state_field(data, "library", dict, "the feature library (a JSON object)"))
        coefficients = state_array(arrays, "coefficients", shape=(library.n_dof, len(library)))
        names = state_field(data, "joint_names", list, "a list of joint names")
        if len(names) != library.n_dof:
            raise ModelError(
                f"field 'joint_names' lists {len(names)} joints but the feature library has n_dof = {library.n_dof}"
            )
        return cls(library, coefficients, names)

"""The ``lagrangian_features`` model kind: A(q), B, C and G from trigonometric features (seed 002, auto_features)."""

from __future__ import annotations

import numpy as np

from robotid_sim.dynamics.forward import solve_forward
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ModelError
from robotid_sim.identification.lagrangian_basis import LagrangianBasis
from robotid_sim.identification.model import IdentifiedModel, readonly_array, state_array, state_field


class LagrangianFeatureModel(IdentifiedModel):
    """τ = A(q) qdd + B(q)[qd qd] + C(q)[qd²] + G(q) + friction, from trigonometric features (seed 002).

    A(q) is parameterised once per upper-triangle entry (symmetric by construction), B and C are its
    Christoffel symbols and G the gradient of a potential (:mod:`robotid_sim.identification.lagrangian_basis`).
    Needs no robot description; forward dynamics solve A(q) qdd = τ − h(q, qd).

    ``A``, ``B``, ``C``, ``G`` are seed 002's names of :meth:`mass_matrix`, :meth:`coriolis_matrix`,
    :meth:`centrifugal_matrix` and :meth:`gravity_torque`.

    Attributes:
        basis: the :class:`~robotid_sim.identification.lagrangian_basis.LagrangianBasis`.
        coefficients: (P,) θ in the basis' layout (mass, potential, friction).
    """

    kind = "lagrangian_features"

    def __init__(self, basis, coefficients, joint_names=None, **common):
        if not isinstance(basis, LagrangianBasis):
            raise ModelError(f"basis must be a LagrangianBasis, got {type(basis).__name__}")
        self.basis = basis
        self.coefficients = readonly_array(coefficients, "coefficients")
        if self.coefficients.shape != (len(basis),):
            raise ModelError(f"coefficients must be ({len(basis)},), got {self.coefficients.shape}")
        if not np.all(np.isfinite(self.coefficients)):
            raise ModelError("lagrangian_features model: coefficients contain NaN or inf")
        names = joint_names if joint_names is not None else [f"joint{j + 1}" for j in range(basis.n_dof)]
        if len(names) != basis.n_dof:
            raise ModelError(f"{len(names)} joint names for a {basis.n_dof}-joint basis")
        self._init_common(names, **common)

    def _parts(self):
        return self.basis.split(np.asarray(self.coefficients))

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        return self.basis.regressor(q, qd, qdd) @ self.coefficients

    def mass_matrix(self, q) -> np.ndarray:
        """A(q) (N, n, n), symmetric by construction."""
        (q,) = as_states(self.n_dof, q=q)
        return self.basis.mass_matrix(self._parts()[0], q)

    def christoffel(self, q) -> np.ndarray:
        """b_ijk (N, n, n, n) of A(q) (seed 002, p. 2)."""
        (q,) = as_states(self.n_dof, q=q)
        return self.basis.christoffel(self._parts()[0], q)

    def coriolis_matrix(self, q) -> np.ndarray:
        """B(q) (N, n, n(n−1)/2): column (j, k), j < k in row-major order, is 2 b_ijk (seed 002)."""
        b = self.christoffel(q)
        pairs = [(j, k) for j in range(self.n_dof) for k in range(j + 1, self.n_dof)]
        return np.stack([2.0 * b[:, :, j, k] for j, k in pairs], axis=2) if pairs else b[:, :, 0, :0]

    def centrifugal_matrix(self, q) -> np.ndarray:
        """C(q) (N, n, n): C[i, j] = b_ijj (seed 002)."""
        return np.einsum("nijj->nij", self.christoffel(q))

    def gravity_torque(self, q) -> np.ndarray:
        """G(q) = ∂U/∂q (N, n)."""
        (q,) = as_states(self.n_dof, q=q)
        return self.basis.gravity(self._parts()[1], q)

    def friction_torque(self, qd) -> np.ndarray:
        """The identified friction torque (N, n) at velocities qd."""
        (qd,) = as_states(self.n_dof, qd=qd)
        return self.basis.friction_columns(qd) @ self._parts()[2]

    A = mass_matrix
    B = coriolis_matrix
    C = centrifugal_matrix
    G = gravity_torque

    def bias_torque(self, q, qd) -> np.ndarray:
        """B(q)[qd qd] + C(q)[qd²] + G(q) + friction (N, n)."""
        q, qd = as_states(self.n_dof, q=q, qd=qd)
        theta_mass, theta_potential, _ = self._parts()
        return (
            self.basis.coriolis_torque(theta_mass, q, qd)
            + self.basis.gravity(theta_potential, q)
            + self.friction_torque(qd)
        )

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """qdd = A(q)⁻¹ (τ − h(q, qd)) (N, n)."""
        q, qd, tau = as_states(self.n_dof, q=q, qd=qd, tau=tau)
        return solve_forward(self.mass_matrix(q), self.bias_torque(q, qd), tau)

    def min_mass_eigenvalue(self, q) -> np.ndarray:
        """The smallest eigenvalue of A(q) at each sample (N,): positive where A is positive definite."""
        return np.linalg.eigvalsh(self.mass_matrix(q))[:, 0]

    def parameter_table(self):
        return list(self.basis.names), np.array(self.coefficients), None

    def _state(self):
        return {
            "basis": self.basis.to_dict(),
            "parameters": [
                {"name": n, "value": float(v)} for n, v in zip(self.basis.names, self.coefficients, strict=True)
            ],
        }, {"coefficients": np.array(self.coefficients)}

    @classmethod
    def _from_state(cls, data, arrays):
        basis = LagrangianBasis.from_dict(state_field(data, "basis", dict, "the feature basis (a JSON object)"))
        coefficients = state_array(arrays, "coefficients", shape=(len(basis),))
        names = state_field(data, "joint_names", list, "a list of joint names")
        if len(names) != basis.n_dof:
            raise ModelError(f"field 'joint_names' lists {len(names)} joints but the basis has n_dof = {basis.n_dof}")
        return cls(basis, coefficients, names)

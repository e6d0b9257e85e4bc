"""Payload identification: a payload's 10 inertial parameters at the flange, given an identified arm.

A payload rigidly fixed to the last link adds its standard parameters φ (about the last link's frame, the
flange: ``XX XY XZ YY YZ ZZ MX MY MZ M``, :mod:`robotid_sim.robot.physical`) to that link's, so a recording
with the payload attached obeys ``τ = τ_arm(q, qd, qdd) + W_p(q, qd, qdd) φ``, ``W_p`` the last link's 10
standard-parameter columns of the robot's regressor (:class:`~robotid_sim.dynamics.regressor.RegressorChain`).
With the arm's torque predicted by its identified model, φ is the least-squares solution of
``W_p φ = τ − τ_arm``: ordinary least squares, then weighted by each joint's residual variance (Gautier's
weighting, seed 001 Eq. 26), with the covariance σ² (Wᵀ Σ⁻¹ W)⁻¹ (seed 001 Eq. 16). The estimate is checked
for physical consistency (positive mass, inertia about the COM positive definite, triangle inequalities:
:func:`~robotid_sim.robot.physical.link_violations`).

A payload's small inertia about its COM is poorly determined by a recording, and its least-squares value is
often not that of any rigid body. The *consistent* estimate is the same weighted least squares subject to the
payload's pseudo-inertia J(φ) ⪰ ``margin``·I (Wensing, Kim & Slotine 2017; mass ≥ ``margin`` with it), solved
by :class:`~robotid_sim.identification.lmi.ConsistentLeastSquares` with the default margin of
:class:`~robotid_sim.identification.lmi.PhysicalOptions`. It is the result (:attr:`PayloadEstimate.result`)
when the least-squares estimate is inconsistent; otherwise the least-squares estimate is, and the consistent
one equals it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robotid_sim.dynamics.chain import INERTIAL_NAMES
from robotid_sim.errors import DataError, IdentificationError
from robotid_sim.identification.least_squares import per_joint_variance, weighted_least_squares
from robotid_sim.identification.lmi import ConsistentLeastSquares, PhysicalOptions
from robotid_sim.identification.metrics import condition_number
from robotid_sim.identification.model import IdentifiedModel
from robotid_sim.identification.problem import RANK_DEFICIENT_CONDITION, check_data_matches_robot
from robotid_sim.robot.physical import (
    center_of_mass,
    inertia_about_com,
    link_violations,
    principal_moments,
    pseudo_inertia,
)
from robotid_sim.robot.structure import RobotStructure
from robotid_sim.run_folder import build_run_folder, output_root
from robotid_sim.safety import atomic_write

__all__ = ["PayloadEstimate", "identify_payload", "identify_payload_from_logs", "write_payload_run"]


#: the consistent estimate's constraints: the pseudo-inertia J(φ) ⪰ margin·I, margin 1e-6 (mass ≥ 1 mg with it)
CONSISTENCY = PhysicalOptions()
#: the two estimates, by the names ``payload.json`` gives them
ESTIMATES = {"least_squares": "the weighted least-squares estimate", "consistent": "the physically consistent estimate"}


@dataclass(frozen=True, eq=False)
class PayloadEstimate:
    """A payload identified at the flange (the last link's frame): the weighted least-squares estimate with its
    covariance, and the physically consistent estimate (module docstring).

    Attributes:
        parameters: (10,) least-squares standard parameters ``XX XY XZ YY YZ ZZ MX MY MZ M`` about the flange
            (SI units).
        covariance: (10, 10) their covariance.
        consistent: (10,) the physically consistent estimate, in the same order (``parameters`` where those are
            consistent).
        frame: the name of the last link's joint, whose frame the parameters are expressed in.
        condition_number: of the column-scaled payload regressor.
        residual_rms: (n,) RMS of each joint's torque residual after the least-squares fit (N·m or N).
        consistent_residual_rms: (n,) the same after the consistent fit.
        n_samples: samples used.
    """

    parameters: np.ndarray
    covariance: np.ndarray
    consistent: np.ndarray
    frame: str
    condition_number: float
    residual_rms: np.ndarray
    consistent_residual_rms: np.ndarray
    n_samples: int

    @property
    def std(self) -> np.ndarray:
        """(10,) standard deviations of :attr:`parameters`."""
        return np.sqrt(np.diag(self.covariance))

    @property
    def mass(self) -> float:
        """The least-squares mass (kg)."""
        return float(self.parameters[9])

    @property
    def center_of_mass(self) -> np.ndarray:
        """(3,) least-squares COM in the flange frame (m)."""
        return center_of_mass(self.parameters)

    @property
    def center_of_mass_std(self) -> np.ndarray:
        """(3,) standard deviation of the COM, first-order propagation of c = (MX, MY, MZ) / M."""
        m, h = self.parameters[9], self.parameters[6:9]
        jacobian = np.hstack([np.eye(3) / m, -h[:, None] / m**2])  # d c / d (MX, MY, MZ, M)
        return np.sqrt(np.diag(jacobian @ self.covariance[6:, 6:] @ jacobian.T))

    @property
    def inertia_about_com(self) -> np.ndarray:
        """(3, 3) least-squares inertia tensor about the COM, flange axes (kg·m²)."""
        return inertia_about_com(self.parameters)

    def violations(self) -> list[str]:
        """The physical-consistency conditions the least-squares estimate breaks (empty: consistent)."""
        return link_violations(self.parameters, "payload")

    @property
    def result(self) -> str:
        """The estimate that is the payload's identified parameters (a key of :data:`ESTIMATES`): the least-squares
        one where it is physically consistent, else the consistent one."""
        return "consistent" if self.violations() else "least_squares"

    @property
    def result_parameters(self) -> np.ndarray:
        """(10,) the parameters of :attr:`result`."""
        return self.consistent if self.result == "consistent" else self.parameters

    def result_summary(self) -> str:
        """One line naming the result, with its mass and COM (the CLI prints it)."""
        phi = self.result_parameters
        com = ", ".join(f"{c:.4g}" for c in center_of_mass(phi))
        return f"result: {ESTIMATES[self.result]} ('{self.result}'), mass {phi[9]:.6g} kg, centre of mass ({com}) m"

    def to_dict(self) -> dict:
        """Both estimates as JSON-able values (parameters, mass, COM, inertia about the COM, verdict; the
        least-squares one with stds) and which of them is the result."""
        least_squares = {
            "parameters": {
                name: {"value": float(v), "std": float(s)}
                for name, v, s in zip(INERTIAL_NAMES, self.parameters, self.std, strict=True)
            },
            "mass_std_kg": float(self.std[9]),
            "center_of_mass_std_m": self.center_of_mass_std.tolist(),
            **_body(self.parameters),
            "residual_rms": self.residual_rms.tolist(),
        }
        consistent = {
            "parameters": {name: {"value": float(v)} for name, v in zip(INERTIAL_NAMES, self.consistent, strict=True)},
            **_body(self.consistent),
            "pseudo_inertia_margin": CONSISTENCY.margin,
            "residual_rms": self.consistent_residual_rms.tolist(),
        }
        return {
            "frame": self.frame,
            "result": self.result,
            "least_squares": least_squares,
            "consistent": consistent,
            "condition_number": self.condition_number,
            "n_samples": self.n_samples,
        }


def _body(phi: np.ndarray) -> dict:
    """Mass, COM, inertia about the COM, smallest pseudo-inertia eigenvalue and verdict of one estimate (10,)."""
    violations = link_violations(phi, "payload")
    return {
        "mass_kg": float(phi[9]),
        "center_of_mass_m": center_of_mass(phi).tolist(),
        "inertia_about_com_kg_m2": inertia_about_com(phi).tolist(),
        "principal_moments_kg_m2": principal_moments(phi).tolist(),
        "min_pseudo_inertia_eigenvalue": float(np.linalg.eigvalsh(pseudo_inertia(phi))[0]),
        "physically_consistent": not violations,
        "violations": violations,
    }


def identify_payload(model: IdentifiedModel, dataset, structure: RobotStructure) -> PayloadEstimate:
    """The payload's standard parameters at the flange from a recording with it attached (module docstring).

    Args:
        model: the identified arm without the payload (any model kind: its :meth:`predict_torque` is used).
        dataset: the recording with the payload (``q, qd, qdd, tau``, each (N, n)).
        structure: the robot's structure (kinematics): its regressor gives the payload's columns.

    Raises:
        DataError: the recording or the model has other joints than ``structure``.
        IdentificationError: the recording does not excite the payload's 10 parameters (the last links hardly
            move), naming the least excited ones; or the conic solver of the consistent estimate failed.
    """
    check_data_matches_robot(dataset, structure)
    if list(model.joint_names) != list(structure.joint_names):
        raise DataError(
            f"the arm model has joints {', '.join(model.joint_names)} but robot '{structure.name}' has "
            f"{', '.join(structure.joint_names)}; give the model identified on this robot"
        )
    n = structure.n_dof
    first = (n - 1) * structure.parameter_block
    q, qd, qdd = (np.asarray(getattr(dataset, s), float) for s in ("q", "qd", "qdd"))
    W = structure.regressor(q, qd, qdd, columns=np.arange(first, first + 10)).reshape(-1, 10)
    y = (np.asarray(dataset.tau, float) - model.predict_torque(q, qd, qdd)).reshape(-1)
    condition = _scaled_condition(W)
    if condition > RANK_DEFICIENT_CONDITION:
        weakest = np.argsort(np.linalg.norm(W, axis=0))[:3]
        raise IdentificationError(
            f"the recording does not excite the payload's parameters (condition number {condition:.3g}; least "
            f"excited: {', '.join(INERTIAL_NAMES[k] for k in weakest)}); move the last joints through a rich "
            "motion (e.g. the default or a Fourier excitation) with the payload attached"
        )
    ordinary = weighted_least_squares(W, y)
    variance = per_joint_variance(ordinary.residual, W, n)
    weights = np.tile(1.0 / variance, q.shape[0])
    fit = weighted_least_squares(W, y, weights)
    consistent = _consistent_fit(W, y, weights, fit.beta) if link_violations(fit.beta, "payload") else fit.beta

    def rms(phi: np.ndarray) -> np.ndarray:
        return np.sqrt(np.mean((y - W @ phi).reshape(-1, n) ** 2, axis=0))

    return PayloadEstimate(
        fit.beta,
        fit.covariance,
        consistent,
        structure.joint_names[-1],
        condition,
        rms(fit.beta),
        rms(consistent),
        q.shape[0],
    )


class _PayloadLayout:
    """The payload as the parameter layout :class:`~robotid_sim.identification.lmi.ConsistentLeastSquares`
    constrains (its ``structure``): one body's 10 inertial parameters, without rotor inertia or friction."""

    parameter_names = list(INERTIAL_NAMES)

    @staticmethod
    def parameter_slices() -> dict[str, np.ndarray]:
        return {"inertial": np.arange(10), "rotor": np.arange(0), "friction": np.arange(0)}


def _consistent_fit(W: np.ndarray, y: np.ndarray, weights: np.ndarray, unconstrained: np.ndarray) -> np.ndarray:
    """min Σ w (y − W φ)² subject to J(φ) ⪰ margin·I (:data:`CONSISTENCY`), (10,); ``unconstrained`` is the
    least-squares φ, toward which the solver's answer is polished.

    Raises:
        IdentificationError: the conic solver failed.
    """
    root = np.sqrt(weights)
    A = W * root[:, None]
    scale = np.linalg.norm(A, axis=0)  # no zero column: the condition number is finite
    A /= scale
    program = ConsistentLeastSquares(_PayloadLayout(), np.eye(10), CONSISTENCY)
    return program.solve(A.T @ A, A.T @ (root * y), scale, lambda: unconstrained * scale)


def _scaled_condition(W: np.ndarray) -> float:
    """The condition number of W with unit-norm columns (:func:`~robotid_sim.identification.metrics.condition_number`);
    inf with a zero column."""
    scale = np.linalg.norm(W, axis=0)
    return condition_number(W / scale) if np.all(scale > 0) else float("inf")


def _verdict(block: dict) -> str:
    if block["physically_consistent"]:
        return (
            f"physically consistent (smallest pseudo-inertia eigenvalue {block['min_pseudo_inertia_eigenvalue']:.3g})"
        )
    return "NOT physically consistent: " + "; ".join(block["violations"])


def _report(estimate: PayloadEstimate, sources: list[str]) -> str:
    """The run folder's report.md: which estimate is the result, both estimates, the least-squares stds."""
    d = estimate.to_dict()
    ls, cons = d["least_squares"], d["consistent"]
    com = ", ".join(
        f"{c:.4g} ± {s:.2g}" for c, s in zip(ls["center_of_mass_m"], ls["center_of_mass_std_m"], strict=True)
    )
    consistent_com = ", ".join(f"{c:.4g}" for c in cons["center_of_mass_m"])
    rows = "\n".join(
        f"| {name} | {p['value']:.6g} | {p['std']:.3g} | {cons['parameters'][name]['value']:.6g} |"
        for name, p in ls["parameters"].items()
    )
    why = (
        "the least-squares estimate is not physically consistent, so the one fitted under the constraint is"
        if d["result"] == "consistent"
        else "it is physically consistent (the constrained fit gives the same)"
    )
    result = d[d["result"]]
    inertia = "\n".join("    " + "  ".join(f"{x: .4g}" for x in row) for row in result["inertia_about_com_kg_m2"])
    return (
        f"# Payload at the flange ({d['frame']} frame)\n\n"
        f"Recordings: {', '.join(sources)} ({d['n_samples']} samples); "
        f"condition number {d['condition_number']:.4g}.\n\n"
        f'**Result: {ESTIMATES[d["result"]]}** (`payload.json` "result": "{d["result"]}"): {why}.\n\n'
        f"Weighted least squares:\n\n"
        f"- mass: {ls['mass_kg']:.6g} ± {ls['mass_std_kg']:.2g} kg\n"
        f"- centre of mass: ({com}) m\n"
        f"- {_verdict(ls)}\n\n"
        f"Physically consistent (the same fit with the pseudo-inertia ⪰ {cons['pseudo_inertia_margin']:g}·I; no "
        "stds of its own, the least-squares ones show how well the data determine each parameter):\n\n"
        f"- mass: {cons['mass_kg']:.6g} kg\n"
        f"- centre of mass: ({consistent_com}) m\n"
        f"- {_verdict(cons)}\n\n"
        f"Inertia about the COM of the result (kg·m², flange axes):\n\n{inertia}\n\n"
        "| parameter | least squares | std | consistent |\n|---|---|---|---|\n"
        f"{rows}\n"
    )


def write_payload_run(
    estimate: PayloadEstimate, out_dir: str | Path | None, name: str, sources: list[str], model_file: str
) -> Path:
    """A run folder under ``out_dir`` (default ``runs``) with ``payload.json`` and ``report.md``; its path.

    Raises:
        ConfigError: the output folder cannot be written, or ``name`` is not a safe name.
    """
    root = output_root(out_dir)
    data = {"recordings": sources, "arm_model": model_file, **estimate.to_dict()}

    def write(run_dir: Path) -> None:
        atomic_write(run_dir / "payload.json", lambda f: f.write(json.dumps(data, indent=2) + "\n"), binary=False)
        atomic_write(run_dir / "report.md", lambda f: f.write(_report(estimate, sources)), binary=False)

    return build_run_folder(root, name, write)


def identify_payload_from_logs(
    model: IdentifiedModel,
    sources,
    structure: RobotStructure,
    *,
    lowpass_hz: float | None = None,
    differentiate: bool = False,
) -> PayloadEstimate:
    """:func:`identify_payload` on recordings read from files (``robotid-sim identify --payload``): loaded and
    stacked as experiments (:func:`~robotid_sim.sim.logs.load_logs`), then preprocessed
    (:func:`~robotid_sim.signal.preprocess.preprocess`) within each experiment.

    Raises:
        ConfigError, DataError: as :func:`~robotid_sim.sim.logs.load_logs` and the preprocessing.
        IdentificationError: as :func:`identify_payload`.
    """
    from robotid_sim.signal.preprocess import preprocess
    from robotid_sim.sim.logs import experiments, load_logs, per_experiment

    ds = load_logs(sources, structure)
    ds, _ = preprocess(
        ds, per_experiment=per_experiment, experiments=experiments, lowpass_hz=lowpass_hz, differentiate=differentiate
    )
    return identify_payload(model, ds, structure)

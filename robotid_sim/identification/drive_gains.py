"""Drive gains and dynamic parameters together, from recordings with and without a payload of known mass.

A robot that logs motor currents ``i`` but whose drive gains ``k`` are not known (τ_motor = k · i per motor,
:class:`~robotid_sim.sim.drives.DriveModel` with ``gains: unknown``) is identified by the global method of
M. Gautier and S. Briot, "Global identification of joint drive gains and dynamic parameters of robots",
ASME J. Dyn. Sys., Meas., Control 136(5), 2014. In base parameters β (W the base regressor, C the currents as
linear in the gains, ``τ = C k``; ``C = diag(i)`` without a coupled transmission):

* an unloaded recording gives ``W_u β − C_u k = 0``: homogeneous, (β, k) only known up to a common scale;
* a recording with a payload rigidly fixed to the last link adds the payload's 10 standard parameters φ to
  that link's: ``W_l (β + D φ) − C_l k = 0``, ``D`` the base map ``K`` (:class:`BaseParameters`) restricted to
  the last link's 10 columns. The payload's mass m is known: its column goes to the right-hand side,
  ``W_l β + W_l D' φ' − C_l k = −m W_l d_M``, which fixes the scale.

The equations are written per motor (``N⁻ᵀ W``: a coupled transmission mixes the joints' torques) and the
stacked system is solved for (β, φ', k) by ordinary least squares. That solution is the start of a
Gauss–Newton on the same model with the current as the measured output, ``i = (F θ + k_m) / k``: the linear
equations carry the current noise in their gain columns, which biases the gains towards zero (errors in
variables). Each step is weighted by the residual variance of each recording and motor (Gautier's weighting,
seed 001 Eq. 26); the covariance is σ² (Jᵀ Σ⁻¹ J)⁻¹ at the solution (seed 001 Eq. 16), propagated to the
gains to first order. φ' holds the payload parameters the data can tell apart: those of the 9 (mass left out)
whose columns of ``D`` are independent of the ones before, in the canonical order (``XX`` stands for
``XX − YY`` where the last joint turns about z, as in the base parameters). Recordings given the same payload
mass carry the same payload. A velocity dead-band leaves out a motor's equations where a joint it drives is
slower than the threshold (there sign(qd) of the Coulomb friction is the velocity noise's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robotid_sim.dynamics.chain import INERTIAL_NAMES
from robotid_sim.errors import ConfigError, IdentificationError
from robotid_sim.identification.models import BaseParameterModel
from robotid_sim.identification.problem import (
    RANK_DEFICIENT_CONDITION,
    check_data_matches_robot,
    validate_velocity_deadband,
)
from robotid_sim.robot.structure import RobotStructure
from robotid_sim.sim.drives import DriveModel

__all__ = ["DriveGainFit", "Recording", "estimate_drive_gains", "identify_drive_gains"]

#: Gauss–Newton steps on the currents at most, and the relative change of the gains that ends them
_MAX_STEPS = 20
_STEP_TOLERANCE = 1e-7
#: a column of D below this fraction of D's largest entry is no payload direction (rounding of the reduction)
_PAYLOAD_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Recording:
    """One recording of the global identification: its dataset, whose ``tau`` holds the motor currents (A)
    as loaded with ``drives: {gains: unknown}``, and the mass (kg) of the payload it carries (None: unloaded)."""

    dataset: object
    payload_mass: float | None = None


@dataclass(frozen=True, eq=False)
class DriveGainFit:
    """Result of :func:`estimate_drive_gains`.

    Attributes:
        gains: (n,) drive gain of each motor (N·m/A), robot joint order.
        gains_std: (n,) its standard deviation.
        model: the base-parameter model (torque units) with its covariance; ``diagnostics`` holds the gains,
            their stds, the payload estimates and the condition number.
        payload_names: names of the payload parameters estimated for each payload (``XX_payload``, ...).
        payloads: per payload mass (kg), the (values, stds) of ``payload_names``.
        condition_number: of the column-scaled stacked matrix.
    """

    gains: np.ndarray
    gains_std: np.ndarray
    model: BaseParameterModel
    payload_names: list[str]
    payloads: dict[float, tuple[np.ndarray, np.ndarray]]
    condition_number: float


def _payload_columns(structure: RobotStructure) -> tuple[np.ndarray, list[int], np.ndarray]:
    """(D (b, 10), the kept payload parameters among XX..MZ, d_M (b,)): the last link's columns of the base map."""
    base = structure.base_parameters()
    first = (structure.n_dof - 1) * structure.parameter_block
    D = base.K[:, first : first + 10]
    scale = max(float(np.abs(D).max()), 1e-300)
    kept: list[int] = []
    for c in range(9):  # greedy in the canonical order, as the base parameters are chosen
        trial = D[:, [*kept, c]] / scale
        if np.linalg.matrix_rank(trial, tol=_PAYLOAD_TOLERANCE * max(trial.shape)) == len(kept) + 1:
            kept.append(c)
    if not np.any(np.abs(D[:, 9]) > _PAYLOAD_TOLERANCE * scale):
        raise IdentificationError(
            f"robot '{structure.name}': the mass of a payload on its last link moves no base parameter, so a known "
            "payload mass cannot fix the scale of the drive gains; use a robot whose last link's mass is seen "
            "in the joint torques"
        )
    return D, kept, D[:, 9]


def _checked_recordings(recordings: Sequence[Recording]) -> list[float]:
    """The distinct payload masses, in order; a ConfigError without an unloaded and a loaded recording."""
    masses = [r.payload_mass for r in recordings]
    for m in masses:
        if m is not None and not (np.isfinite(m) and m > 0):
            raise ConfigError(f"a payload mass must be a finite number > 0 kg, got {m}")
    if None not in masses or all(m is None for m in masses):
        raise ConfigError(
            "estimating unknown drive gains needs recordings both without and with a payload of known mass "
            f"({sum(m is None for m in masses)} unloaded and {sum(m is not None for m in masses)} loaded given); "
            "mark each loaded recording with its payload mass (robotid-sim identify --payload-mass KG --data FILE)"
        )
    return sorted({m for m in masses if m is not None})


@dataclass(frozen=True, eq=False)
class _CellSums:
    """The recordings' motor-side equations summed per cell (recording, motor): everything a least-squares solve
    needs, so no step forms the stacked rows.

    Per row r of cell c: ``F_r`` (P,) the base regressor and payload columns turned to motor torque (``N⁻ᵀ W``),
    ``k_r`` the motor torque of the known payload mass, ``i_r`` the measured current. Attributes (C cells):
    ``FF`` (C, P, P) Σ F Fᵀ, ``Fi`` and ``Fk`` (C, P) Σ F i and Σ F k, ``ii``, ``ik``, ``kk``, ``rows`` (C,),
    ``motor`` (C,) each cell's motor.
    """

    FF: np.ndarray
    Fi: np.ndarray
    Fk: np.ndarray
    ii: np.ndarray
    ik: np.ndarray
    kk: np.ndarray
    rows: np.ndarray
    motor: np.ndarray

    def present(self) -> np.ndarray:
        """(C,) parameters present in each cell's rows (``n_j`` of seed 001 Eq. 26): F's non-zero columns and k."""
        return np.count_nonzero(np.einsum("cii->ci", self.FF) > 0, axis=1) + 1


def _cell_sums(structure, drives, recordings, masses, kept, D, d_mass, deadband) -> _CellSums:
    """The :class:`_CellSums` of ``recordings``: joint-side regressor rows turned to motor torque by N⁻ᵀ.

    ``deadband`` (n,) or None: a motor's row is left out where a joint its torque involves moves slower than
    that joint's threshold (there sign(qd) of the Coulomb terms is the velocity noise's).
    """
    base, n = structure.base_parameters(), structure.n_dof
    b, p = base.count, len(kept)
    to_motor = np.linalg.inv(drives.transmission_matrix(n)).T  # τ_motor = N⁻ᵀ τ
    involved = np.abs(to_motor) > 0  # (motor, joint)
    sums: dict[str, list] = {key: [] for key in ("FF", "Fi", "Fk", "ii", "ik", "kk", "rows", "motor")}
    for rec in recordings:
        ds = rec.dataset
        check_data_matches_robot(ds, structure)
        Y = np.einsum("mj,sjb->smb", to_motor, base.regressor(ds.q, ds.qd, ds.qdd))  # (N, n, b)
        F = np.zeros((Y.shape[0], n, b + len(masses) * p))
        F[..., :b] = Y
        k = np.zeros(Y.shape[:2])
        if rec.payload_mass is not None:
            g = masses.index(rec.payload_mass)
            F[..., b + g * p : b + (g + 1) * p] = Y @ D[:, kept]
            k = rec.payload_mass * (Y @ d_mass)
        i = np.asarray(ds.tau, float)
        keep = np.ones(Y.shape[:2], dtype=bool)
        if deadband is not None:
            slow = np.abs(np.asarray(ds.qd, float)) < deadband  # (N, joint)
            keep = ~np.any(slow[:, None, :] & involved[None], axis=2)  # (N, motor)
        for m in range(n):
            rows = keep[:, m]
            Fm, im, km = F[rows, m], i[rows, m], k[rows, m]
            sums["FF"].append(Fm.T @ Fm)
            sums["Fi"].append(Fm.T @ im)
            sums["Fk"].append(Fm.T @ km)
            sums["ii"].append(im @ im)
            sums["ik"].append(im @ km)
            sums["kk"].append(km @ km)
            sums["rows"].append(int(np.count_nonzero(rows)))
            sums["motor"].append(m)
    return _CellSums(**{key: np.asarray(value) for key, value in sums.items()})


def _solve(G: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, G⁻¹) of the normal equations G x = c, equilibrated and factored by Cholesky."""
    import scipy.linalg

    d = np.sqrt(np.diag(G))
    factor = scipy.linalg.cho_factor(G / np.outer(d, d))
    x = scipy.linalg.cho_solve(factor, c / d) / d
    inverse = scipy.linalg.cho_solve(factor, np.eye(d.size)) / np.outer(d, d)
    return x, inverse


def _linear_system(sums: _CellSums, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Normal equations (AᵀA, Aᵀy) of ``F θ − i k_m = −k`` in (θ, gains) (Gautier & Briot), every cell weight 1."""
    P = sums.FF.shape[1]
    G, c = np.zeros((P + n, P + n)), np.zeros(P + n)
    G[:P, :P] = sums.FF.sum(axis=0)
    c[:P] = -sums.Fk.sum(axis=0)
    for cell, m in enumerate(sums.motor):
        G[:P, P + m] -= sums.Fi[cell]
        G[P + m, :P] -= sums.Fi[cell]
        G[P + m, P + m] += sums.ii[cell]
        c[P + m] += sums.ik[cell]
    return G, c


def _refined(sums: _CellSums, x: np.ndarray, n: int):
    """Gauss–Newton on the currents ``i = g (F θ + k)``, g = 1/gain per motor, from the linear estimate ``x``.

    The linear equations carry the current noise in their gain columns, which biases the gains towards zero
    (errors in variables); with the current as the measured output the noise is where least squares expects
    it. Each step solves the normal equations of the Jacobian ``[g F, z e_m]`` (z = F θ + k), weighted by
    each cell's residual variance (seed 001 Eq. 26), from the cell sums. Returns (θ, g, covariance of (θ, g)).
    """
    P = sums.FF.shape[1]
    theta, g = x[:P], 1.0 / x[P:]
    for _ in range(_MAX_STEPS):
        gm = g[sums.motor]
        Fz = sums.FF @ theta + sums.Fk  # (C, P): Σ F z
        zz = np.einsum("cp,p->c", Fz, theta) + sums.Fk @ theta + sums.kk  # Σ z²
        zi = sums.Fi @ theta + sums.ik  # Σ z i
        ss = np.maximum(sums.ii - 2 * gm * zi + gm**2 * zz, 0.0)  # Σ r², r = i − g z
        floor = 1e-24 * max(float(sums.ii.max()), 1e-300)  # noise-free data: equal weights, finite
        weight = np.maximum(sums.rows - sums.present(), 1) / np.maximum(ss, floor)
        G, c = np.zeros((P + n, P + n)), np.zeros(P + n)
        G[:P, :P] = np.einsum("c,cpq->pq", weight * gm**2, sums.FF)
        c[:P] = np.einsum("c,cp->p", weight * gm, sums.Fi - gm[:, None] * Fz)
        for cell, m in enumerate(sums.motor):
            column = weight[cell] * gm[cell] * Fz[cell]
            G[:P, P + m] += column
            G[P + m, :P] += column
            G[P + m, P + m] += weight[cell] * zz[cell]
            c[P + m] += weight[cell] * (zi[cell] - gm[cell] * zz[cell])
        delta, inverse = _solve(G, c)
        theta, g = theta + delta[:P], g + delta[P:]
        if np.max(np.abs(delta[P:] / g)) < _STEP_TOLERANCE:
            break
    dof = max(int(sums.rows.sum()) - P - n, 1)
    return theta, g, inverse * float(weight @ ss) / dof  # at the last step's start: the step is below rounding


def _scaled_condition(gram: np.ndarray) -> float:
    """Condition number of the stacked matrix A with unit-norm columns, from its Gram matrix AᵀA."""
    scale = np.sqrt(np.diag(gram))
    if np.any(scale == 0):
        return float("inf")
    eig = np.linalg.eigvalsh(gram / np.outer(scale, scale))
    return float(np.sqrt(eig[-1] / eig[0])) if eig[0] > 0 else float("inf")


def estimate_drive_gains(
    structure: RobotStructure,
    recordings: Sequence[Recording],
    drives: DriveModel,
    *,
    velocity_deadband: float | Sequence[float] | None = None,
) -> DriveGainFit:
    """Drive gains, base parameters and payload parameters by global weighted least squares (module docstring).

    Args:
        structure: the robot's structure (kinematics, friction law).
        recordings: at least one unloaded and one loaded :class:`Recording`, each ``tau`` the motor currents.
        drives: the layout's drive model (its transmission couples the motors; its gains are unknown).
        velocity_deadband: None, or a velocity threshold (rad/s, m/s) for every joint or one per joint: a motor's
            equations are left out where a joint its torque involves moves slower (as
            :class:`~robotid_sim.identification.IdentificationProblem` does per joint).

    Returns:
        The :class:`DriveGainFit`.

    Raises:
        ConfigError: no unloaded or no loaded recording, a payload mass that is not > 0, a transmission that does
            not fit the robot.
        DataError: a recording of another robot or other joints.
        IdentificationError: the stacked system is rank-deficient (the recordings do not excite every base
            parameter, or the payload moves too little to fix the gains), or the payload mass moves no base
            parameter.
    """
    masses = _checked_recordings(recordings)
    n = structure.n_dof
    deadband = validate_velocity_deadband(velocity_deadband, n)
    drives.transmission_matrix(n)  # its size, before any work
    D, kept, d_mass = _payload_columns(structure)
    sums = _cell_sums(structure, drives, recordings, masses, kept, D, d_mass, deadband)
    G, c = _linear_system(sums, n)
    condition = _scaled_condition(G)
    if condition > RANK_DEFICIENT_CONDITION:
        raise IdentificationError(
            f"the recordings cannot tell the drive gains and the dynamic parameters apart (condition number "
            f"{condition:.3g} of the stacked system); record longer or richer motion, with a heavier payload "
            "or one that moves the last link more"
        )
    theta, g, covariance = _refined(sums, _solve(G, c)[0], n)
    std = np.sqrt(np.diag(covariance))
    base = structure.base_parameters()
    b, p = base.count, len(kept)
    gains, gains_std = 1.0 / g, std[-n:] / g**2  # k = 1/g: first-order propagation
    names = [f"{INERTIAL_NAMES[c]}_payload" for c in kept]
    payloads = {m: (theta[b + k * p : b + (k + 1) * p], std[b + k * p : b + (k + 1) * p]) for k, m in enumerate(masses)}
    diagnostics = {
        "drive_gains": gains.tolist(),
        "drive_gains_std": gains_std.tolist(),
        "payloads": [
            {"mass": m, "parameters": dict(zip(names, v.tolist(), strict=True)), "std": s.tolist()}
            for m, (v, s) in payloads.items()
        ],
        "condition_number": condition,
        "method": "Gautier & Briot global identification (drive gains with a known payload mass), refined by "
        "weighted Gauss-Newton on the currents",
    }
    model = BaseParameterModel(
        structure,
        base.independent,
        theta[:b],
        covariance[:b, :b],
        estimator="drive_gains",
        diagnostics=diagnostics,
    )
    return DriveGainFit(gains, gains_std, model, names, payloads, condition)


def identify_drive_gains(
    structure: RobotStructure,
    sources: Sequence,
    payload_masses: Sequence[float | None],
    *,
    lowpass_hz: float | None = None,
    differentiate: bool = False,
    velocity_deadband: float | Sequence[float] | None = None,
) -> DriveGainFit:
    """:func:`estimate_drive_gains` on recordings read from files (``robotid-sim identify --payload-mass``).

    Each recording is loaded on its own (:func:`~robotid_sim.sim.logs.load_log`) and preprocessed
    (:func:`~robotid_sim.signal.preprocess.preprocess`: low-pass and differentiation within each experiment,
    the same filter on motion and currents, as Gautier & Briot filter in parallel).

    Args:
        structure: the robot's structure.
        sources: one :class:`~robotid_sim.sim.logs.LogSource` (or its mapping or path) per recording, each with
            ``drives: {gains: unknown}`` and the same drives.
        payload_masses: per recording, its payload mass in kg, or None for an unloaded one.
        lowpass_hz, differentiate: the preprocessing.
        velocity_deadband: as :func:`estimate_drive_gains`.

    Raises:
        ConfigError: a layout whose drive gains are not ``unknown``, recordings with different drives, a
            mass list of another length, no unloaded or no loaded recording.
        DataError, IdentificationError: as :func:`load_log` and :func:`estimate_drive_gains`.
    """
    from robotid_sim.signal.preprocess import preprocess
    from robotid_sim.sim.logs import experiments, load_log, parse_log_source, per_experiment

    parsed = [parse_log_source(s, f"recording {k}") for k, s in enumerate(sources)]
    if len(parsed) != len(payload_masses):
        raise ConfigError(f"{len(parsed)} recordings but {len(payload_masses)} payload masses; give one per recording")
    drives = parsed[0].drives if parsed else None
    if drives is None or not drives.gains_unknown:
        raise ConfigError(
            "a payload mass marks a recording for estimating unknown drive gains: the layout must log motor "
            "currents with 'drives: {gains: unknown}'"
        )
    if any(src.drives != drives for src in parsed):
        raise ConfigError("every recording of a drive-gain estimation needs the same 'drives' in its layout")
    _checked_recordings([Recording(None, m) for m in payload_masses])  # before any file is read
    recordings = []
    for src, mass in zip(parsed, payload_masses, strict=True):
        ds = load_log(src, structure)
        ds, _ = preprocess(
            ds,
            per_experiment=per_experiment,
            experiments=experiments,
            lowpass_hz=lowpass_hz,
            differentiate=differentiate,
        )
        recordings.append(Recording(ds, mass))
    return estimate_drive_gains(structure, recordings, drives, velocity_deadband=velocity_deadband)

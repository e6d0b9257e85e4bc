"""Coupled drives: one motor driving several joints through a transmission (Gautier et al. 2011's TX40 wrist).

A coupled drive over the joints S is an extra motor whose joint-side coordinate is s = Σ_{j∈S} q_j. Its
rotor inertia ``Ia`` (optional), viscous coefficient ``fv`` and Coulomb coefficient ``fc`` act on s and,
through the transmission, add to the torque of *each* joint j in S::

    tau_j += Ia·s̈ + fv·ṡ + fc·sign(ṡ)

with sign(v) smoothed as the robot's friction law smooths it (``sign_smoothing``:
:func:`~robotid_sim.dynamics.friction.smooth_sign`). The rotor term is the kinetic energy ½·Ia·ṡ², so it adds
Ia·1_S·1_Sᵀ to the mass matrix (:meth:`Coupling.inertia`); the friction terms are its dissipation. All three
are linear in the drive's parameters, named after the drive's motor, the last joint listed: a drive
``joints: [5, 6]`` has ``Iam6`` (only when its rotor inertia is modelled), ``Fvm6`` and ``Fcm6``.

In the standard parameter vector they come after every joint's block, drive after drive
(:class:`~robotid_sim.dynamics.regressor.RegressorChain`), so a robot without coupled drives keeps its layout.
Joints are 0-based here; sidecars and names count from 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robotid_sim.dynamics.friction import smooth_sign
from robotid_sim.errors import ConfigError


@dataclass(frozen=True)
class CoupledDrive:
    """One coupled drive: its joints (0-based), viscous ``fv`` and Coulomb ``fc`` coefficients (on ṡ) and rotor
    inertia (None: not modelled, no ``Iam`` parameter)."""

    joints: tuple[int, ...]
    fv: float = 0.0
    fc: float = 0.0
    rotor_inertia: float | None = None

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The parameter name stems, in parameter order: ``Iam`` (when modelled), ``Fvm``, ``Fcm``."""
        return (("Iam",) if self.rotor_inertia is not None else ()) + ("Fvm", "Fcm")

    @property
    def motor(self) -> int:
        """The 1-based number of the joint whose motor this is (the last joint listed): the names' suffix."""
        return self.joints[-1] + 1

    def values(self) -> list[float]:
        """The linear parameter values, in the order of :attr:`suffixes`."""
        return ([self.rotor_inertia] if self.rotor_inertia is not None else []) + [self.fv, self.fc]

    def to_dict(self) -> dict:
        """The sidecar entry (1-based joints); ``rotor_inertia`` only when modelled."""
        out = {"joints": [j + 1 for j in self.joints], "fv": float(self.fv), "fc": float(self.fc)}
        if self.rotor_inertia is not None:
            out["rotor_inertia"] = float(self.rotor_inertia)
        return out


@dataclass(frozen=True)
class Coupling:
    """The coupled drives of a robot (none: ``Coupling()``, which is falsy)."""

    drives: tuple[CoupledDrive, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.drives)

    @property
    def has_rotor_inertia(self) -> bool:
        """Whether some drive models a rotor inertia (a term of the mass matrix)."""
        return any(d.rotor_inertia is not None for d in self.drives)

    @property
    def parameter_names(self) -> list[str]:
        """Names of the drives' linear parameters, drive after drive (``['Fvm6', 'Fcm6']``)."""
        return [f"{s}{d.motor}" for d in self.drives for s in d.suffixes]

    def values(self) -> np.ndarray:
        """The linear parameter values (k,), in the order of :attr:`parameter_names`."""
        return np.array([v for d in self.drives for v in d.values()], dtype=float)

    def with_values(self, values: np.ndarray) -> Coupling:
        """A copy whose linear parameters are ``values`` (k,), same drives and joints."""
        values = np.asarray(values, float)
        drives, k = [], 0
        for d in self.drives:
            ia = None
            if d.rotor_inertia is not None:
                ia, k = float(values[k]), k + 1
            drives.append(CoupledDrive(d.joints, float(values[k]), float(values[k + 1]), ia))
            k += 2
        return Coupling(tuple(drives))

    def columns(self, qd: np.ndarray, qdd: np.ndarray, smoothing: float) -> np.ndarray:
        """Regressor columns (N, n, k) of the drives' parameters at velocities and accelerations (N, n)."""
        qd, qdd = np.asarray(qd, float), np.asarray(qdd, float)
        N, n = qd.shape
        out = np.zeros((N, n, len(self.parameter_names)))
        k = 0
        for d in self.drives:
            joints = list(d.joints)
            sd = qd[:, joints].sum(axis=1)
            terms = [qdd[:, joints].sum(axis=1)] if d.rotor_inertia is not None else []
            for term in [*terms, sd, smooth_sign(sd, smoothing)]:
                out[:, joints, k] = term[:, None]
                k += 1
        return out

    def torque(self, qd: np.ndarray, qdd: np.ndarray | None, smoothing: float) -> np.ndarray:
        """The drives' joint torque (N, n) at velocities and accelerations (N, n); ``qdd`` None: friction alone."""
        qd = np.asarray(qd, float)
        out = np.zeros_like(qd)
        for d in self.drives:
            joints = list(d.joints)
            sd = qd[:, joints].sum(axis=1)
            term = d.fv * sd + d.fc * smooth_sign(sd, smoothing)
            if qdd is not None and d.rotor_inertia is not None:
                term = term + d.rotor_inertia * np.asarray(qdd, float)[:, joints].sum(axis=1)
            out[:, joints] += term[:, None]
        return out

    def inertia(self, n: int) -> np.ndarray:
        """The drives' term of the mass matrix (n, n): Σ Ia·1_S·1_Sᵀ (zero without rotor inertia)."""
        M = np.zeros((n, n))
        for d in self.drives:
            if d.rotor_inertia is not None:
                M[np.ix_(d.joints, d.joints)] += d.rotor_inertia
        return M

    def layout(self) -> list[dict]:
        """The drives without values, as a robot structure writes them: ``[{"joints": [5, 6], "rotor_inertia":
        False}]`` (1-based joints)."""
        return [
            {"joints": [j + 1 for j in d.joints], "rotor_inertia": d.rotor_inertia is not None} for d in self.drives
        ]

    def to_list(self) -> list[dict]:
        """The sidecar's ``coupling`` list (:meth:`CoupledDrive.to_dict` per drive)."""
        return [d.to_dict() for d in self.drives]


def coupling_from_list(entries, n: int, where: str = "coupling", layout: bool = False) -> Coupling:
    """The :class:`Coupling` of a sidecar ``coupling`` list, or of a structure's :meth:`Coupling.layout` (1-based
    joints).

    A sidecar entry has ``joints`` (distinct joint numbers from 1 to n; a single joint is a second motor on it, as
    a drive of a robot with locked joints may become), ``fv`` and ``fc`` (>= 0) and optionally ``rotor_inertia``
    (>= 0; absent: not modelled). A layout entry (``layout``) has ``joints`` and ``rotor_inertia`` True or False,
    and gives zero values.

    Raises:
        ConfigError: a malformed entry, a joint out of range or repeated, a missing or negative coefficient, an
            unknown field, or two drives of the same motor (their parameters would share names), each naming the
            field.
    """
    fields = ("joints", "rotor_inertia") if layout else ("joints", "fv", "fc", "rotor_inertia")
    if not isinstance(entries, list):
        raise ConfigError(f"{where} must be a list of drives ({{joints: [5, 6], fv: ..., fc: ...}}), got {entries!r}")
    drives = []
    for i, entry in enumerate(entries):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{at} must be a mapping of {', '.join(fields)}, got {entry!r}")
        unknown = sorted(set(entry) - set(fields))
        if unknown:
            raise ConfigError(f"{at}: unknown field(s) {unknown}; expected {', '.join(fields)}")
        joints = _joints(entry.get("joints"), n, f"{at}.joints")
        if layout:
            modelled = entry.get("rotor_inertia", False)
            if not isinstance(modelled, bool):
                raise ConfigError(f"{at}.rotor_inertia must be true or false, got {modelled!r}")
            drives.append(CoupledDrive(joints, rotor_inertia=0.0 if modelled else None))
        else:
            values = [_coefficient(entry, key, at) for key in ("fv", "fc", "rotor_inertia")]
            drives.append(CoupledDrive(joints, *values))
    motors = [d.motor for d in drives]
    twice = sorted({m for m in motors if motors.count(m) > 1})
    if twice:
        raise ConfigError(
            f"{where}: two drives end with joint {twice[0]}, so their parameters would share the names Fvm{twice[0]}, "
            f"Fcm{twice[0]}: a drive is named after the last joint it lists; list their joints so they end differently"
        )
    return Coupling(tuple(drives))


def _joints(joints, n: int, at: str) -> tuple[int, ...]:
    """The 0-based joints of an entry's 1-based ``joints`` list; ConfigError naming ``at``."""
    if not isinstance(joints, list) or not joints or not all(type(j) is int for j in joints):
        raise ConfigError(f"{at} must list the joint numbers (1-based) the drive moves, got {joints!r}")
    bad = [j for j in joints if not 1 <= j <= n]
    if bad:
        raise ConfigError(f"{at}: joint {bad[0]} is not a joint number from 1 to {n}")
    if len(set(joints)) != len(joints):
        raise ConfigError(f"{at}: joint {next(j for j in joints if joints.count(j) > 1)} is listed twice")
    return tuple(j - 1 for j in joints)


def _coefficient(entry: dict, key: str, at: str) -> float | None:
    """A sidecar entry's ``fv``, ``fc`` (required) or ``rotor_inertia`` (None when absent): a number >= 0."""
    if key not in entry:
        if key == "rotor_inertia":
            return None
        raise ConfigError(f"{at}.{key} is required (the drive's {'viscous' if key == 'fv' else 'Coulomb'} coefficient)")
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{at}.{key} must be a number, got {value!r}")
    if not np.isfinite(value) or value < 0:
        raise ConfigError(f"{at}.{key} must be a finite number >= 0, got {value!r}")
    return float(value)

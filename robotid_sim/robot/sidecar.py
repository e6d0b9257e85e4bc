"""The YAML sidecar: what a URDF cannot hold (SPEC §3).

Validated with pydantic: an unknown field (or a malformed value) raises :class:`ConfigError`
naming it. Every field is optional, so a sidecar for a foreign URDF holds only what
identification needs (say, just ``friction``). What a field left out means:

- ``citation``: none;
- ``friction``: the URDF's ``<dynamics damping friction>`` tags as a Coulomb + viscous model,
  or no friction without tags (see :func:`~robotid_sim.robot.robot_from_urdf`);
- ``rotor_inertia``: none (no ``Ia`` parameters);
- ``coupling``: no coupled drives. Each entry ``{joints: [5, 6], fv: 0.8, fc: 1.6}`` (optionally
  ``rotor_inertia``) is a motor driving the listed joints (1-based numbers of the URDF's moving joints) through
  a transmission, with parameters ``Fvm6 Fcm6`` (``Iam6``) after every joint's
  (:mod:`robotid_sim.dynamics.coupling`); checked when the robot is built (joint range, repeats, signs);
- ``gear_ratio``: 1;
- ``limits`` (or one of its ``velocity``, ``acceleration``): velocity limits from the URDF
  ``<limit velocity>`` or :data:`~robotid_sim.robot.model.DEFAULT_VELOCITY_LIMIT`, acceleration
  limits :data:`~robotid_sim.robot.model.DEFAULT_ACCELERATION_LIMIT`;
- ``gravity``: ``[0, 0, -9.81]``; ``torque_measurement``: direct; ``default_excitation``: the
  generic one.

Per-joint lists have one value per moving joint; one number stands for all joints. With locked joints
a list may have one value per joint left moving, or one per moving joint of the URDF (the sidecar of the
unlocked robot: :meth:`Sidecar.for_joints` drops the locked joints' values, also from the per-joint fields
of ``default_excitation``).

A sidecar found beside a URDF rather than given (:func:`load_found_sidecar`) is ignored, with a
warning, when it is clearly another kind of YAML file (a scenario).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robotid_sim.errors import ConfigError, format_validation_error

log = logging.getLogger(__name__)

PerJoint = float | list[float]

#: the fields of an excitation mapping with one value (or row) per joint
_EXCITATION_ROWS = frozenset(
    {"q0", "a", "b", "amplitudes", "frequencies", "hold", "sine_amplitude", "sine_frequency", "q_start", "q_end"}
    | {"start", "velocity", "pose"}
)
#: the fields of an excitation mapping with one pose per row, one column per joint
_EXCITATION_COLUMNS = frozenset({"waypoints", "via", "poses"})
#: the fields of a friction mapping that are not per joint
_FRICTION_SCALARS = frozenset({"model", "sign_smoothing"})


def _kept(value, keep: Sequence[bool]):
    """``value`` without the entries ``keep`` marks False when it is a list of one entry per joint; else itself."""
    if isinstance(value, list) and len(value) == len(keep):
        return [v for v, k in zip(value, keep, strict=True) if k]
    return value


def _kept_excitation(config: dict[str, Any], keep: Sequence[bool]) -> dict[str, Any]:
    """An excitation mapping with the per-joint values of the joints ``keep`` marks False dropped (parts too)."""
    out = {}
    for key, value in config.items():
        if key in _EXCITATION_ROWS:
            value = _kept(value, keep)
        elif key in _EXCITATION_COLUMNS and isinstance(value, list):
            value = [_kept(row, keep) for row in value]
        elif key == "parts" and isinstance(value, list):
            value = [_kept_excitation(part, keep) if isinstance(part, dict) else part for part in value]
        out[key] = value
    return out


class Limits(BaseModel):
    """Joint limits beyond the URDF's: per joint (or one value for all), SI units; either may be left out."""

    model_config = ConfigDict(extra="forbid")
    velocity: PerJoint | None = Field(default=None, description="|qd| limit; default: the URDF's or 2")
    acceleration: PerJoint | None = Field(default=None, description="|qdd| limit; default: 5")


class TorqueMeasurement(BaseModel):
    """How the motor torque is measured (seed 001 Eq. 1: tau = eta * K * i_q)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["direct", "current"] = "direct"
    torque_constant: PerJoint | None = Field(
        default=None, description="K, N·m per A at the motor (rated torque coefficient)"
    )

    @model_validator(mode="after")
    def _current_needs_constant(self):
        if self.type == "current" and self.torque_constant is None:
            raise ValueError("type 'current' needs 'torque_constant' (K of seed 001 Eq. 1)")
        return self


class Sidecar(BaseModel):
    """Robot sidecar file ``<robot>.yaml`` next to the URDF; every field optional (module docstring)."""

    model_config = ConfigDict(extra="forbid")
    citation: str | None = Field(default=None, description="where the robot comes from (seed and table)")
    gravity: list[float] = Field(default=[0.0, 0.0, -9.81], min_length=3, max_length=3)
    friction: dict[str, Any] | None = Field(
        default=None,
        description="friction model, see robotid_sim.dynamics.friction; default: the URDF's <dynamics> tags or none",
    )
    rotor_inertia: PerJoint | None = Field(default=None, description="Ia per joint (kg·m², link side), or null")
    coupling: list[dict[str, Any]] | None = Field(
        default=None, description="coupled drives: [{joints: [5, 6], fv: ..., fc: ..., rotor_inertia: ...}]"
    )
    gear_ratio: PerJoint = Field(default=1.0, description="per joint; default 1")
    limits: Limits | None = Field(default=None, description="velocity/acceleration limits; default: URDF or 2 and 5")
    torque_measurement: TorqueMeasurement = TorqueMeasurement()
    default_excitation: dict[str, Any] | None = None
    dh: dict[str, Any] | None = Field(default=None, description="the DH table the URDF was made from")
    notes: str | None = None

    def for_joints(self, keep: Sequence[bool]) -> Sidecar:
        """This sidecar for the robot whose moving joints are those ``keep`` marks (the others locked).

        Args:
            keep: one flag per moving joint of the URDF, locked joints included, in chain order.

        Returns:
            A copy in which every per-joint list with one value per joint of the URDF (friction fields,
            ``rotor_inertia``, ``gear_ratio``, ``limits``, ``torque_measurement.torque_constant`` and the
            per-joint fields of ``default_excitation``) has lost the locked joints' values. Single numbers and
            lists of another length are left as they are (a list per unlocked joint is already right; a wrong
            length is reported when the robot is built). A coupled drive's joints are renumbered among the
            joints left moving; a locked joint leaves its drives (it no longer moves), and a drive whose joints
            are all locked is dropped with a warning.
        """
        if all(keep):
            return self
        update: dict[str, Any] = {
            "rotor_inertia": _kept(self.rotor_inertia, keep),
            "gear_ratio": _kept(self.gear_ratio, keep),
        }
        if self.friction is not None:
            update["friction"] = {k: v if k in _FRICTION_SCALARS else _kept(v, keep) for k, v in self.friction.items()}
        if self.limits is not None:
            update["limits"] = Limits(
                velocity=_kept(self.limits.velocity, keep), acceleration=_kept(self.limits.acceleration, keep)
            )
        constant = self.torque_measurement.torque_constant
        update["torque_measurement"] = self.torque_measurement.model_copy(
            update={"torque_constant": _kept(constant, keep)}
        )
        if self.default_excitation is not None:
            update["default_excitation"] = _kept_excitation(self.default_excitation, keep)
        if self.coupling is not None:
            update["coupling"] = _kept_coupling(self.coupling, keep)
        return self.model_copy(update=update)


def _kept_coupling(coupling: list, keep: Sequence[bool]) -> list:
    """The coupled drives of :meth:`Sidecar.for_joints`: joints renumbered among those ``keep`` marks, locked ones
    left out (a malformed entry is left as it is, for the robot's build to report)."""
    number = {j + 1: k + 1 for k, j in enumerate(j for j, kept in enumerate(keep) if kept)}
    out = []
    for entry in coupling:
        joints = entry.get("joints") if isinstance(entry, dict) else None
        if not isinstance(joints, list) or not all(isinstance(j, int) and 1 <= j <= len(keep) for j in joints):
            out.append(entry)
        elif any(j in number for j in joints):
            out.append({**entry, "joints": [number[j] for j in joints if j in number]})
        else:
            log.warning("coupled drive over joints %s left out: every one of its joints is locked", joints)
    return out


def _read_yaml(path: Path, where: str):
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{where}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where} is not valid YAML: {exc}") from None


def load_sidecar(path: str | Path) -> Sidecar:
    """Read and validate a sidecar YAML file.

    Raises:
        ConfigError: the file is missing, is not YAML or not a mapping, or a field is unknown or
            malformed (named).
    """
    path = Path(path)
    data = _read_yaml(path, f"sidecar {path}")
    if not isinstance(data, dict):
        raise ConfigError(f"sidecar {path} must be a mapping of fields, got {type(data).__name__}")
    return parse_sidecar(data, where=f"sidecar {path}")


#: top-level keys that only a scenario has: a file with one of them is never a sidecar
_SCENARIO_KEYS = frozenset({"robot", "estimators"})


def load_found_sidecar(path: str | Path, urdf: str | Path) -> Sidecar | None:
    """The sidecar ``path`` found beside ``urdf`` (not given explicitly), or None if it is not one.

    The file is ignored, with a warning naming it, when it is not a mapping (empty, a list) or
    when it has unknown fields and is plainly another kind of file: it has a scenario's
    ``robot:`` or ``estimators:`` key, or fewer sidecar fields than unknown ones. A file that
    is mostly sidecar fields is a sidecar: a typo, a malformed value or invalid YAML raise
    :class:`ConfigError` as for an explicit sidecar (saying where it was found).
    """
    path = Path(path)
    where = f"sidecar {path} (found beside {urdf})"
    data = _read_yaml(path, where)
    hint = "pass the sidecar explicitly (sidecar=, --sidecar or the scenario's 'sidecar:') to use one"
    if not isinstance(data, dict):
        what = (
            "it is empty"
            if data is None
            else f"it is not a robot sidecar (not a mapping of fields but {type(data).__name__})"
        )
        log.warning("ignoring %s found beside %s: %s; %s", path, urdf, what, hint)
        return None
    known = set(Sidecar.model_fields)
    unknown = [str(k) for k in data if k not in known]
    if unknown and (_SCENARIO_KEYS & set(data) or len(unknown) > len(data) - len(unknown)):
        kind = "a scenario" if _SCENARIO_KEYS & set(data) else "not a robot sidecar"
        log.warning(
            "ignoring %s found beside %s: it is %s (unknown sidecar field(s) %s); %s",
            path,
            urdf,
            kind,
            ", ".join(repr(k) for k in unknown[:6]) + (" ..." if len(unknown) > 6 else ""),
            hint,
        )
        return None
    return parse_sidecar(data, where=where)


def parse_sidecar(data: dict, where: str = "sidecar") -> Sidecar:
    """Validate a sidecar mapping."""
    try:
        return Sidecar.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where)) from None

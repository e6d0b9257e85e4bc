"""BIRDy's closed-loop data: the PyBullet truth under a PID at 5 kHz, encoder noise re-injected (issue 30).

BIRDy (TUM-ICS, the benchmark of Leboutet et al. 2021) generates its identification data in closed loop: a
decentralised PID at ``control_rate_hz`` (5 kHz) tracks an optimised Fourier excitation, the encoder reading
y = q + v (Gaussian v, drawn every control step) is what the controller sees, the velocity it uses is the
discrete derivative of y, and the measured torque is the control torque plus Gaussian noise that is *not* fed
back. Samples are recorded at ``sample_rate_hz`` (1 kHz). :func:`closed_loop_record` runs that loop on the
exact PyBullet backend (:class:`~robotid_sim.sim.pybullet_sim.PyBulletSimulator`, ``physics_substeps`` physics
steps per control step, rotor inertia and friction acting), control step k = 0 … K−1, t_k = k·dt:

1. plant state (q_k, qd_k), at k = 0 the reference's first state;
2. y_k = q_k + v_k, v_k ~ N(0, sd_q²) per joint (v = 0 without noise);
3. w_k = (y_k − y_{k−1}) / dt for k ≥ 1, w_0 = qd_ref(0);
4. e_k = q_ref(t_k) − y_k, ed_k = qd_ref(t_k) − w_k;
5. I_k = clip(I_{k−1} + e_k·dt, ±anti_windup), I_{−1} = 0;
6. u_k = Kp·e_k + Kd·ed_k + Ki·I_k (no feedforward, no gravity compensation);
7. ``physics_substeps`` physics steps under u_k (semi-implicit Euler, PyBullet's step; 4 by default, see
   :class:`PIDLoop`);
8. every control_rate_hz / sample_rate_hz steps a sample: t_k, y_k, u_k + N(0, sd_tau²), and the truth
   q_k, qd_k, qdd_k, u_k (the truth satisfies the robot's inverse dynamics: u_k = ID(q_k, qd_k, qdd_k)).

:func:`birdy_dataset` turns a record into a :class:`~robotid_sim.sim.dataset.Dataset` as BIRDy prepares its
identification data: the optional zero-phase 4th-order Butterworth low-pass (the "_f" variants) over the whole
record, velocity and acceleration by central differences of the (filtered) position (acceleration = central
difference of the velocity, as BIRDy's ``diffcent`` twice), ``trim`` samples dropped at each end, then
decimation by ``round(0.8·(fs/2)/500)`` (1 at 1 kHz) with SciPy's zero-phase :func:`scipy.signal.decimate`
through an 8th-order Butterworth anti-alias filter at 0.8 × the new Nyquist frequency (MATLAB's ``decimate``,
which BIRDy calls, uses a Chebyshev type I filter of the same order and cutoff, whose zero-phase gain at DC is
0.989: it would scale every signal by 1 %). ``metadata["closed_loop"]`` records the controller, the excitation,
the duration, the rate and the noise, which is what closed-loop estimators (DIDIM, CLOE, CLIE, IDIM-IV) need to
re-simulate the loop.

The noise presets are BIRDy's six (:data:`NOISE_PRESETS`), by BIRDy's names; BIRDy gives sd_q in degrees,
stored here in radians.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from math import isfinite

import numpy as np

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.progress import Progress
from robotid_sim.robot.model import Robot
from robotid_sim.sim.dataset import Dataset, Signals
from robotid_sim.sim.pybullet_sim import PyBulletSimulator
from robotid_sim.sim.simulate import check_seed, resolve_excitation

log = logging.getLogger(__name__)

__all__ = [
    "BIRDY_TX40_KTAU",
    "BIRDY_TX40_PID",
    "NOISE_PRESETS",
    "ClosedLoopRecord",
    "NoisePreset",
    "PIDLoop",
    "birdy_dataset",
    "birdy_decimation",
    "closed_loop_record",
]

#: robots whose default loop is :data:`BIRDY_TX40_PID`
TX40_ROBOTS = ("tx40", "tx40_coupled")

#: control steps between two progress calls
PROGRESS_EVERY = 1000

#: order of the "_f" low-pass (BIRDy's ``nfilt``) and of the anti-alias filter of the decimation
BUTTERWORTH_ORDER = 4
DECIMATION_ORDER = 8


def _gains(name: str, value, n: int | None) -> np.ndarray:
    """``value`` as (n,) finite floats, or a ConfigError naming the gain."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"PID gain '{name}' must be a list of numbers, one per joint, got {value!r}") from None
    if arr.ndim != 1 or arr.size == 0 or (n is not None and arr.size != n):
        want = f"{n} values, one per joint" if n is not None else "one value per joint"
        raise ConfigError(f"PID gain '{name}' must have {want}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"PID gain '{name}' must be finite, got {arr.tolist()}")
    return arr


def _positive(name: str, value) -> float:
    """``value`` as a finite float > 0, or a ConfigError naming it."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"'{name}' must be a number > 0, got {value!r}") from None
    if not (isfinite(x) and x > 0):
        raise ConfigError(f"'{name}' must be a finite number > 0, got {value!r}")
    return x


@dataclass(frozen=True, eq=False)
class PIDLoop:
    """A decentralised PID on the joint positions, BIRDy's data-generation controller.

    Attributes:
        kp, kd, ki: diagonal gains (n,) each: N·m/rad, N·m·s/rad, N·m/(rad·s).
        anti_windup: clamp on each joint's integral of the position error (rad·s).
        control_rate_hz: control rate.
        physics_substeps: physics steps per control step, the control torque held over them (the plant is
            integrated at control_rate_hz × physics_substeps). BIRDy integrates its plant with an ODE solver; a
            semi-implicit Euler step at the 5 kHz control rate is unstable on the TX40's wrist, whose Coulomb law
            tanh(100·qd) is a damping of fc/0.01 = 183 N·m·s/rad at rest against about 0.012 kg·m² of inertia
            (stable below 2·I/c ≈ 0.13 ms): joint 6's acceleration chattered at ±147 rad/s² around every
            velocity reversal. Four substeps (50 µs) are stable on tx40 and tx40_coupled.

    Raises:
        ConfigError: gains of different lengths or not finite; a rate or clamp that is not a finite number > 0.
    """

    kp: np.ndarray
    kd: np.ndarray
    ki: np.ndarray
    anti_windup: float = 5.0
    control_rate_hz: float = 5000.0
    physics_substeps: int = 4

    def __post_init__(self) -> None:
        kp = _gains("kp", self.kp, None)
        object.__setattr__(self, "kp", kp)
        object.__setattr__(self, "kd", _gains("kd", self.kd, kp.size))
        object.__setattr__(self, "ki", _gains("ki", self.ki, kp.size))
        object.__setattr__(self, "anti_windup", _positive("anti_windup", self.anti_windup))
        object.__setattr__(self, "control_rate_hz", _positive("control_rate_hz", self.control_rate_hz))
        substeps = self.physics_substeps
        if isinstance(substeps, bool) or not isinstance(substeps, int | np.integer) or not 1 <= substeps <= 100:
            raise ConfigError(f"physics_substeps must be a whole number from 1 to 100, got {substeps!r}")
        object.__setattr__(self, "physics_substeps", int(substeps))

    @property
    def n_dof(self) -> int:
        return int(self.kp.size)

    def to_dict(self) -> dict:
        """``{"type": "pid", "kp": [...], "kd": [...], "ki": [...], "anti_windup": ..., "control_rate_hz": ...,
        "physics_substeps": ...}``."""
        return {
            "type": "pid",
            "kp": self.kp.tolist(),
            "kd": self.kd.tolist(),
            "ki": self.ki.tolist(),
            "anti_windup": self.anti_windup,
            "control_rate_hz": self.control_rate_hz,
            "physics_substeps": self.physics_substeps,
        }

    @classmethod
    def from_dict(cls, d: Mapping, n_dof: int) -> PIDLoop:
        """The loop :meth:`to_dict` wrote, checked for ``n_dof`` joints (a ConfigError naming the field)."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"a PID loop must be a mapping like PIDLoop.to_dict() writes, got {type(d).__name__}")
        if d.get("type", "pid") != "pid":
            raise ConfigError(f"controller type {d.get('type')!r} is not a PID loop ('pid')")
        fields = ("anti_windup", "control_rate_hz", "physics_substeps")
        unknown = sorted(set(d) - {"type", "kp", "kd", "ki", *fields})
        if unknown:
            raise ConfigError(f"unknown PID loop field(s) {unknown}; valid: kp, kd, ki, {', '.join(fields)}")
        missing = [k for k in ("kp", "kd", "ki") if k not in d]
        if missing:
            raise ConfigError(f"the PID loop misses the gain(s) {missing} (one value per joint each)")
        gains = {k: _gains(k, d[k], n_dof) for k in ("kp", "kd", "ki")}
        extra = {k: d[k] for k in fields if k in d}
        return cls(**gains, **extra)


#: the TX40's torque-loop gains Ktau (TX40.m), by which BIRDy multiplies its PID's output
BIRDY_TX40_KTAU = np.array([35.24, 32.04, 23.94, 9.05, 15.5, 6.56])

#: BIRDy's final TX40 loop (TX40.m, computeControlInput.m): u = Ktau·(Kp·e + Kd·ė + Ki·∫e) with Kp = 0.75·diag(...),
#: Kd = diag(...), Ki = 0, anti-windup 5, 5 kHz; the gains here are the products Ktau·Kp and Ktau·Kd
BIRDY_TX40_PID = PIDLoop(
    kp=BIRDY_TX40_KTAU * 0.75 * np.array([455.8254, 500.0, 253.7919, 200.2182, 244.3226, 478.4783]),
    kd=BIRDY_TX40_KTAU * np.array([2.5361, 4.1174, 1.1793, 0.5462, 0.5714, 0.1954]),
    ki=np.zeros(6),
    anti_windup=5.0,
    control_rate_hz=5000.0,
)


@dataclass(frozen=True, eq=False)
class NoisePreset:
    """Encoder and torque noise of a closed-loop run: standard deviations per joint.

    Attributes:
        name: the preset's name (BIRDy's for :data:`NOISE_PRESETS`).
        sd_q: encoder noise (n,) in rad (re-injected into the loop).
        sd_tau: torque measurement noise (n,) in N·m (not fed back).
    """

    name: str
    sd_q: np.ndarray
    sd_tau: np.ndarray

    def __post_init__(self) -> None:
        for field in ("sd_q", "sd_tau"):
            arr = np.atleast_1d(np.asarray(getattr(self, field), dtype=float))
            if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ConfigError(f"noise '{self.name}': '{field}' must be finite standard deviations >= 0")
            object.__setattr__(self, field, arr)

    def for_joints(self, n: int) -> NoisePreset:
        """This preset for ``n`` joints: a preset with one value for every joint is broadcast; a per-joint one
        must have n values (ConfigError otherwise)."""
        out = {}
        for field in ("sd_q", "sd_tau"):
            arr = getattr(self, field)
            if arr.size == n:
                out[field] = arr
            elif np.all(arr == arr[0]):
                out[field] = np.full(n, arr[0])
            else:
                raise ConfigError(
                    f"noise '{self.name}' gives {arr.size} per-joint values of '{field}', the robot has {n} joints; "
                    "choose a preset with one value for all joints (e.g. 'lowPositionNoise') or give a NoisePreset"
                )
        return NoisePreset(self.name, out["sd_q"], out["sd_tau"])

    def to_dict(self) -> dict:
        """``{"preset": name, "sd_q": [...], "sd_tau": [...]}`` as ``metadata["closed_loop"]["noise"]``."""
        return {"preset": self.name, "sd_q": self.sd_q.tolist(), "sd_tau": self.sd_tau.tolist()}


def _birdy_preset(name: str, sd_q_deg, sd_tau: float) -> NoisePreset:
    return NoisePreset(name, np.deg2rad(np.broadcast_to(np.asarray(sd_q_deg, float), (6,))), np.full(6, sd_tau))


#: BIRDy's six noise presets (sd_q given in degrees by BIRDy, stored in rad; sd_tau in N·m), on six joints
NOISE_PRESETS: dict[str, NoisePreset] = {
    p.name: p
    for p in (
        _birdy_preset("oldNoise", [0.057e-3, 0.057e-3, 0.122e-3, 0.114e-3, 0.122e-3, 0.172e-3], 0.05),
        _birdy_preset("lowPositionNoise", 1e-4, 0.05),
        _birdy_preset("standardNoise", 1e-3, 0.05),
        _birdy_preset("highTorqueNoise", 1e-3, 0.1),
        _birdy_preset("highPositionNoise", 1e-2, 0.05),
        _birdy_preset("highPositionTorqueNoise", 1e-2, 0.1),
    )
}


def _noise_preset(noise, n: int) -> NoisePreset | None:
    """None, a preset name or a :class:`NoisePreset`, for ``n`` joints (ConfigError naming the six)."""
    if noise is None:
        return None
    if isinstance(noise, str):
        if noise not in NOISE_PRESETS:
            raise ConfigError(f"unknown noise preset {noise!r}; BIRDy's presets are {', '.join(NOISE_PRESETS)}")
        return NOISE_PRESETS[noise].for_joints(n)
    if isinstance(noise, NoisePreset):
        return noise.for_joints(n)
    raise ConfigError(f"noise must be None, a preset name ({', '.join(NOISE_PRESETS)}) or a NoisePreset, got {noise!r}")


@dataclass(frozen=True, eq=False)
class ClosedLoopRecord:
    """One closed-loop run at the sample rate: what was measured, the truth, and how it was made.

    Attributes:
        robot: the robot's name; joint_names: its joints.
        t: sample times t_k (N,) since the loop started.
        q: measured positions y_k = q_k + v_k (N, n).
        tau: measured torques u_k + noise (N, n).
        truth: q_k, qd_k, qdd_k and the control torque u_k (the noise-free motor torque).
        loop: the controller; excitation: the reference (an explicit mapping, ``describe()``).
        noise: the noise (None: noise-free); seed: its seed.
        duration: seconds of closed loop; sample_rate_hz: the rate of the samples.
    """

    robot: str
    joint_names: list[str]
    t: np.ndarray
    q: np.ndarray
    tau: np.ndarray
    truth: Signals
    loop: PIDLoop
    excitation: dict
    noise: NoisePreset | None
    seed: int
    duration: float
    sample_rate_hz: float

    def closed_loop_metadata(self) -> dict:
        """``metadata["closed_loop"]`` of a dataset made from this record (controller, excitation, duration,
        sample rate, noise)."""
        zero = [0.0] * len(self.joint_names)
        noise = self.noise.to_dict() if self.noise is not None else {"preset": None, "sd_q": zero, "sd_tau": zero}
        return {
            "controller": self.loop.to_dict(),
            "excitation": self.excitation,
            "duration": self.duration,
            "sample_rate_hz": self.sample_rate_hz,
            "noise": noise,
        }


class _PID:
    """The PID of one run (steps 2–6 of the module docstring), called once per control step with (q, qd)."""

    def __init__(self, loop: PIDLoop, q_ref: np.ndarray, qd_ref: np.ndarray, encoder_noise: np.ndarray | None):
        self.kp, self.kd, self.ki = loop.kp.tolist(), loop.kd.tolist(), loop.ki.tolist()
        self.dt = 1.0 / loop.control_rate_hz
        self.clamp = loop.anti_windup
        self.q_ref, self.qd_ref = q_ref.tolist(), qd_ref.tolist()
        self.noise = encoder_noise.tolist() if encoder_noise is not None else None
        self.integral = [0.0] * loop.n_dof
        self.k = 0
        self.y: list[float] = []

    def __call__(self, q: list[float], qd: list[float]) -> list[float]:
        k, dt, clamp = self.k, self.dt, self.clamp
        y = [a + b for a, b in zip(q, self.noise[k], strict=True)] if self.noise is not None else q
        w = self.qd_ref[0] if k == 0 else [(a - b) / dt for a, b in zip(y, self.y, strict=True)]
        e = [r - a for r, a in zip(self.q_ref[k], y, strict=True)]
        ed = [r - a for r, a in zip(self.qd_ref[k], w, strict=True)]
        self.integral = [min(max(i + x * dt, -clamp), clamp) for i, x in zip(self.integral, e, strict=True)]
        self.y, self.k = y, k + 1
        return [
            p * x + d * xd + c * i
            for p, d, c, x, xd, i in zip(self.kp, self.kd, self.ki, e, ed, self.integral, strict=True)
        ]


def _steps(duration, control_rate_hz: float, sample_rate_hz) -> tuple[int, int]:
    """(control steps K, control steps per sample); ConfigError when the rates or the duration do not fit."""
    duration = _positive("duration", duration)
    sample_rate_hz = _positive("sample_rate_hz", sample_rate_hz)
    per_sample = round(control_rate_hz / sample_rate_hz)
    if per_sample < 1 or abs(per_sample * sample_rate_hz - control_rate_hz) > 1e-9 * control_rate_hz:
        raise ConfigError(
            f"sample_rate_hz = {sample_rate_hz:g} must divide the control rate {control_rate_hz:g} Hz "
            "(BIRDy: 1000 Hz samples of a 5000 Hz loop)"
        )
    steps = round(duration * control_rate_hz)
    if steps < 2 * per_sample:
        raise ConfigError(f"duration = {duration:g} s gives fewer than two samples at {sample_rate_hz:g} Hz")
    return steps, per_sample


def _default_loop(robot: Robot, loop: PIDLoop | None) -> PIDLoop:
    if loop is None:
        if robot.name not in TX40_ROBOTS:
            raise ConfigError(
                f"robot '{robot.name}' has no default PID loop (only {', '.join(TX40_ROBOTS)} have BIRDy's gains); "
                "give loop=PIDLoop(kp=..., kd=..., ki=...) with one gain per joint"
            )
        return BIRDY_TX40_PID
    if not isinstance(loop, PIDLoop):
        raise ConfigError(f"loop must be a PIDLoop or None, got {type(loop).__name__}")
    if loop.n_dof != robot.n_dof:
        raise ConfigError(
            f"the PID loop has {loop.n_dof} gains per term, robot '{robot.name}' has {robot.n_dof} joints; "
            "give one gain per joint"
        )
    return loop


def closed_loop_record(
    robot: Robot | str,
    excitation=None,
    loop: PIDLoop | None = None,
    noise=None,
    seed: int = 0,
    duration: float = 10.0,
    sample_rate_hz: float = 1000.0,
    progress: Progress | None = None,
) -> ClosedLoopRecord:
    """Run BIRDy's closed loop on PyBullet along ``excitation`` (module docstring, steps 1–8).

    Args:
        robot: a :class:`~robotid_sim.robot.Robot` or a name/path for :func:`~robotid_sim.robot.load_robot`.
        excitation: None (the robot's ``default_excitation``), an excitation mapping as in scenarios, or an
            excitation object.
        loop: the PID; None is :data:`BIRDY_TX40_PID` for tx40 and tx40_coupled (a ConfigError elsewhere).
        noise: None (noise-free), a preset name of :data:`NOISE_PRESETS`, or a :class:`NoisePreset`.
        seed: seeds the noise (encoder noise for every control step first, then the torque noise).
        duration: seconds of closed loop from t = 0.
        sample_rate_hz: rate of the recorded samples; must divide the loop's control rate.
        progress: ``progress("simulate", steps_done, steps_total)``, called every 1000 control steps.

    Returns:
        A :class:`ClosedLoopRecord` of round(duration·sample_rate_hz) samples.

    Raises:
        ConfigError: an unknown preset, gains of the wrong length, rates that do not divide, a bad duration or
            seed, a reference that leaves the joint limits (checked before running).
        DataError: the loop diverged (non-finite state) or a joint left its limits (checked after running).
    """
    from robotid_sim.robot import load_robot

    check_seed(seed)
    if not isinstance(robot, Robot):
        robot = load_robot(robot)
    loop = _default_loop(robot, loop)
    preset = _noise_preset(noise, robot.n_dof)
    steps, per_sample = _steps(duration, loop.control_rate_hz, sample_rate_hz)
    duration = steps / loop.control_rate_hz
    exc = resolve_excitation(robot, "default" if excitation is None else excitation)
    exc.check_limits(robot, duration=min(duration, exc.duration))
    t = np.arange(steps) / loop.control_rate_hz
    q_ref, qd_ref, _ = exc.evaluate(t)
    rng = np.random.default_rng(seed)
    encoder = rng.standard_normal((steps, robot.n_dof)) * preset.sd_q if preset is not None else None
    with PyBulletSimulator(robot, dt=1.0 / (loop.control_rate_hz * loop.physics_substeps)) as sim:
        sim.reset(q_ref[0], qd_ref[0])
        rec = _run(sim, _PID(loop, q_ref, qd_ref, encoder), steps, per_sample, loop.physics_substeps, progress)
        sim.check_positions(rec["q"], q_ref=q_ref[::per_sample], controller="PID")
    u = rec["u"]
    tau = u + rng.standard_normal(u.shape) * preset.sd_tau if preset is not None else u.copy()
    log.info("closed loop on %s for %.3g s: %d control steps, %d samples", robot.name, duration, steps, len(u))
    return ClosedLoopRecord(
        robot=robot.name,
        joint_names=list(robot.joint_names),
        t=t[::per_sample],
        q=rec["y"],
        tau=tau,
        truth=Signals(rec["q"], rec["qd"], rec["qdd"], u),
        loop=loop,
        excitation=exc.describe(),
        noise=preset,
        seed=int(seed),
        duration=float(duration),
        sample_rate_hz=float(sample_rate_hz),
    )


def _run(
    sim: PyBulletSimulator, pid: _PID, steps: int, per_sample: int, substeps: int, progress
) -> dict[str, np.ndarray]:
    """The control steps on PyBullet, each ``substeps`` physics steps under the same torque; every
    ``per_sample``-th control step's y, q, qd, qdd (of its first physics step), u as (N, n) arrays."""
    names = ("y", "q", "qd", "qdd", "u")
    rows: dict[str, list] = {name: [] for name in names}
    y, q_, qd_, qdd_, u_ = (rows[name].append for name in names)
    for k in range(steps):
        q, qd, u, qdd = sim.step_controlled(pid)
        for _ in range(substeps - 1):
            sim.step_torque(u)
        if k % per_sample == 0:
            y(pid.y)
            q_(q)
            qd_(qd)
            qdd_(qdd)
            u_(u)
        if k % PROGRESS_EVERY == 0:
            if not isfinite(sum(q) + sum(qd)):
                raise DataError(
                    f"the closed loop on robot '{sim.robot.name}' diverged by t = {k * substeps * sim.dt:.4g} s "
                    "(non-finite state): the PID gains do not stabilise it; raise kd or lower kp"
                )
            if progress is not None:
                progress("simulate", k, steps)
    if progress is not None:
        progress("simulate", steps, steps)
    out = {name: np.array(rows[name], dtype=float) for name in names}
    if not np.all(np.isfinite(out["q"])):
        raise DataError(
            f"the closed loop on robot '{sim.robot.name}' diverged (non-finite state): the PID gains do not "
            "stabilise it; raise kd or lower kp"
        )
    return out


def birdy_decimation(sample_rate_hz: float) -> int:
    """BIRDy's decimation factor round(0.8·(fs/2)/500), at least 1 (1 at BIRDy's 1 kHz)."""
    return max(1, round(0.8 * (sample_rate_hz / 2) / 500))


def _preprocessing(record: ClosedLoopRecord, derivatives, filtered, trim, decimation, cutoff_hz) -> tuple[int, int]:
    """(trim, decimation) checked for :func:`birdy_dataset`; ConfigError naming the bad option."""
    if not isinstance(record, ClosedLoopRecord):
        raise ConfigError(f"birdy_dataset needs a ClosedLoopRecord (closed_loop_record), got {type(record).__name__}")
    if derivatives not in ("central", "exact"):
        raise ConfigError(f"derivatives must be 'central' or 'exact', got {derivatives!r}")
    fs = record.sample_rate_hz
    least = 2 if derivatives == "central" else 0
    if isinstance(trim, bool) or not isinstance(trim, int | np.integer) or trim < least:
        raise ConfigError(
            f"trim must be a whole number of samples >= {least} "
            + ("(every kept sample's derivatives are then central differences)" if least else "")
            + f", got {trim!r}"
        )
    decimation = birdy_decimation(fs) if decimation is None else decimation
    if isinstance(decimation, bool) or not isinstance(decimation, int | np.integer) or decimation < 1:
        raise ConfigError(f"decimation must be a whole number >= 1 (or None for BIRDy's rule), got {decimation!r}")
    if filtered:
        cutoff = _positive("cutoff_hz", cutoff_hz)
        if cutoff >= fs / 2:
            raise ConfigError(f"cutoff_hz = {cutoff:g} must be below the Nyquist frequency {fs / 2:g} Hz")
    kept = len(record.t) - 2 * int(trim)
    # SciPy's filtfilt pads by 3 filter lengths: 15 samples for the "_f" low-pass, 27 for the anti-alias one
    if kept // int(decimation) < 2 or (filtered and len(record.t) <= 15) or (decimation > 1 and kept <= 27):
        raise DataError(
            f"the record has {len(record.t)} samples: after trimming {trim} per end and decimating by {decimation} "
            "too few remain; record longer or trim less"
        )
    return int(trim), int(decimation)


def birdy_dataset(
    record: ClosedLoopRecord,
    *,
    derivatives: str = "central",
    filtered: bool = False,
    trim: int = 50,
    decimation: int | None = None,
    cutoff_hz: float = 50.0,
) -> Dataset:
    """A :class:`~robotid_sim.sim.dataset.Dataset` from a closed-loop record, by BIRDy's preprocessing.

    Args:
        record: from :func:`closed_loop_record`.
        derivatives: ``"central"``: qd and qdd by central differences of the measured (filtered) q, BIRDy's;
            ``"exact"``: the simulator's own qd and qdd with the measured q and tau (noise-free exactness checks).
        filtered: apply the zero-phase 4th-order Butterworth low-pass at ``cutoff_hz`` to q and tau over the
            whole record first (BIRDy's "_f" variants; BIRDy's own code filters q only).
        trim: samples dropped at each end (BIRDy: 50); at least 2 with central differences.
        decimation: keep every ``decimation``-th sample after a zero-phase Butterworth anti-alias filter
            (:func:`scipy.signal.decimate`); None is BIRDy's rule (:func:`birdy_decimation`: 1 at 1 kHz).
        cutoff_hz: the low-pass's cutoff (Hz).

    Returns:
        The dataset: ``t`` the kept samples' t_k, the truth at those samples (not filtered), and metadata:
        ``robot``, ``closed_loop`` (:meth:`ClosedLoopRecord.closed_loop_metadata`), ``preprocessing``,
        ``seed``, ``rate_hz`` (after decimation), ``source``.

    Raises:
        ConfigError: an unknown ``derivatives``, a bad trim, decimation or cutoff.
        DataError: too few samples left.
    """
    from scipy import signal  # SciPy loads only when preprocessing

    trim, decimation = _preprocessing(record, derivatives, filtered, trim, decimation, cutoff_hz)
    fs = record.sample_rate_hz
    q, tau = record.q, record.tau
    if filtered:
        b, a = signal.butter(BUTTERWORTH_ORDER, cutoff_hz / (fs / 2))
        q, tau = signal.filtfilt(b, a, q, axis=0), signal.filtfilt(b, a, tau, axis=0)
    if derivatives == "central":
        qd = np.gradient(q, 1.0 / fs, axis=0)
        qdd = np.gradient(qd, 1.0 / fs, axis=0)
    else:
        qd, qdd = record.truth.qd, record.truth.qdd
    keep = slice(trim, len(record.t) - trim)
    measured = [x[keep] for x in (q, qd, qdd, tau)]
    truth = [x[keep] for x in (record.truth.q, record.truth.qd, record.truth.qdd, record.truth.tau)]
    t = record.t[keep]
    if decimation > 1:
        anti_alias = signal.dlti(*signal.butter(DECIMATION_ORDER, 0.8 / decimation))
        measured = [signal.decimate(x, decimation, ftype=anti_alias, axis=0, zero_phase=True) for x in measured]
        truth = [x[::decimation] for x in truth]
        t = t[::decimation]
    metadata = {
        "robot": record.robot,
        "source": "closed-loop simulation (PyBullet, BIRDy's PID)",
        "closed_loop": record.closed_loop_metadata(),
        "preprocessing": {
            "derivatives": derivatives,
            "filtered": bool(filtered),
            "cutoff_hz": float(cutoff_hz) if filtered else None,
            "trim": trim,
            "decimation": decimation,
        },
        "seed": record.seed,
        "rate_hz": fs / decimation,
    }
    return Dataset(t, *measured, truth=Signals(*truth), joint_names=list(record.joint_names), metadata=metadata)

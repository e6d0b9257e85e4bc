"""Trajectory-level validation: forward-simulate a model under a recorded torque (SPEC §9,
seed 004 §5.1, seed 003 Fig. 12–14), and the open-loop and forward-dynamics validation of a model on
validation data (:func:`open_loop_reference`, :func:`forward_dynamics_validation`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robotid_sim.dynamics.forward import robust_forward, semi_implicit_euler
from robotid_sim.errors import DataError
from robotid_sim.identification import metrics as M
from robotid_sim.signal import is_uniform
from robotid_sim.sim.logs import experiments

ForwardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def rollout(
    forward: ForwardFn,
    q0: np.ndarray,
    qd0: np.ndarray,
    tau: np.ndarray,
    dt: float | np.ndarray,
    substeps: int = 2,
) -> tuple[np.ndarray, np.ndarray]:
    """Open-loop semi-implicit Euler integration of ``qdd = forward(q, qd, tau)``.

    Args:
        forward: batched forward dynamics (N, n) x3 -> (N, n); called with N = 1.
        q0, qd0: (n,) initial state.
        tau: (K, n) torque held constant over each interval ``dt`` (zero-order hold).
        dt: sample interval (s), or (K,) the length of each interval (a jittery clock); each is split into
            ``substeps`` integration steps.

    Returns:
        (q, qd), each (K, n): the state at the start of each interval; NaN from the point where
        the integration diverged (an identified model can be physically inconsistent).
    """
    K, n = tau.shape
    q, qd = np.array(q0, float)[None], np.array(qd0, float)[None]
    out_q, out_qd = np.full((K, n), np.nan), np.full((K, n), np.nan)

    def checked(q, qd, tau):  # a singular identified mass matrix stops the rollout like a divergence
        return robust_forward(forward, q, qd, tau)

    h = np.broadcast_to(np.asarray(dt, float) / substeps, (K,))
    for k in range(K):
        out_q[k], out_qd[k] = q[0], qd[0]
        q, qd, ok = semi_implicit_euler(checked, q, qd, tau[k][None], h[k], substeps)
        if not ok[0]:
            return out_q, out_qd  # diverged: the rest stays NaN
    return out_q, out_qd


@dataclass(frozen=True)
class TrajectoryError:
    """How far a model's open-loop joint trajectory is from the reference (seed 004 Table 5, Eq. 45–47).

    Each is (n,), per joint, with the reference as the observed signal o and the model's trajectory as
    the predicted one p (:mod:`robotid_sim.identification.metrics`). A joint where the model's simulation
    diverged (NaN, or positions so large that their squared error overflows) has RMS and RSD inf and
    agreement index 0, the limit of Willmott's index as the prediction runs away. (RSD is inf as well on a
    joint whose reference stays at 0 while the model moves: :func:`~robotid_sim.identification.metrics.rsd`.)

    Attributes:
        rms: residual RMS sqrt(Σ(o − p)² / K), in the joint's unit (rad or m).
        rsd: residual standard deviation sqrt(Σ(o − p)² / Σo²), dimensionless.
        agreement_index: Willmott's agreement index in [0, 1], 1 a perfect match.
    """

    rms: np.ndarray
    rsd: np.ndarray
    agreement_index: np.ndarray

    @classmethod
    def between(cls, q_model, q_reference) -> TrajectoryError:
        """The error of a model's open-loop motion ``q_model`` (K, n; NaN after a divergence, as
        :func:`rollout` leaves it) against ``q_reference`` (K, n)."""
        q_model, q_reference = np.asarray(q_model, float), np.asarray(q_reference, float)
        n = q_reference.shape[1]
        rsd, agreement = np.full(n, np.inf), np.zeros(n)
        with np.errstate(over="ignore", invalid="ignore"):  # a finite but huge divergence overflows the square
            rms = np.sqrt(np.mean((q_model - q_reference) ** 2, axis=0))
            ok = np.isfinite(rms)
            if ok.any():
                rsd[ok] = M.rsd(q_reference[:, ok], q_model[:, ok])
                agreement[ok] = M.agreement_index(q_reference[:, ok], q_model[:, ok])
        diverged = ~ok | np.isnan(agreement)  # NaN: the agreement index's sums overflowed
        rms[diverged], rsd[diverged], agreement[diverged] = np.inf, np.inf, 0.0
        return cls(rms, rsd, agreement)


def trajectory_error(model_forward: ForwardFn, q_reference: np.ndarray, q0, qd0, tau, dt) -> TrajectoryError:
    """RMS, RSD and agreement index per joint of the difference between a model's open-loop response to
    ``tau`` and ``q_reference`` (K, n), the true model's :func:`rollout` under the same torque (so that only
    the model differs, not the integrator) or a measured trajectory; one rollout serves all three."""
    q_model, _ = rollout(model_forward, q0, qd0, tau, dt)
    return TrajectoryError.between(q_model, q_reference)


#: the open-loop validation's reference, in a run folder (read back by ``robotid-sim report``)
OPEN_LOOP_FILE = "data/open_loop.npz"


@dataclasses.dataclass(frozen=True)
class OpenLoopReference:
    """The open-loop validation of a run (SPEC §9, seed 003 Fig. 12–14): every model is simulated from the
    reference's first state under the reference torque, and compared with the reference motion.

    Attributes:
        t: (K,) time from the start of the rollout (s).
        q_reference: (K, n) the reference motion: the true robot's rollout (simulation) or the measured one.
        q0, qd0: (n,) the first state; tau: (K, n) the torque, held over each interval dt (s): one step, or
            (K,) the steps of a jittery clock (:func:`interval_steps`).
    """

    t: np.ndarray
    q_reference: np.ndarray
    q0: np.ndarray
    qd0: np.ndarray
    tau: np.ndarray
    dt: float | np.ndarray

    def save(self, path: Path) -> None:
        np.savez(path, **{k: np.asarray(v, float) for k, v in dataclasses.asdict(self).items()})

    @classmethod
    def load(cls, path: Path) -> OpenLoopReference:
        """Read :meth:`save`'s file. Raises DataError when it is damaged."""
        try:
            with np.load(path, allow_pickle=False) as data:
                fields = {f.name: np.asarray(data[f.name], float) for f in dataclasses.fields(cls)}
        except (OSError, KeyError, ValueError) as exc:
            raise DataError(f"{path} is damaged ({type(exc).__name__}: {exc})") from None
        fields["dt"] = float(fields["dt"]) if fields["dt"].ndim == 0 else fields["dt"]
        K, n = fields["q_reference"].shape if fields["q_reference"].ndim == 2 else (0, 0)
        if (
            K < 2
            or fields["t"].shape != (K,)
            or fields["tau"].shape != (K, n)
            or fields["q0"].shape != (n,)
            or np.shape(fields["dt"]) not in ((), (K,))
        ):
            raise DataError(f"{path} is damaged (inconsistent shapes)")
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class ForwardDynamicsValidation:
    """A model's forward dynamics on the validation data (seed 003 §3.3, Fig. 12–14).

    Attributes:
        qdd: (N, n) accelerations M(q)⁻¹(τ − h(q, qd)) of the model under the validation torque
            (:func:`validation_reference`), or None when its mass matrix is singular somewhere or the model has
            no forward dynamics.
        acceleration_rms, acceleration_rsd: (n,) against the recorded accelerations (inf when ``qdd`` is None);
            None for a model without forward dynamics.
        q_open_loop: (K, n) the model's open-loop motion under the reference torque (NaN after a divergence),
            or None without an open-loop reference.
        max_error: (n,) max |q_model − q_reference| over the horizon (rad or m; inf after a divergence); empty
            without an open-loop reference.
    """

    qdd: np.ndarray | None
    acceleration_rms: np.ndarray | None
    acceleration_rsd: np.ndarray | None
    q_open_loop: np.ndarray | None
    max_error: np.ndarray


def validation_reference(ds_val):
    """The signals a model's forward dynamics is judged on: the noise-free ``truth`` of a simulation (so that
    only the model differs, as in the open-loop validation; torque noise divided by a small inertia would
    swamp the accelerations), else the measured ones."""
    return ds_val.truth if ds_val.truth is not None else ds_val


def open_loop_reference(robot, ds_val, horizon: float, *, simulated: bool) -> OpenLoopReference | None:
    """The open-loop validation of ``horizon`` s: from the first state of ``ds_val``'s first experiment under its
    torque, the true robot's motion (``simulated``: the robot's rollout from the noise-free ``truth``) or the
    measured motion (recorded data); None when the horizon is under two samples or longer than that experiment."""
    K = int(round(horizon / ds_val.dt))
    first = experiments(ds_val)[0][1]
    if not 1 < K <= first.stop - first.start:
        return None
    ref = ds_val.truth if simulated else ds_val
    steps = interval_steps(ds_val.t[first], K, ds_val.dt)
    rollout_args = (ref.q[first.start], ref.qd[first.start], ref.tau[first.start : first.start + K], steps)
    q_reference = rollout(robot.forward_dynamics, *rollout_args)[0] if simulated else ref.q[first][:K]
    return OpenLoopReference(ds_val.t[first][:K] - ds_val.t[first.start], q_reference, *rollout_args)


def interval_steps(t: np.ndarray, K: int, dt: float) -> float | np.ndarray:
    """The length of each of the first ``K`` intervals of the stamps ``t``: ``dt`` (the median step) on an even
    clock (:func:`~robotid_sim.signal.is_uniform`), else (K,) steps (the last, when ``t`` ends there, is ``dt``)."""
    if is_uniform(t[: K + 1]):
        return dt
    steps = np.diff(t[: K + 1])
    return np.concatenate([steps, np.full(K - steps.shape[0], dt)])


def forward_dynamics_validation(model, ds_val, open_loop: OpenLoopReference | None) -> ForwardDynamicsValidation:
    """Accelerations of ``model`` under the validation torque against the recorded ones (both from
    :func:`validation_reference`), and its open-loop rollout against ``open_loop``'s reference (seed 003 §3.3:
    the minimal set rebuilt into M(q) and h(q, qd))."""
    if not model.has_forward_dynamics:
        return ForwardDynamicsValidation(None, None, None, None, np.zeros(0))
    ref = validation_reference(ds_val)
    n = ref.q.shape[1]
    try:
        qdd = np.asarray(model.forward_dynamics(ref.q, ref.qd, ref.tau), float)
        if not np.all(np.isfinite(qdd)):
            raise DataError("non-finite accelerations")
        rms, rsd = M.rms_index(ref.qdd, qdd), M.rsd(ref.qdd, qdd)
    except (DataError, np.linalg.LinAlgError):
        qdd, rms, rsd = None, np.full(n, np.inf), np.full(n, np.inf)
    if open_loop is None:
        return ForwardDynamicsValidation(qdd, rms, rsd, None, np.zeros(0))
    q_model = rollout(model.forward_dynamics, open_loop.q0, open_loop.qd0, open_loop.tau, open_loop.dt)[0]
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(q_model - open_loop.q_reference)
        max_error = np.where(np.isfinite(error).all(axis=0), np.max(error, axis=0), np.inf)
    return ForwardDynamicsValidation(qdd, rms, rsd, q_model, max_error)

"""What the online estimators (seed 004: Adaline, Hopfield network, EKF; the filters of the EKF family) share.

They consume the samples in time order, as a controller would receive them, and keep how the
parameters evolved (:class:`~robotid_sim.identification.History`, time in seconds of the
stream). The delta rule and the Hopfield network replay the stream for several epochs; the
history then runs on, epoch after epoch, in stream time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field

from robotid_sim.errors import ConfigError, IdentificationError
from robotid_sim.identification.estimator import EstimatorOptions
from robotid_sim.identification.metrics import robust_std
from robotid_sim.identification.model import History

#: at most this many parameter vectors are kept in a history (the stream is decimated to fit)
MAX_HISTORY = 4000


@dataclass(frozen=True)
class Stream:
    """The problem's samples in time order, as the delta rule and the Hopfield network read them.

    Attributes:
        Y: (N, n, b) base-regressor rows of each sample; rows the velocity dead-band left out are zero.
        tau: (N, n) measured torque, zero on those rows too (a zero row adds nothing to a gradient).
        t: (N,) sample times.
        dt: the sample interval.
        scale: (b,) RMS of each base-regressor column over a sample's rows (1 for a column that is all zero).
    """

    Y: np.ndarray
    tau: np.ndarray
    t: np.ndarray
    dt: float
    scale: np.ndarray


def problem_stream(problem) -> Stream:
    """The :class:`Stream` of an identification problem (its rows in use, in time order)."""
    Y = problem.base_regressor(stacked=False)
    tau = np.array(problem.dataset.tau, dtype=float)
    weights = problem.row_weights().reshape(tau.shape)
    if not weights.all():
        tau = tau * weights
    t = np.asarray(problem.dataset.t, float)
    scale = np.sqrt(np.mean(np.einsum("kji,kji->ki", Y, Y), axis=0))
    scale = np.where(scale > 0, scale, 1.0)
    return Stream(np.ascontiguousarray(Y), np.ascontiguousarray(tau), t, float(problem.dataset.dt), scale)


def epoch_steps(mu: float, epochs: int, decay_epochs: float | None) -> np.ndarray:
    """Step size of each epoch: μ / (1 + e / decay_epochs), constant μ without a decay.

    A step that decays like 1/e lets the replayed delta rule settle on the least-squares solution
    of noisy data instead of jittering around it (stochastic approximation).
    """
    e = np.arange(epochs, dtype=float)
    return np.full(epochs, float(mu)) if decay_epochs is None else mu / (1.0 + e / float(decay_epochs))


def history_stride(samples: int, epochs: int) -> int:
    """Record every how many samples so that at most :data:`MAX_HISTORY` vectors are kept."""
    return max(1, -(-samples * epochs // MAX_HISTORY))


def stream_history(problem, values: np.ndarray, at: np.ndarray, t: np.ndarray, dt: float, std=None) -> History:
    """A :class:`History` in stream time: record ``at[k]`` (sample index counted over the epochs,
    ``t`` the (N,) sample times) is at ``epoch · (t[-1] - t[0] + dt) + t[sample] - t[0]``."""
    N = t.shape[0]
    epoch, sample = np.divmod(np.asarray(at), N)
    when = epoch * float(t[-1] - t[0] + dt) + t[sample] - t[0]
    return History(when, values, list(problem.base_parameter_names), unit="s", std=std)


class ReplayOptions(EstimatorOptions):
    """Options of the estimators that replay the stream with the normalised step (``adaline``, ``hopfield``)."""

    step: float = Field(
        0.5, gt=0, lt=2, description="normalised step μ in (0, 2) (of the delta rule; of the network's Euler step)"
    )
    epochs: int = Field(100, ge=1, le=100_000, description="most passes over the stream")
    decay_epochs: float | None = Field(
        5.0, gt=0, description="the step halves after this many epochs (μ / (1 + e / decay_epochs)); null: constant"
    )
    tol: float = Field(1e-12, ge=0, description="stop when an epoch's average moves less than this (relative)")
    check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")


def replay(problem, stream: Stream, options, bound: np.ndarray | None = None) -> tuple[np.ndarray, History, int]:
    """Run the compiled delta rule (``bound`` None) or Hopfield network (``bound`` the c per parameter) over
    ``stream`` with the :class:`ReplayOptions` of ``options``, from zero.

    Returns:
        (the last epoch's average parameters (b,), the :class:`History` in stream time, epochs run).
    """
    from robotid_sim.identification.online_kernels import delta_rule  # numba: on first use

    N, _, b = stream.Y.shape
    values, hist, at, epochs = delta_rule(
        stream.Y,
        stream.tau,
        np.zeros(b),
        stream.scale,
        np.zeros(0) if bound is None else bound,
        epoch_steps(options.step, options.epochs, options.decay_epochs),
        history_stride(N, options.epochs),
        options.tol,
    )
    return values, stream_history(problem, hist, at, stream.t, stream.dt), int(epochs)


def noise_std(x: np.ndarray) -> np.ndarray:
    """Per-column white-noise standard deviation of a smooth signal sampled finely (N, n) -> (n,).

    The third difference of white noise of variance σ² has variance 20 σ² while that of a smooth
    signal is O(dt³); the median absolute deviation makes the estimate robust to outliers and
    to the few samples where the motion itself changes abruptly: σ = 1.4826 · MAD(Δ³x) / √20.
    """
    x = np.asarray(x, float)
    if x.shape[0] < 8:
        raise IdentificationError(
            f"estimating the measurement noise needs at least 8 samples, got {x.shape[0]}; record a longer run"
        )
    return robust_std(np.diff(x, 3, axis=0), axis=0) / np.sqrt(20.0)


def stream_estimates(problem, estimator, reports: int = 10):
    """Feed ``problem``'s samples one at a time, in time order, to the streaming run ``estimator.stream(problem)``
    (the filters of the ``ekf`` family: its ``update(t, q, qd, qdd, tau, restart)`` consumes a sample and
    returns the estimate) and yield ``(t, λ (b,))`` at ``reports`` evenly spaced samples and the last: the estimate
    as it converges, the numbers of ``fit``. The states restart at each recording's first sample.

    Raises:
        ConfigError: the estimator has no streaming run.
    """
    stream = getattr(estimator, "stream", None)
    if stream is None:
        raise ConfigError(
            f"estimator '{estimator.name}' does not run online (sample by sample); the filters do: ekf, ukf, cdkf, "
            "sr_ukf, sr_cdkf, sr_ekf, pf"
        )
    run = stream(problem)
    ds = problem.dataset
    t, q, qd, qdd, tau = (np.asarray(getattr(ds, k), float) for k in ("t", "q", "qd", "qdd", "tau"))
    starts = {sl.start for _, sl in problem.experiments}
    N = t.shape[0]
    due = set(np.linspace(0, N - 1, max(1, reports) + 1).round().astype(int)[1:].tolist())
    for k in range(N):
        values = run.update(t[k], q[k], qd[k], qdd[k], tau[k], restart=k in starts)
        if k in due:
            yield float(t[k] - t[0]), values

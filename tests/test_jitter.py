"""Logs on a jittery clock (issue 29, deliver 3): gaps, repeated and backward stamps, filtering and differences
on the stamps, and a jittery log identifying like an even one (the full-size hyper9 check: benchmarks/jitter.py)."""

from __future__ import annotations

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.cli import main
from robotid_sim.errors import DataError
from robotid_sim.identification.validation import OpenLoopReference, open_loop_reference, rollout
from robotid_sim.signal import butterworth_filtfilt, decimate, lowpass_derivatives, lowpass_on_stamps, time_derivative
from robotid_sim.signal.preprocess import average_periods, preprocess
from robotid_sim.sim.dataset import Dataset, load_dataset
from robotid_sim.sim.logs import STACK_GAP_PERIODS, experiments, load_log, per_experiment, stack_experiments

JOINTS = ["joint1", "joint2", "joint3"]


def _jittery_steps(n: int, rng: np.random.Generator) -> np.ndarray:
    """n steps of a 100 Hz clock in s, 2 to 30 ms: mostly 8-12 ms, one in ten 2-8 ms, one in ten 12-30 ms."""
    kind = rng.random(n)
    steps = np.where(
        kind < 0.8, rng.uniform(8, 12, n), np.where(kind < 0.9, rng.uniform(2, 8, n), rng.uniform(12, 30, n))
    )
    steps[:2] = 2.0, 30.0  # both extremes present
    return steps / 1000.0


def _write_csv(path, t, q, tau):
    header = ",".join(["t", *(f"q_{j}" for j in JOINTS), *(f"tau_{j}" for j in JOINTS)])
    np.savetxt(path, np.column_stack([t, q, tau]), delimiter=",", header=header, comments="")
    return path


def _signals(t):
    q = np.column_stack([np.sin(2 * np.pi * 0.5 * t + k) for k in range(3)])
    return q, 2.0 * q


# -- gaps -----------------------------------------------------------------------------------


def test_single_late_sample_does_not_split_a_log():
    t = np.arange(500) * 0.01
    t[200:] += 0.02  # one sample 20 ms late, then on time again: a 30 ms step, three median steps
    q, tau = _signals(t)
    ds = Dataset(t, q, q, q, tau)
    assert experiments(ds) == [("all", slice(0, 500))]


def test_log_with_2_to_30_ms_jitter_is_one_experiment(tmp_path, rng):
    t = np.r_[0.0, np.cumsum(_jittery_steps(1999, rng))]
    q, tau = _signals(t)
    ds = load_log(_write_csv(tmp_path / "jittery.csv", t, q, tau), "planar3r")
    assert [(e["start"], e["stop"]) for e in ds.metadata["experiments"]] == [(0, 2000)]
    assert np.ptp(np.diff(ds.t)) == pytest.approx(0.028)


def test_pause_and_stack_joins_still_split_at_any_rate():
    t = np.r_[np.arange(300) * 0.01, 5.0 + np.arange(300) * 0.01]  # a 2 s pause at 100 Hz
    q, tau = _signals(t)
    assert [s for _, s in experiments(Dataset(t, q, q, q, tau))] == [slice(0, 300), slice(300, 600)]
    t_fast = np.arange(400) / 5000.0  # 5 kHz: a join of STACK_GAP_PERIODS steps is 20 ms, below GAP_FLOOR_S
    q, tau = _signals(t_fast)
    one = Dataset(t_fast, q, q, q, tau)
    stacked = stack_experiments([one, one])
    assert stacked.t[400] - stacked.t[399] == pytest.approx(STACK_GAP_PERIODS / 5000.0)
    plain = Dataset(stacked.t, stacked.q, stacked.qd, stacked.qdd, stacked.tau)  # no metadata: found by the gap
    assert [s for _, s in experiments(plain)] == [slice(0, 400), slice(400, 800)]


# -- repeated and backward stamps ---------------------------------------------------------------


def _bad_clock_csv(tmp_path, repeated=(), backwards=()):
    t = np.arange(40) * 0.01
    for i in repeated:
        t[i] = t[i - 1]
    for i in backwards:
        t[i] = t[i - 1] - 0.005
    q, tau = _signals(t)
    return _write_csv(tmp_path / "clock.csv", t, q, tau)


def test_duplicate_stamps_are_one_error_naming_rows_count_and_fix(tmp_path, capsys):
    path = _bad_clock_csv(tmp_path, repeated=(5, 9, 12, 20))
    expected = (
        "column 't' of '{}' must be strictly increasing; sample 5 (line 7) has t = 0.04 after t = 0.04; in all, 4 "
        "samples repeat the stamp before them (sample 5 (line 7), sample 9 (line 11), sample 12 (line 14), ...); "
        "drop the repeated ones"
    )
    with pytest.raises(DataError) as err:
        load_log(path, "planar3r")
    assert str(err.value) == expected.format(path)
    assert main(["identify", "--robot", "planar3r", "--data", str(path), "--estimator", "ols"]) == 2
    out = capsys.readouterr()
    assert [line for line in out.err.splitlines() if line.strip()] == ["error: " + expected.format(path)]


def test_backward_stamps_are_one_error_naming_rows_count_and_fix(tmp_path):
    path = _bad_clock_csv(tmp_path, repeated=(30,), backwards=(8,))
    with pytest.raises(DataError) as err:
        load_log(path, "planar3r")
    assert (
        "sample 8 (line 10) has t = 0.065 after t = 0.07; in all, 1 sample repeats the stamp before it (sample 30 "
        "(line 32)) and 1 sample goes back in time (sample 8 (line 10)); sort the samples by time and drop the "
        "repeated ones"
    ) in str(err.value)
    with pytest.raises(DataError, match=r"sample 8 \(line 10\).* 1 sample goes back in time \(sample 8 \(line 10\)\)"):
        load_dataset(path)  # the native reader: the same message


# -- filtering and differences on the stamps ----------------------------------------------------------


def test_lowpass_on_jittery_stamps_keeps_the_signal_where_counting_samples_smears_it(rng):
    t = np.r_[0.0, np.cumsum(_jittery_steps(2999, rng))]
    clean = np.sin(2 * np.pi * 2.0 * t)
    noisy = clean + 0.02 * rng.standard_normal(t.size)
    inner = slice(100, -100)
    on_stamps = lowpass_on_stamps(noisy, t, 5.0)
    counted = butterworth_filtfilt(noisy, 1.0 / np.median(np.diff(t)), 5.0)
    assert np.sqrt(np.mean((on_stamps - clean)[inner] ** 2)) < 0.01
    assert np.sqrt(np.mean((counted - clean)[inner] ** 2)) > 0.03
    even = np.arange(1000) * 0.01
    assert np.array_equal(lowpass_on_stamps(np.sin(even), even, 5.0), butterworth_filtfilt(np.sin(even), 100.0, 5.0))


def test_lowpass_derivatives_on_jittery_stamps_are_the_signal_s_derivatives(rng):
    t = np.r_[0.0, np.cumsum(_jittery_steps(1999, rng))]
    w = 2 * np.pi * 1.0
    x, dx, ddx = lowpass_derivatives(np.sin(w * t), t, 10.0)
    inner = slice(100, -100)
    assert np.abs(x - np.sin(w * t))[inner].max() < 1e-3
    assert np.abs(dx - w * np.cos(w * t))[inner].max() < 5e-3 * w
    assert np.abs(ddx + w**2 * np.sin(w * t))[inner].max() < 3e-2 * w**2


def test_time_derivative_is_exact_on_a_parabola_with_jittery_stamps(rng):
    t = np.r_[0.0, np.cumsum(_jittery_steps(199, rng))]
    x = np.column_stack([3.0 * t**2 - t, t**2])
    assert np.allclose(time_derivative(x, t), np.column_stack([6.0 * t - 1.0, 2.0 * t]), rtol=0, atol=1e-9)


def test_period_averaging_refuses_jittery_stamps():
    t = np.arange(400) * 0.01
    t[50] += 0.004  # one sample 4 ms late: the median step stays 10 ms, 100 samples a period
    q, tau = _signals(t)
    ds = Dataset(t, q, q, q, tau, metadata={"excitation": {"type": "fourier", "omega_f": 2 * np.pi}})
    with pytest.raises(DataError, match=r"needs even time stamps, but the steps of the first 2 periods range"):
        average_periods(ds, 2)


# -- a log on a jittery clock, loaded and preprocessed as the CLI does ---------------------------------------


def _fourier(t):
    """q, qd, qdd (N, 3) of a 0.2-1 Hz Fourier trajectory."""
    w = 2 * np.pi * np.array([0.2, 0.4, 0.6, 0.8, 1.0])
    a = np.random.default_rng(7).uniform(-0.5, 0.5, (5, 3)) / np.arange(1, 6)[:, None]
    s, c = np.sin(w * t[:, None]), np.cos(w * t[:, None])
    return s @ a, (c * w) @ a, (-s * w**2) @ a


def _clocks(n, rng):
    """An even 100 Hz clock and a jittery one (steps of 2 to 30 ms) spanning the same time, n samples each."""
    steps = _jittery_steps(n - 1, rng)
    steps *= 0.01 * (n - 1) / steps.sum()
    return {"even": np.arange(n) * 0.01, "jittery": np.r_[0.0, np.cumsum(steps)]}


def test_jittery_log_low_passed_gives_velocities_and_accelerations_as_good_as_an_even_one(tmp_path, rng):
    """qd and qdd derived from q when the log is loaded, and again from the filtered q with --lowpass."""
    n = 2000
    noise = 1e-4 * rng.standard_normal((n, 3))
    clocks = _clocks(n, rng)
    errors = {}
    for name, stamps in [*clocks.items(), ("stamps ignored", clocks["even"])]:
        t = clocks["jittery"] if name == "stamps ignored" else stamps
        q, qd, qdd = _fourier(t)
        ds = load_log(_write_csv(tmp_path / "log.csv", stamps, q + noise, q), "planar3r")
        assert len(experiments(ds)) == 1
        ds, notes = preprocess(ds, per_experiment=per_experiment, experiments=experiments, lowpass_hz=5.0)
        errors[name] = [np.sqrt(np.mean((x - y)[50:-50] ** 2)) for x, y in ((ds.qd, qd), (ds.qdd, qdd))]
    assert "qd and qdd (not in the file) derived again from the filtered q" in notes
    for k in range(2):
        assert errors["jittery"][k] < 1.5 * errors["even"][k]
        assert errors["stamps ignored"][k] > 20 * errors["jittery"][k]


def test_jittery_log_identifies_like_the_even_one(tmp_path, robots, rng):
    """The issue's acceptance in small (the full hyper9 check: benchmarks/jitter.py): a planar3r log, its torque
    computed from a Fourier trajectory, on an even and on a jittery 100 Hz clock: one experiment each, and the
    base parameters with a relative std below 5 % agree within 2 %."""
    robot = robots["planar3r"]
    models = {}
    for name, t in _clocks(1000, rng).items():
        q, qd, qdd = _fourier(t)
        ds = load_log(_write_csv(tmp_path / f"{name}.csv", t, q, robot.inverse_dynamics(q, qd, qdd)), robot)
        assert len(experiments(ds)) == 1
        models[name] = rid.identify(ds, robot, "ols")
    even, jittery = models["even"], models["jittery"]
    kept = even.std / np.abs(even.values) < 0.05
    assert kept.sum() >= 10
    assert np.all(np.abs(jittery.values - even.values)[kept] <= 0.02 * np.abs(even.values[kept]))


def test_the_open_loop_validation_of_a_jittery_log_steps_on_its_stamps(tmp_path, robots, rng):
    """The open-loop rollout of a recorded log holds each torque sample over its own interval: the robot's own
    model replays a motion recorded on a jittery clock exactly (stepping by the median step drifts away); the
    reference keeps its steps through save and load."""
    robot = robots["planar3r"]
    t = _clocks(300, rng)["jittery"]
    steps = np.r_[np.diff(t), 0.01]
    q_path, qd_path, qdd_path = _fourier(t)
    tau = robot.inverse_dynamics(q_path, qd_path, qdd_path)
    q, qd = rollout(robot.forward_dynamics, q_path[0], qd_path[0], tau, steps)
    reference = open_loop_reference(robot, Dataset(t, q, qd, qdd_path, tau), horizon=2.0, simulated=False)
    K = reference.q_reference.shape[0]
    assert K > 100 and np.array_equal(reference.dt, steps[:K])
    replay = rollout(robot.forward_dynamics, reference.q0, reference.qd0, reference.tau, reference.dt)[0]
    assert np.max(np.abs(replay - reference.q_reference)) < 1e-12
    median_steps = rollout(robot.forward_dynamics, reference.q0, reference.qd0, reference.tau, 0.01)[0]
    assert np.max(np.abs(median_steps - reference.q_reference)) > 1e-2
    reference.save(tmp_path / "open_loop.npz")
    assert np.array_equal(OpenLoopReference.load(tmp_path / "open_loop.npz").dt, reference.dt)


def test_a_jittery_log_is_decimated_on_its_stamps(tmp_path, rng):
    """``decimate`` on a jittery clock low-passes on the stamps: a 3 Hz joint motion, well inside the new band,
    comes out at the kept stamps as it was (the FIR of an even clock, counting samples, would bend it)."""
    t = np.r_[0.0, np.cumsum(_jittery_steps(1999, rng))]
    q = np.column_stack([np.sin(2 * np.pi * 3.0 * t + k) for k in range(3)])
    path = _write_csv(tmp_path / "jittery.csv", t, q, 2.0 * q)
    ds = load_log({"path": str(path), "decimate": 4}, "planar3r")
    assert np.array_equal(ds.t, t[::4] - t[0])
    trimmed = slice(10, -10)  # the filter's ends
    expected = np.column_stack([np.sin(2 * np.pi * 3.0 * ds.t + k) for k in range(3)])
    assert np.max(np.abs(ds.q - expected)[trimmed]) < 0.01
    assert "jittery clock" in ds.metadata["decimation"]["method"]
    counted = decimate(q, 4)  # what the loader did before: the even clock's FIR
    assert np.max(np.abs(counted - expected)[trimmed]) > 0.05

"""BIRDy's closed-loop data generation (issue 30, deliver 2): robotid_sim.sim.closed_loop_data.

The loop runs on the exact PyBullet backend; short records of the small planar3r (and one of the TX40) keep the
file fast. Records at the control rate (sample_rate_hz = control_rate_hz) expose every control step, so the
loop's semantics are checked step by step against the interfaces' definition.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.cli import main
from robotid_sim.errors import ConfigError, DataError
from robotid_sim.sim.closed_loop_data import (
    BIRDY_TX40_KTAU,
    BIRDY_TX40_PID,
    NOISE_PRESETS,
    ClosedLoopRecord,
    NoisePreset,
    PIDLoop,
    birdy_dataset,
    birdy_decimation,
    closed_loop_record,
)
from robotid_sim.sim.dataset import Signals, load_dataset
from robotid_sim.sim.simulate import resolve_excitation

RATE = 5000.0
DT = 1.0 / RATE
EXCITATION = {"type": "fourier", "harmonics": 3, "base_frequency": 0.5, "seed": 1}
#: one physics step per control step, so consecutive samples are one semi-implicit Euler step apart
LOOP = PIDLoop(kp=[400.0, 300.0, 100.0], kd=[20.0, 15.0, 5.0], ki=[0.0, 0.0, 0.0], physics_substeps=1)


@pytest.fixture(scope="module")
def planar():
    return rid.load_robot("planar3r")


def _record(robot, duration=0.1, loop=LOOP, noise=None, seed=0, sample_rate_hz=RATE) -> ClosedLoopRecord:
    return closed_loop_record(
        robot, EXCITATION, loop=loop, noise=noise, seed=seed, duration=duration, sample_rate_hz=sample_rate_hz
    )


@pytest.fixture(scope="module")
def clean(planar):
    """Noise-free, every control step recorded."""
    return _record(planar)


@pytest.fixture(scope="module")
def reference(planar, clean):
    """q_ref, qd_ref at the control steps of ``clean``."""
    q_ref, qd_ref, _ = resolve_excitation(planar, EXCITATION).evaluate(clean.t)
    return q_ref, qd_ref


def _pd(loop, q_ref, qd_ref, y) -> np.ndarray:
    """u_k = Kp·e_k + Kd·ed_k with w_k the discrete derivative of y (w_0 = qd_ref(0))."""
    w = np.vstack([qd_ref[:1], np.diff(y, axis=0) / DT])
    return loop.kp * (q_ref - y) + loop.kd * (qd_ref - w)


def _scale(x) -> float:
    return max(1.0, float(np.abs(x).max()))


# ----------------------------------------------------------------- the truth


def test_the_noise_free_record_satisfies_the_robots_inverse_dynamics(planar, clean):
    T = clean.truth
    assert clean.q.shape == (500, 3) and np.array_equal(clean.q, T.q) and np.array_equal(clean.tau, T.tau)
    err = np.abs(planar.inverse_dynamics(T.q, T.qd, T.qdd) - T.tau).max()
    assert err <= 1e-9 * _scale(T.tau)


@pytest.mark.parametrize("name", ["tx40", "tx40_coupled"])
def test_the_tx40_closed_loop_satisfies_its_inverse_dynamics_under_birdys_gains(name):
    tx40 = rid.load_robot(name)
    rec = closed_loop_record(name, duration=0.2)  # by name, BIRDy's gains by default
    assert rec.robot == name and rec.loop is BIRDY_TX40_PID
    assert rec.q.shape == (200, 6) and rec.t[1] == pytest.approx(1e-3)
    T = rec.truth
    assert np.abs(tx40.inverse_dynamics(T.q, T.qd, T.qdd) - T.tau).max() <= 1e-9 * _scale(T.tau)
    q_ref = resolve_excitation(tx40, "default").evaluate(rec.t)[0]
    assert np.abs(T.q - q_ref).max() < 0.005  # 0.0027 rad with Ktau in the gains, 0.051 without


def test_birdys_loop_multiplies_the_pid_by_the_torque_loop_gain():
    """Regression: BIRDy's control input is Ktau·(Kp·e + Kd·ė + Ki·∫e) (computeControlInput.m); without Ktau the
    loop was 6.5–35× softer and tracked the excitation within 0.23 rad only, which broke DIDIM's Jacobian
    approximation (relative error 230 from BIRDy's initial estimate on noise-free data). The tracking itself is
    checked in test_the_tx40_closed_loop_satisfies_its_inverse_dynamics_under_birdys_gains."""
    kp = 0.75 * np.array([455.8254, 500.0, 253.7919, 200.2182, 244.3226, 478.4783])
    kd = np.array([2.5361, 4.1174, 1.1793, 0.5462, 0.5714, 0.1954])
    np.testing.assert_allclose(BIRDY_TX40_KTAU, [35.24, 32.04, 23.94, 9.05, 15.5, 6.56])
    np.testing.assert_allclose(BIRDY_TX40_PID.kp, BIRDY_TX40_KTAU * kp, rtol=1e-15)
    np.testing.assert_allclose(BIRDY_TX40_PID.kd, BIRDY_TX40_KTAU * kd, rtol=1e-15)


def test_physics_substeps_stop_the_tx40_wrist_from_chattering():
    """Regression: with one physics step per 5 kHz control step, the stiff tanh(100·qd) Coulomb law on joint 6
    made its acceleration flip sign at most steps (±139 rad/s² from rest); four substeps integrate it."""
    flips = {}
    for substeps in (1, 4):
        loop = dataclasses.replace(BIRDY_TX40_PID, physics_substeps=substeps)
        rec = closed_loop_record("tx40", loop=loop, duration=0.1, sample_rate_hz=5000)
        a = rec.truth.qdd[:, 5]
        flips[substeps] = np.mean(np.sign(a[1:]) != np.sign(a[:-1]))
    assert BIRDY_TX40_PID.physics_substeps == 4
    assert flips[1] > 0.3 and flips[4] < 0.02


def test_each_physics_step_is_the_semi_implicit_euler_step_of_the_interfaces(clean):
    T = clean.truth
    qd_next = T.qd[:-1] + DT * T.qdd[:-1]
    assert np.abs(qd_next - T.qd[1:]).max() < 1e-12
    assert np.abs(T.q[:-1] + DT * qd_next - T.q[1:]).max() < 1e-12


def test_the_record_starts_at_the_references_first_state(clean, reference):
    assert np.allclose(clean.truth.q[0], reference[0][0]) and np.allclose(clean.truth.qd[0], reference[1][0])


# ----------------------------------------------------------------- the loop's semantics


def test_the_control_torque_is_pd_on_the_noisy_encoder_with_its_discrete_derivative(planar, reference):
    noisy = _record(planar, noise=NoisePreset("q only", np.full(3, 1e-3), np.zeros(3)), seed=3)
    assert np.abs(noisy.q - noisy.truth.q).max() > 1e-3  # y = q + v
    u = _pd(LOOP, *reference, noisy.q)
    assert np.abs(u - noisy.truth.tau).max() <= 1e-9 * _scale(u)
    # the velocity the loop used is NOT the plant's: with it the torque would differ
    plant = LOOP.kp * (reference[0] - noisy.q) + LOOP.kd * (reference[1] - noisy.truth.qd)
    assert np.abs(plant - noisy.truth.tau).max() > 1.0


def test_encoder_noise_is_reinjected_and_torque_noise_is_not(planar, clean):
    on_q = _record(planar, noise=NoisePreset("q", np.full(3, 1e-4), np.zeros(3)))
    on_tau = _record(planar, noise=NoisePreset("tau", np.zeros(3), np.full(3, 0.5)))
    assert np.abs(on_q.truth.q - clean.truth.q).max() > 1e-7  # the trajectory changed
    assert np.array_equal(on_tau.truth.q, clean.truth.q) and np.array_equal(on_tau.truth.tau, clean.truth.tau)
    noise = on_tau.tau - on_tau.truth.tau
    assert np.std(noise) == pytest.approx(0.5, rel=0.1)


def test_the_integral_is_clamped_by_the_anti_windup(planar, reference):
    loop = PIDLoop(kp=LOOP.kp, kd=LOOP.kd, ki=[2000.0, 2000.0, 2000.0], anti_windup=1e-5)
    rec = _record(planar, loop=loop)
    e = reference[0] - rec.q
    clamped, free = np.zeros(3), np.zeros(3)
    integral, unclamped = [], []
    for row in e:
        clamped = np.clip(clamped + row * DT, -1e-5, 1e-5)
        free = free + row * DT
        integral.append(clamped)
        unclamped.append(free)
    pd = _pd(loop, *reference, rec.q)
    assert np.abs(pd + loop.ki * np.array(integral) - rec.truth.tau).max() <= 1e-9 * _scale(rec.truth.tau)
    assert np.abs(np.array(unclamped)).max() > 2e-5  # the clamp was active
    assert np.abs(pd + loop.ki * np.array(unclamped) - rec.truth.tau).max() > 1e-2


def test_the_seed_fixes_the_noise(planar):
    a, b = (_record(planar, duration=0.02, noise=NoisePreset("n", np.full(3, 1e-3), np.full(3, 0.1))) for _ in "ab")
    c = _record(planar, duration=0.02, noise=NoisePreset("n", np.full(3, 1e-3), np.full(3, 0.1)), seed=1)
    assert np.array_equal(a.q, b.q) and np.array_equal(a.tau, b.tau) and not np.array_equal(a.q, c.q)


def test_progress_is_reported_every_thousand_control_steps(planar):
    calls = []
    closed_loop_record(planar, EXCITATION, loop=LOOP, duration=0.25, progress=lambda *a: calls.append(a))
    assert calls == [("simulate", 0, 1250), ("simulate", 1000, 1250), ("simulate", 1250, 1250)]


# ----------------------------------------------------------------- presets


def test_birdys_six_noise_presets_by_name_with_sd_q_from_degrees():
    assert list(NOISE_PRESETS) == [
        "oldNoise",
        "lowPositionNoise",
        "standardNoise",
        "highTorqueNoise",
        "highPositionNoise",
        "highPositionTorqueNoise",
    ]
    deg = {"lowPositionNoise": 1e-4, "standardNoise": 1e-3, "highTorqueNoise": 1e-3, "highPositionNoise": 1e-2}
    deg["highPositionTorqueNoise"] = 1e-2
    tau = {"oldNoise": 0.05, "lowPositionNoise": 0.05, "standardNoise": 0.05, "highTorqueNoise": 0.1}
    tau.update(highPositionNoise=0.05, highPositionTorqueNoise=0.1)
    for name, preset in NOISE_PRESETS.items():
        assert preset.name == name and np.array_equal(preset.sd_tau, np.full(6, tau[name]))
        if name in deg:
            assert np.allclose(preset.sd_q, np.full(6, deg[name] * np.pi / 180), rtol=1e-15)
    old = np.array([0.057e-3, 0.057e-3, 0.122e-3, 0.114e-3, 0.122e-3, 0.172e-3])
    assert np.allclose(NOISE_PRESETS["oldNoise"].sd_q, np.deg2rad(old), rtol=1e-15)


def test_a_uniform_preset_fits_any_robot_and_a_per_joint_one_only_six_joints(planar):
    assert np.array_equal(NOISE_PRESETS["standardNoise"].for_joints(3).sd_q, np.full(3, np.deg2rad(1e-3)))
    with pytest.raises(ConfigError, match="oldNoise.*6 per-joint values.*3 joints"):
        _record(planar, noise="oldNoise")
    rec = _record(planar, duration=0.01, noise="highPositionNoise")
    assert rec.noise.name == "highPositionNoise" and rec.noise.sd_q.shape == (3,)


# ----------------------------------------------------------------- BIRDy's preprocessing


def _synthetic(t, q, tau=None, qd=None, qdd=None, fs=1000.0) -> ClosedLoopRecord:
    """A record holding given signals (n = 1), to test the preprocessing alone."""
    tau = q if tau is None else tau
    qd = np.zeros_like(q) if qd is None else qd
    qdd = np.zeros_like(q) if qdd is None else qdd
    return ClosedLoopRecord(
        robot="planar3r",
        joint_names=["j"],
        t=t,
        q=q,
        tau=tau,
        truth=Signals(q, qd, qdd, tau),
        loop=PIDLoop([1.0], [0.0], [0.0]),
        excitation={},
        noise=None,
        seed=0,
        duration=float(t[-1] + 1 / fs),
        sample_rate_hz=fs,
    )


def test_birdys_decimation_rule():
    assert birdy_decimation(1000.0) == 1  # round(0.8): BIRDy's 1 kHz data are not decimated
    assert birdy_decimation(2000.0) == 2 and birdy_decimation(5000.0) == 4


def test_trim_drops_fifty_samples_per_end_and_decimation_keeps_every_kth(planar):
    rec = _record(planar, duration=0.4, sample_rate_hz=1000.0)
    ds = birdy_dataset(rec)
    assert ds.n_samples == 300 and np.array_equal(ds.t, rec.t[50:-50])
    assert np.array_equal(ds.truth.q, rec.truth.q[50:-50]) and ds.metadata["preprocessing"]["decimation"] == 1
    ds2 = birdy_dataset(rec, decimation=2)
    assert np.array_equal(ds2.t, rec.t[50:-50:2]) and np.array_equal(ds2.truth.tau, rec.truth.tau[50:-50:2])
    assert ds2.metadata["rate_hz"] == 500.0
    # the decimated signal keeps a slow motion (the zero-phase anti-alias filter has unit gain at DC, unlike
    # MATLAB's Chebyshev filter, which would scale it by 0.989)
    assert np.abs(ds2.q - rec.q[50:-50:2]).max() < 1e-4 * _scale(rec.q)


def test_central_differences_match_the_analytic_derivatives_of_a_smooth_signal():
    t = np.arange(2000) / 1000.0
    w = 2 * np.pi * 2.0
    ds = birdy_dataset(_synthetic(t, np.sin(w * t)[:, None]))
    kept = t[50:-50]
    assert np.abs(ds.qd[:, 0] - w * np.cos(w * kept)).max() < 1e-3 * w
    assert np.abs(ds.qdd[:, 0] + w**2 * np.sin(w * kept)).max() < 1e-3 * w**2


def test_the_butterworth_prefilter_is_zero_phase_and_removes_what_is_above_its_cutoff():
    t = np.arange(3000) / 1000.0
    slow = np.sin(2 * np.pi * 5.0 * t)
    fast = 0.2 * np.sin(2 * np.pi * 200.0 * t)
    ds = birdy_dataset(_synthetic(t, (slow + fast)[:, None]), filtered=True)
    kept = slow[50:-50]
    # no lag: a delay of even one sample would leave an error of 2π·5/1000 ≈ 0.03
    assert np.abs(ds.q[:, 0] - kept).max() < 5e-3
    assert np.abs(ds.tau[:, 0] - kept).max() < 5e-3  # tau is filtered too
    assert ds.metadata["preprocessing"]["filtered"] and ds.metadata["preprocessing"]["cutoff_hz"] == 50.0


def test_exact_derivatives_pass_the_simulators_velocity_and_acceleration_through(planar, clean):
    noisy = _record(planar, duration=0.1, noise="standardNoise", sample_rate_hz=1000.0)
    ds = birdy_dataset(noisy, derivatives="exact", trim=10)
    assert np.array_equal(ds.qd, noisy.truth.qd[10:-10]) and np.array_equal(ds.qdd, noisy.truth.qdd[10:-10])
    assert np.array_equal(ds.q, noisy.q[10:-10]) and np.array_equal(ds.tau, noisy.tau[10:-10])


def test_the_metadata_rebuilds_the_loop_and_the_reference(planar):
    rec = _record(planar, duration=0.2, noise="highTorqueNoise", seed=4, sample_rate_hz=1000.0)
    ds = birdy_dataset(rec, trim=20)
    md = ds.metadata["closed_loop"]
    assert set(md) == {"controller", "excitation", "duration", "sample_rate_hz", "noise"}
    assert ds.metadata["robot"] == "planar3r" and md["duration"] == 0.2 and md["sample_rate_hz"] == 1000.0
    assert md["controller"] == LOOP.to_dict() and md["controller"]["type"] == "pid"
    loop = PIDLoop.from_dict(md["controller"], planar.n_dof)
    assert np.array_equal(loop.kp, LOOP.kp) and loop.control_rate_hz == 5000.0 and loop.anti_windup == 5.0
    assert md["noise"] == {"preset": "highTorqueNoise", "sd_q": [np.deg2rad(1e-3)] * 3, "sd_tau": [0.1] * 3}
    q_ref, qd_ref, qdd_ref = resolve_excitation(planar, md["excitation"]).evaluate(ds.t)
    expected = resolve_excitation(planar, EXCITATION).evaluate(ds.t)
    assert np.allclose(q_ref, expected[0], rtol=0, atol=1e-12) and np.allclose(qdd_ref, expected[2], atol=1e-9)
    # t holds the control steps' times: k = round(t·control_rate) is whole
    k = ds.t * loop.control_rate_hz
    assert np.allclose(k, np.round(k), atol=1e-6) and ds.t[0] == pytest.approx(0.02)
    assert birdy_dataset(_record(planar, duration=0.01, sample_rate_hz=1000.0), trim=2).metadata["closed_loop"][
        "noise"
    ] == {"preset": None, "sd_q": [0.0] * 3, "sd_tau": [0.0] * 3}


# ----------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"noise": "loudNoise"}, "unknown noise preset 'loudNoise'.*oldNoise, lowPositionNoise"),
        ({"loop": PIDLoop([1.0, 2.0], [0.0, 0.0], [0.0, 0.0])}, "2 gains per term.*3 joints"),
        ({"loop": None}, "no default PID loop.*PIDLoop"),
        ({"sample_rate_hz": 3000.0}, "must divide the control rate 5000"),
        ({"duration": float("nan")}, "'duration' must be a finite number > 0"),
        ({"seed": -1}, "seed must be a whole number"),
        (
            {"excitation": {"type": "fourier", "q0": [3.5, 0, 0], "a": [[0.5]] * 3, "b": [[0.0]] * 3, "omega_f": 1.0}},
            "limit",
        ),
    ],
)
def test_bad_closed_loop_options_are_one_line(planar, kwargs, match):
    options = {"excitation": EXCITATION, "loop": LOOP, "duration": 0.01} | kwargs
    with pytest.raises(ConfigError, match=match) as info:
        closed_loop_record(planar, **options)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: PIDLoop([1.0, float("nan")], [0.0, 0.0], [0.0, 0.0]), "'kp' must be finite"),
        (lambda: PIDLoop([1.0, 1.0], [0.0], [0.0, 0.0]), "'kd' must have 2 values"),
        (lambda: PIDLoop([1.0], [0.0], [0.0], anti_windup=0.0), "'anti_windup' must be a finite number > 0"),
        (lambda: PIDLoop([1.0], [0.0], [0.0], physics_substeps=0), "physics_substeps must be a whole number"),
        (lambda: PIDLoop([1.0], [0.0], [0.0], physics_substeps=2.5), "physics_substeps must be a whole number"),
        (lambda: PIDLoop.from_dict({"kp": [1.0], "kd": [0.0]}, 1), r"misses the gain\(s\) \['ki'\]"),
        (lambda: PIDLoop.from_dict({"kp": [1.0], "kd": [0.0], "ki": [0.0], "kv": 1}, 1), "unknown PID loop field"),
        (lambda: PIDLoop.from_dict(BIRDY_TX40_PID.to_dict(), 3), "'kp' must have 3 values"),
        (lambda: NoisePreset("x", [float("nan")], [0.0]), "'sd_q' must be finite"),
    ],
)
def test_bad_loops_and_presets_are_one_line(make, match):
    with pytest.raises(ConfigError, match=match) as info:
        make()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"derivatives": "spline"}, ConfigError, "derivatives must be 'central' or 'exact'"),
        ({"trim": 1}, ConfigError, "trim must be a whole number of samples >= 2"),
        ({"decimation": 0}, ConfigError, "decimation must be a whole number >= 1"),
        ({"filtered": True, "cutoff_hz": 600.0}, ConfigError, "below the Nyquist frequency 500"),
        ({"trim": 500}, DataError, "too few remain"),
    ],
)
def test_bad_preprocessing_options_are_one_line(kwargs, error, match):
    t = np.arange(1000) / 1000.0
    with pytest.raises(error, match=match) as info:
        birdy_dataset(_synthetic(t, np.sin(t)[:, None]), **kwargs)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------------------------ CLI
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--robot", "tx40", "--closed-loop", "bogus"], "must be one of BIRDy's noise presets"),
        (["--robot", "planar3r", "--closed-loop", "none"], "has no default PID loop"),
        (["--robot", "tx40", "--closed-loop", "none", "--rate", "100"], "--rate does not apply with --closed-loop"),
        (["--robot", "tx40", "--prefilter"], "--prefilter applies to --closed-loop data"),
    ],
)
def test_simulate_closed_loop_bad_flags_are_one_line_exit_2_and_nothing_written(
    tmp_path, monkeypatch, capsys, args, words
):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", *args, "--out", "data.csv"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and words in err[0]
    assert not (tmp_path / "data.csv").exists()


def test_simulate_closed_loop_writes_birdys_data_with_its_loop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        main(["simulate", "--robot", "tx40", "--closed-loop", "standardNoise", "--duration", "0.2", "--out", "d.npz"])
        == 0
    )
    ds = load_dataset(tmp_path / "d.npz")
    loop = ds.metadata["closed_loop"]
    assert loop["controller"] == BIRDY_TX40_PID.to_dict() and loop["noise"]["preset"] == "standardNoise"
    assert ds.n_samples == 200 - 2 * 50 and ds.t[0] == pytest.approx(0.05)

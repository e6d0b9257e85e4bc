"""Excitation trajectories (SPEC §6): limits, start/stop constraints, analytic derivatives,
optimised Fourier series (seed 001 Eq. 10–12), sequential sine (seed 003 §4), quintic
polynomial (seed 004 Eq. 39), stepwise segments (seed 000 §3), configs and round trips."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import robotid_sim as rid
from robotid_sim.errors import ConfigError
from robotid_sim.excitation import (
    STEPWISE_LABELS,
    FourierExcitation,
    QuinticPolynomial,
    SequentialSine,
    StepwiseExcitation,
    concatenate,
    condition_number,
    excitation_from_config,
    optimize_fourier,
    project_start_stop,
    time_grid,
)
from robotid_sim.robot.dh import dh_to_urdf

#: robots the property tests draw from: generated 3R (one continuous joint), arm6 (prismatic
#: joint, fixed joints), the 9-DoF arm of seed 001 and the PRRRP arm of seed 004
ROBOTS = ["gen3r", "arm6", "hyper9", "prrrp"]
TOL = 1e-9
PROPERTY = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="session")
def gen3r(tmp_path_factory) -> rid.Robot:
    """A 3R arm generated from a modified DH table; joint 3 is continuous (no position limit)."""
    rows = [
        {
            "type": "revolute",
            "alpha": 0.0,
            "d": 0.3,
            "lower": -2.5,
            "upper": 2.0,
            "velocity": 1.5,
            "mass": 2.0,
            "com": [0.02, 0.01, -0.1],
            "inertia": [0.02, 0.001, 0.0, 0.03, 0.0, 0.025],
        },
        {
            "type": "revolute",
            "alpha": np.pi / 2,
            "a": 0.05,
            "lower": -1.2,
            "upper": 1.6,
            "velocity": 2.0,
            "mass": 1.5,
            "com": [0.15, 0.0, 0.02],
            "inertia": [0.004, 0.0, 0.001, 0.02, 0.0, 0.02],
        },
        {
            "type": "continuous",
            "alpha": 0.0,
            "a": 0.3,
            "velocity": 3.0,
            "mass": 0.8,
            "com": [0.1, 0.02, 0.0],
            "inertia": [0.002, 0.0, 0.0, 0.006, 0.0, 0.006],
        },
    ]
    path = tmp_path_factory.mktemp("gen3r") / "gen3r.urdf"
    path.write_text(dh_to_urdf({"name": "gen3r", "convention": "modified", "rows": rows}))
    return rid.load_robot(path)


@pytest.fixture(scope="session")
def all_robots(robots, gen3r) -> dict[str, rid.Robot]:
    return {**robots, "gen3r": gen3r}


def assert_inside_limits(robot: rid.Robot, excitation, rate_hz: float = 1000.0) -> None:
    """Evaluate at 1 kHz and compare with the robot's limits directly (not via check_limits)."""
    t = time_grid(excitation.duration, rate_hz)
    q, qd, qdd = excitation.evaluate(t)
    lower, upper = robot.position_limits
    assert np.all(q >= lower - TOL), f"below lower limit by {np.max(lower - q):.3g}"
    assert np.all(q <= upper + TOL), f"above upper limit by {np.max(q - upper):.3g}"
    assert np.all(np.abs(qd) <= robot.velocity_limit + TOL), (
        f"velocity over the limit by {np.max(np.abs(qd) - robot.velocity_limit):.3g}"
    )
    assert np.all(np.abs(qdd) <= robot.acceleration_limit + TOL), (
        f"acceleration over the limit by {np.max(np.abs(qdd) - robot.acceleration_limit):.3g}"
    )
    excitation.check_limits(robot)  # and the library agrees


def assert_analytic_derivatives(excitation, n_points: int = 400, seed: int = 0) -> None:
    """qd and qdd equal central differences of q and qd at random times."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, excitation.duration, n_points)
    h = 1e-5
    q_p, qd_p, _ = excitation.evaluate(t + h)
    q_m, qd_m, _ = excitation.evaluate(t - h)
    _, qd, qdd = excitation.evaluate(t)
    scale_v = max(np.abs(qd).max(), 1e-3)
    scale_a = max(np.abs(qdd).max(), 1e-3)
    np.testing.assert_allclose((q_p - q_m) / (2 * h), qd, atol=1e-5 * scale_v + 1e-8)
    np.testing.assert_allclose((qd_p - qd_m) / (2 * h), qdd, atol=1e-5 * scale_a + 1e-8)


# ---------------------------------------------------------------------- limits, all types
@PROPERTY
@given(
    seed=st.integers(0, 10_000),
    name=st.sampled_from(ROBOTS),
    harmonics=st.integers(2, 6),
    base_frequency=st.floats(0.02, 0.5),
    margin=st.floats(0.0, 0.2),
)
def test_random_fourier_never_leaves_the_limits(all_robots, seed, name, harmonics, base_frequency, margin):
    robot = all_robots[name]
    exc = FourierExcitation.random(robot, harmonics, base_frequency, seed=seed, margin=margin)
    assert_inside_limits(robot, exc)


@PROPERTY
@given(seed=st.integers(0, 10_000), name=st.sampled_from(ROBOTS))
def test_sequential_sine_never_leaves_the_limits(all_robots, seed, name):
    robot = all_robots[name]
    rng = np.random.default_rng(seed)
    lower, upper = robot.position_limits
    lo = np.where(np.isfinite(lower), lower, -np.pi)
    hi = np.where(np.isfinite(upper), upper, np.pi)
    hold = lo + rng.uniform(0.1, 0.9, robot.n_dof) * (hi - lo)
    amplitudes = rng.uniform(0.05, 2.0, robot.n_dof) * (hi - lo) / 4  # some get clipped
    exc = SequentialSine(robot, amplitudes=amplitudes, hold=hold, dwell=0.5)
    assert_inside_limits(robot, exc)


@PROPERTY
@given(seed=st.integers(0, 10_000), name=st.sampled_from(ROBOTS), back_and_forth=st.booleans(), sines=st.booleans())
def test_polynomial_with_auto_durations_never_leaves_the_limits(all_robots, seed, name, back_and_forth, sines):
    robot = all_robots[name]
    cfg = {"type": "polynomial", "random_waypoints": 3, "seed": seed, "back_and_forth": back_and_forth}
    if sines:
        cfg["prismatic_sine"] = {"amplitude": [0.01, 0.004], "frequency": [2.0, 5.0]}
    exc = excitation_from_config(cfg, robot)
    assert_inside_limits(robot, exc)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), name=st.sampled_from(ROBOTS))
def test_stepwise_never_leaves_the_limits(all_robots, seed, name):
    robot = all_robots[name]
    exc = StepwiseExcitation(robot, seed=seed, n_poses=2, fourier_segments=1)
    assert_inside_limits(robot, exc)


def test_check_limits_names_joint_quantity_and_value(hyper9):
    exc = FourierExcitation.random(hyper9, seed=3)
    # twice the pulsation, 1.5 times the coefficients: 0.75 of the excursion, 1.5 the velocity
    too_fast = FourierExcitation(exc.q0, 1.5 * exc.a, 1.5 * exc.b, 2 * exc.omega_f)
    with pytest.raises(ConfigError, match=r"velocity limits of joint \d+ \('joint\d+'\): value"):
        too_fast.check_limits(hyper9)
    shifted = FourierExcitation(exc.q0 + 5.0, 0.1 * exc.a, 0.1 * exc.b, exc.omega_f)
    with pytest.raises(ConfigError, match=r"position limits of joint 1 .*above the upper limit"):
        shifted.check_limits(hyper9)


# ---------------------------------------------------------------------- Fourier (seed 001)
@pytest.fixture(scope="session")
def hyper9(robots) -> rid.Robot:
    return robots["hyper9"]


def test_fourier_start_stop_constraints_hold_exactly(hyper9):
    exc = FourierExcitation.random(hyper9, harmonics=5, base_frequency=0.04, seed=1, periods=2)
    sum_a, sum_lb = exc.start_stop_residual()
    np.testing.assert_allclose(sum_a, 0.0, atol=1e-12)
    np.testing.assert_allclose(sum_lb, 0.0, atol=1e-12)
    q, qd, qdd = exc.evaluate([0.0, exc.period, exc.duration])
    np.testing.assert_allclose(qd, 0.0, atol=1e-12)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12)
    np.testing.assert_allclose(q, np.tile(exc.q0, (3, 1)), atol=1e-12)  # q(0) = q0, periodic


def test_fourier_projection_enforces_constraints_and_is_idempotent():
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(4, 5)), rng.normal(size=(4, 5))
    pa, pb = project_start_stop(a, b)
    np.testing.assert_allclose(pa.sum(1), 0.0, atol=1e-12)
    np.testing.assert_allclose(pb @ np.arange(1, 6), 0.0, atol=1e-12)
    pa2, pb2 = project_start_stop(pa, pb)
    np.testing.assert_allclose(pa2, pa, atol=1e-14)
    np.testing.assert_allclose(pb2, pb, atol=1e-14)
    exc = FourierExcitation(np.zeros(4), a, b, 0.5).project_start_stop()
    _, qd, qdd = exc.evaluate([0.0, exc.period])
    np.testing.assert_allclose(qd, 0.0, atol=1e-12)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12)


def test_fourier_matches_the_spec_form_with_its_offset():
    """q = offset + Σ a/(ωl) sin − b/(ωl) cos, qd = Σ a cos + b sin (SPEC §6, seed 001 Eq. 10)."""
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    exc = FourierExcitation(np.array([0.1, -0.2]), a, b, omega_f=0.7)
    t = np.linspace(0, 20, 50)
    wl = 0.7 * np.arange(1, 4)
    ph = np.outer(t, wl)
    q_spec = exc.offset() + np.sin(ph) @ (a / wl).T - np.cos(ph) @ (b / wl).T
    qd_spec = np.cos(ph) @ a.T + np.sin(ph) @ b.T
    q, qd, _ = exc.evaluate(t)
    np.testing.assert_allclose(q, q_spec, atol=1e-12)
    np.testing.assert_allclose(qd, qd_spec, atol=1e-12)


def test_fourier_repeat_multiplies_periods_and_keeps_the_trajectory(hyper9):
    exc = FourierExcitation.random(hyper9, seed=0)
    rep = exc.repeat(3)
    assert rep.periods == 3 and rep.duration == pytest.approx(3 * exc.duration)
    t = np.linspace(0, exc.duration, 101)
    for x, y in zip(exc.evaluate(t), rep.evaluate(t + 2 * exc.period), strict=True):
        np.testing.assert_allclose(x, y, atol=1e-9)


def test_optimised_fourier_has_lower_condition_number_than_its_start(hyper9):
    """Acceptance point (seed 001 Eq. 12): cond(final) < cond(start) for hyper9; run with -s."""
    began = time.perf_counter()
    result = optimize_fourier(
        hyper9, harmonics=5, base_frequency=0.04, seed=0, maxiter=12, popsize=1, sample_rate_hz=4, max_time_s=20.0
    )
    elapsed = time.perf_counter() - began
    print(
        f"\nhyper9 Fourier excitation (5 harmonics, 25 s): cond start "
        f"{result.start_condition:.1f} -> final {result.final_condition:.1f} "
        f"({result.n_generations} generations, {result.n_evaluations} evaluations, "
        f"{elapsed:.1f} s)"
    )
    assert result.final_condition < result.start_condition
    assert np.all(np.diff(result.history) <= 0)  # best-so-far per generation
    assert result.final_condition == pytest.approx(
        condition_number(hyper9, result.excitation, sample_rate_hz=4), rel=1e-9
    )
    assert_inside_limits(hyper9, result.excitation)
    assert_inside_limits(hyper9, result.start_excitation)
    sum_a, sum_lb = result.excitation.start_stop_residual()
    np.testing.assert_allclose(sum_a, 0.0, atol=1e-12)
    np.testing.assert_allclose(sum_lb, 0.0, atol=1e-12)


def test_optimisation_is_reproducible_with_a_seed(gen3r):
    kw = dict(harmonics=3, base_frequency=0.2, seed=5, maxiter=3, popsize=2, sample_rate_hz=10)
    r1, r2 = optimize_fourier(gen3r, **kw), optimize_fourier(gen3r, **kw)
    np.testing.assert_array_equal(r1.excitation.a, r2.excitation.a)
    assert r1.final_condition == r2.final_condition


# ---------------------------------------------------------------------- analytic derivatives
def _one_of_each(robot) -> dict[str, object]:
    return {
        "fourier": FourierExcitation.random(robot, harmonics=4, base_frequency=0.1, seed=1),
        "sequential_sine": SequentialSine(robot, amplitudes=0.3, dwell=0.3),
        "polynomial": excitation_from_config(
            {
                "type": "polynomial",
                "random_waypoints": 3,
                "back_and_forth": True,
                "seed": 2,
                "prismatic_sine": {"amplitude": [0.01], "frequency": [3.0]},
            },
            robot,
        ),
        "stepwise": StepwiseExcitation(robot, n_poses=2, fourier_segments=1, seed=3),
    }


@pytest.mark.parametrize("kind", ["fourier", "sequential_sine", "polynomial", "stepwise"])
@pytest.mark.parametrize("name", ["arm6", "gen3r"])
def test_analytic_derivatives_match_numerical_ones(all_robots, name, kind):
    assert_analytic_derivatives(_one_of_each(all_robots[name])[kind])


@pytest.mark.parametrize("kind", ["fourier", "sequential_sine", "polynomial", "stepwise"])
def test_describe_round_trips_through_json_and_config(all_robots, kind):
    robot = all_robots["arm6"]
    exc = _one_of_each(robot)[kind]
    again = excitation_from_config(json.loads(json.dumps(exc.describe())), robot)
    t = np.linspace(-1.0, exc.duration + 1.0, 997)
    for x, y in zip(exc.evaluate(t), again.evaluate(t), strict=True):
        np.testing.assert_array_equal(x, y)
    assert again.segments == exc.segments


# ---------------------------------------------------------------------- sequential (seed 003)
def test_sequential_sine_moves_one_joint_at_a_time_distal_first(hyper9):
    exc = SequentialSine(hyper9, amplitudes=0.4, dwell=0.5)
    joint_segments = [s for s in exc.segments if s.label == "joint"]
    assert [s.joint for s in joint_segments] == list(range(8, -1, -1))
    t, q, qd, qdd = exc.sample(200.0)
    moving = np.abs(qd) > 1e-12
    assert np.all(moving.sum(1) <= 1)
    for seg in exc.segments:
        sel = seg.mask(t)
        others = [j for j in range(9) if j != seg.joint]
        assert np.all(qd[sel][:, others] == 0.0)
        np.testing.assert_allclose(q[sel][:, others], exc.hold[others][None].repeat(sel.sum(), 0))
        if seg.label == "dwell":
            assert not moving[sel].any()


def test_sequential_sine_auto_frequency_reaches_the_velocity_limit(hyper9):
    exc = SequentialSine(hyper9, amplitudes=0.5, dwell=0.0, cycles=1)
    t, q, qd, qdd = exc.sample(1000.0)
    vmax, amax = hyper9.velocity_limit, hyper9.acceleration_limit
    for seg in (s for s in exc.segments if s.label == "joint"):
        j = seg.joint
        peak = np.abs(qd[seg.mask(t), j]).max()
        assert vmax[j] * 0.99 <= peak <= vmax[j] + TOL, (j, peak, vmax[j])
        assert np.abs(qdd[:, j]).max() <= amax[j] + TOL
    assert_inside_limits(hyper9, exc)


def test_sequential_sine_auto_frequency_respects_a_binding_acceleration_limit(gen3r):
    from robotid_sim.excitation import JointLimits

    lower, upper = gen3r.position_limits
    limits = JointLimits(lower, upper, np.full(3, 10.0), np.full(3, 0.5))
    exc = SequentialSine(limits, amplitudes=0.8)
    _, _, qd, qdd = exc.sample(1000.0)
    peak = np.abs(qdd).max(0)
    assert np.all(peak <= 0.5 + TOL) and np.all(peak >= 0.99 * 0.5)
    assert np.all(np.abs(qd).max(0) < 10.0)


def test_sequential_sine_clips_amplitude_to_the_range_around_the_hold_pose(hyper9):
    hold = np.zeros(9)
    hold[1] = 1.2  # joint 2 range is ±90°: 0.3708 rad of room above
    exc = SequentialSine(hyper9, amplitudes=1.0, hold=hold)
    assert exc.amplitudes[1] == pytest.approx(1.5708 - 1.2)
    assert exc.amplitudes[0] == 1.0


def test_sequential_sine_frequency_steps_run_each_joint_at_each_fraction_of_its_frequency(hyper9):
    exc = excitation_from_config(
        {"type": "sequential_sine", "amplitudes": 0.5, "dwell": 0.2, "cycles": 1, "frequency_steps": [0.5, 1.0]}, hyper9
    )
    one = SequentialSine(hyper9, amplitudes=0.5, dwell=0.2, cycles=1)
    np.testing.assert_array_equal(exc.frequencies, one.frequencies)
    assert exc.describe()["frequency_steps"] == [0.5, 1.0]
    joint_segments = [s for s in exc.segments if s.label == "joint"]
    assert [s.joint for s in joint_segments] == [j for j in range(8, -1, -1) for _ in (0, 1)]
    t, _, qd, _ = exc.sample(1000.0)
    for slow, fast in zip(joint_segments[::2], joint_segments[1::2], strict=True):
        j = slow.joint
        # the same sine at half the frequency: twice as long, half the peak velocity
        assert slow.end - slow.start == pytest.approx(2 * (fast.end - fast.start))
        peak_slow, peak_fast = (np.abs(qd[s.mask(t), j]).max() for s in (slow, fast))
        assert peak_slow == pytest.approx(0.5 * peak_fast, rel=1e-3)
        assert peak_fast == pytest.approx(min(hyper9.velocity_limit[j], peak_fast), rel=1e-9)
    assert_inside_limits(hyper9, exc)


@pytest.mark.parametrize("steps", [[], [0.0, 1.0], [0.5, 1.5], "fast", [[0.5]]])
def test_sequential_sine_bad_frequency_steps_are_named(hyper9, steps):
    with pytest.raises(ConfigError, match="frequency_steps"):
        excitation_from_config({"type": "sequential_sine", "frequency_steps": steps}, hyper9)


# ---------------------------------------------------------------------- polynomial (seed 004)
def test_quintic_polynomial_boundary_conditions_and_degree():
    q0, q1 = np.array([0.1, -0.5, 0.02]), np.array([1.0, 0.3, 0.12])
    exc = QuinticPolynomial(q0, q1, 4.0)
    q, qd, qdd = exc.evaluate([0.0, 4.0])
    np.testing.assert_allclose(q, [q0, q1], atol=1e-15)
    np.testing.assert_allclose(qd, 0.0, atol=1e-15)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-15)
    t = np.linspace(0, 4, 41)
    qs = exc.evaluate(t)[0]
    for j in range(3):  # exactly a degree-5 polynomial in t (seed 004 Eq. 39)
        coef = np.polyfit(t, qs[:, j], 5)
        np.testing.assert_allclose(np.polyval(coef, t), qs[:, j], atol=1e-12)
        assert abs(coef[0]) > 1e-6  # and really of fifth order
    # peak velocity 15/8·Δ/T
    _, _, qd, _ = exc.sample(1000.0)
    np.testing.assert_allclose(np.abs(qd).max(0), 15 / 8 * np.abs(q1 - q0) / 4.0, rtol=1e-6)


def test_quintic_chain_back_and_forth_rests_at_every_waypoint_with_sines():
    via = np.array([[0.5, 0.1]])
    exc = QuinticPolynomial(
        [0.0, 0.0],
        [1.0, 0.2],
        [2.0, 3.0],
        via=via,
        back_and_forth=True,
        sine_amplitude=[0.0, 0.01],
        sine_frequency=[0.0, 6.0],
    )
    np.testing.assert_allclose(exc.waypoints, [[0, 0], [0.5, 0.1], [1, 0.2], [0.5, 0.1], [0, 0]])
    np.testing.assert_allclose(exc.durations, [2.0, 3.0, 3.0, 2.0])
    q, qd, qdd = exc.evaluate(np.concatenate([[0.0], np.cumsum(exc.durations)]))
    np.testing.assert_allclose(q, exc.waypoints, atol=1e-12)
    np.testing.assert_allclose(qd, 0.0, atol=1e-12)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12)
    mid = exc.evaluate([1.0])[0][0]  # the sine really moves joint 2 inside the move
    assert abs(mid[1] - 0.05) > 1e-4
    assert_analytic_derivatives(exc)


# ---------------------------------------------------------------------- stepwise (seed 000)
@pytest.mark.parametrize("name", ["hyper9", "arm6", "gen3r"])
def test_stepwise_labels_cover_the_duration_and_segments_behave(all_robots, name):
    robot = all_robots[name]
    exc = StepwiseExcitation(robot, seed=4)
    segs = exc.segments
    assert segs[0].start == 0.0 and segs[-1].end == pytest.approx(exc.duration)
    for prev, nxt in zip(segs, segs[1:], strict=False):
        assert prev.end == pytest.approx(nxt.start)
    assert {s.label for s in segs} == {*STEPWISE_LABELS, "transition"}
    t, q, qd, qdd = exc.sample(500.0)
    for s in segs:
        sel = s.mask(t)
        if s.label == "constant_velocity":
            assert np.abs(qd[sel]).max() > 0.1 * robot.velocity_limit.min()
            np.testing.assert_allclose(qd[sel], np.tile(qd[sel][0], (sel.sum(), 1)), atol=1e-12)
            np.testing.assert_allclose(qdd[sel], 0.0, atol=1e-12)
        elif s.label == "static":
            assert np.abs(qd[sel]).max() <= np.deg2rad(0.1) + 1e-12
    assert_inside_limits(robot, exc)


def test_stepwise_static_segments_creep_at_a_tenth_of_a_degree_per_second(hyper9):
    exc = StepwiseExcitation(hyper9, n_poses=2, seed=1)
    t, _, qd, _ = exc.sample(100.0)
    static = np.zeros_like(t, bool)
    for s in exc.segments:
        if s.label == "static":
            static |= s.mask(t)
    assert np.isclose(np.abs(qd[static]), np.deg2rad(0.1)).any()


# ---------------------------------------------------------------------- config
def test_config_builds_each_type_from_a_mapping(all_robots):
    robot = all_robots["arm6"]
    for cfg in (
        {"type": "fourier", "harmonics": 3, "base_frequency": 0.1, "periods": 2, "seed": 0},
        {
            "type": "fourier",
            "harmonics": 3,
            "base_frequency": 0.2,
            "seed": 1,
            "optimize": {"maxiter": 2, "popsize": 1, "sample_rate_hz": 10},
        },
        {"type": "sequential_sine", "amplitudes": 0.5, "frequencies": "auto"},
        {"type": "polynomial", "q_start": [0.0] * 6, "q_end": [0.2] * 6, "duration": "auto"},
        {"type": "stepwise", "n_poses": 2, "speeds": [0.5]},
    ):
        exc = excitation_from_config(cfg, robot)
        assert exc.n_dof == 6 and exc.duration > 0
        assert_inside_limits(robot, exc)
    fourier = excitation_from_config({"type": "fourier", "harmonics": 3, "base_frequency": 0.1, "periods": 2}, robot)
    assert fourier.periods == 2 and fourier.duration == pytest.approx(20.0)


def test_unknown_type_and_field_are_named_with_the_valid_ones(hyper9):
    with pytest.raises(ConfigError, match=r"unknown excitation type 'chirp'; valid types: .*fourier"):
        excitation_from_config({"type": "chirp"}, hyper9)
    with pytest.raises(
        ConfigError, match=r"excitation 'fourier': unknown option\(s\) \['harmonicz'\].*valid options: .*harmonics"
    ):
        excitation_from_config({"type": "fourier", "harmonicz": 5}, hyper9)
    with pytest.raises(
        ConfigError, match=r"excitation 'fourier.optimize': unknown option\(s\) \['maxiterations'\].*maxiter"
    ):
        excitation_from_config({"type": "fourier", "optimize": {"maxiterations": 3}}, hyper9)
    with pytest.raises(ConfigError, match="unknown order"):
        excitation_from_config({"type": "sequential_sine", "order": "random"}, hyper9)


def test_concatenated_pieces_join_smoothly_and_keep_labels(gen3r):
    f = FourierExcitation.random(gen3r, harmonics=3, base_frequency=0.2, seed=0)
    p = QuinticPolynomial(f.q0, f.q0 + 0.1, 2.0)
    seq = concatenate([f, p], ["variable_velocity", "static"])
    seq.check_continuity()
    assert [s.label for s in seq.segments] == ["variable_velocity", "static"]
    assert seq.duration == pytest.approx(f.duration + 2.0)
    with pytest.raises(ConfigError, match="jumps"):
        concatenate([p, f]).check_continuity()

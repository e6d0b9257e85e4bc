"""Motor currents and drive gains (issue 29, deliver 2): the LogSource ``drives`` layout, coupled transmissions, and
the drive gains estimated with the dynamic parameters from recordings with and without a payload of known mass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.errors import ConfigError
from robotid_sim.identification.drive_gains import Recording, estimate_drive_gains
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.drives import DriveModel
from robotid_sim.sim.logs import load_log, parse_log_source
from robotid_sim.sim.noise import noise_from_config
from robotid_sim.sim.simulate import resolve_excitation
from robotid_sim.testing import exact_multisine
from tests.helpers import cli_process

#: hyper9's drive gains: gear ratio 160 times the torque constants of its sidecar (seed 001 Table 2), N*m/A
HYPER9_TORQUE_CONSTANT = [0.21, 0.21, 0.13, 0.13, 0.106, 0.106, 0.057, 0.057, 0.057]


def payload_parameters(mass: float, com, inertia_com) -> np.ndarray:
    """The 10 standard parameters about the flange of a body of ``mass`` at ``com`` with ``inertia_com`` (3, 3)."""
    c = np.asarray(com, float)
    inertia = np.asarray(inertia_com, float) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([*inertia[np.triu_indices(3)], *(mass * c), mass])


def with_payload(robot, phi: np.ndarray):
    """``robot`` with ``phi`` added to its last link's standard parameters (a payload rigidly fixed to it)."""
    theta = robot.true_parameters().copy()
    first = (robot.n_dof - 1) * robot.parameter_block
    theta[first : first + 10] += phi
    return robot.with_parameters(theta)


@pytest.fixture(scope="module")
def planar(robots):
    return robots["planar3r"]


@pytest.fixture(scope="module")
def planar_motion(planar):
    t, q, qd, qdd = exact_multisine(planar, 0, 8.0, 50.0)
    return t, q, qd, qdd, planar.inverse_dynamics(q, qd, qdd)


def test_current_log_with_known_gains_identifies_as_the_torque_log(planar, planar_motion, tmp_path):
    t, q, qd, qdd, tau = planar_motion
    gains = np.array([48.0, 30.5, 12.25])
    np.savez(tmp_path / "torque.npz", t=t, q=q, qd=qd, qdd=qdd, tau=tau)
    np.savez(tmp_path / "current.npz", t=t, q=q, qd=qd, qdd=qdd, i=tau / gains)
    torque = rid.identify(load_log(tmp_path / "torque.npz", planar), planar, "ols")
    current = rid.identify(
        load_log({"path": tmp_path / "current.npz", "drives": {"gains": gains.tolist()}}, planar), planar, "ols"
    )
    np.testing.assert_allclose(current.values, torque.values, rtol=1e-10, atol=1e-10 * np.abs(torque.values).max())


def test_torque_constant_times_gear_ratio_is_the_gain(planar, planar_motion, tmp_path):
    t, q, qd, qdd, tau = planar_motion
    constant, ratio = np.array([0.2, 0.1, 0.05]), np.array([100.0, 120.0, 80.0])
    header = ",".join(["t", *(f"q_joint{j}" for j in (1, 2, 3)), *(f"i_joint{j}" for j in (1, 2, 3))])
    np.savetxt(
        tmp_path / "log.csv",
        np.column_stack([t, q, tau / (constant * ratio)]),
        delimiter=",",
        header=header,
        comments="",
    )
    layout = {
        "path": tmp_path / "log.csv",
        "drives": {"torque_constant": constant.tolist(), "gear_ratio": ratio.tolist()},
    }
    ds = load_log(layout, planar)
    np.testing.assert_allclose(ds.tau, tau, rtol=1e-12, atol=1e-12)


def test_coupled_transmission_loads_the_joint_data(planar, planar_motion, tmp_path):
    """Motor positions q_motor = N q and currents of motor torques τ_motor = N⁻ᵀ τ load back as the joint data: a
    wrist whose third motor also turns the second joint."""
    t, q, qd, qdd, tau = planar_motion
    N = np.array([[100.0, 0.0, 0.0], [0.0, 80.0, 0.0], [0.0, 50.0, 60.0]])
    gains = np.array([0.3, 0.2, 0.1])
    motor = {name: x @ N.T for name, x in (("q", q), ("qd", qd), ("qdd", qdd))}
    np.savez(tmp_path / "motor.npz", t=t, **motor, i=(tau @ np.linalg.inv(N)) / gains)
    ds = load_log(
        {"path": tmp_path / "motor.npz", "drives": {"gains": gains.tolist(), "transmission": N.tolist()}}, planar
    )
    for name, x in (("q", q), ("qd", qd), ("qdd", qdd), ("tau", tau)):
        np.testing.assert_allclose(getattr(ds, name), x, rtol=1e-10, atol=1e-10 * np.abs(x).max(), err_msg=name)


@pytest.mark.parametrize(
    ("drives", "expected"),
    [
        ({"gains": [1.0, 2.0]}, "drives.gains has 2 values but the robot has 3 joints"),
        ({"gains": [1.0, 2.0, 3.0], "transmission": [[1, 0, 0], [0, 1, 0], [0, 2, 0]]}, "singular"),
        ({"gains": [1.0, 2.0, 3.0], "transmission": [[1, 0], [0, 1]]}, "transmission is 2 x 2 but the robot has 3"),
        ({"gains": [1.0, float("nan"), 3.0]}, "must hold finite numbers only"),
        ({"gains": [1.0, 0.0, 3.0]}, "must not hold 0"),
        ({"gains": "guess"}, "or 'unknown'"),
        (
            {"torque_constant": [0.1] * 3, "gear_ratio": [100.0] * 3, "transmission": np.eye(3).tolist()},
            "holds the gear",
        ),
        ({}, "give either 'gains'"),
    ],
)
def test_a_bad_drive_layout_is_one_config_error(planar, planar_motion, tmp_path, drives, expected):
    t, q, qd, qdd, tau = planar_motion
    np.savez(tmp_path / "current.npz", t=t, q=q, qd=qd, qdd=qdd, i=tau)
    with pytest.raises(ConfigError, match=expected) as info:
        load_log({"path": tmp_path / "current.npz", "drives": drives}, planar)
    assert "\n" not in str(info.value)


def test_a_gain_count_other_than_the_robots_is_named_before_the_file_is_read(planar, tmp_path):
    """The drives are checked against the robot first: a file without the currents (or any file) does not hide
    a wrong gain count behind a missing-column error."""
    with pytest.raises(ConfigError, match="drives.gains has 2 values but the robot has 3 joints"):
        load_log({"path": tmp_path / "absent.csv", "drives": {"gains": [1.0, 2.0]}}, planar)


def test_current_key_without_drives_is_refused():
    with pytest.raises(ConfigError, match="keys.i names motor currents: give 'drives'"):
        parse_log_source({"path": "x.csv", "keys": {"i": "current_"}})


# ------------------------------------------------------------------------------ drive gains from a payload
#: hyper9's default noise: that of its scenario (hyper9_seed001) without the outliers
HYPER9_NOISE = {
    "q": {"snr_db": 70},
    "qd": {"snr_db": 50},
    "qdd": {"snr_db": 30},
    "current": {"current_std": 0.01, "gear_ratio": 160.0, "torque_constant": HYPER9_TORQUE_CONSTANT},
}


def hyper9_recording(robot, arm, seed: int) -> Dataset:
    """``arm`` (hyper9, maybe with a payload) on hyper9's default excitation, evaluated exactly with torques by
    inverse dynamics (no PyBullet run), 25 s at 50 Hz, with :data:`HYPER9_NOISE` (the torque through the motor
    current, seed 001 Eq. 1)."""
    t = np.arange(1250) / 50.0
    q, qd, qdd = resolve_excitation(robot, "default").evaluate(t)
    clean = {"q": q, "qd": qd, "qdd": qdd, "tau": arm.inverse_dynamics(q, qd, qdd)}
    m = noise_from_config(HYPER9_NOISE).apply(clean, np.random.default_rng(seed))
    return Dataset(t, m["q"], m["qd"], m["qdd"], m["tau"], joint_names=robot.joint_names)


@pytest.fixture(scope="module")
def hyper9_recordings(robots):
    """hyper9 unloaded and with a 2.6 kg payload (:func:`hyper9_recording`), the torques logged as motor currents
    (torque / gain)."""
    robot = robots["hyper9"]
    gains = robot.gear_ratio * np.array(HYPER9_TORQUE_CONSTANT)
    phi = payload_parameters(2.6, [0.05, 0.03, 0.08], np.diag([0.004, 0.005, 0.003]))
    recordings = []
    for seed, arm in enumerate((robot, with_payload(robot, phi))):
        ds = hyper9_recording(robot, arm, seed)
        recordings.append(Dataset(ds.t, ds.q, ds.qd, ds.qdd, ds.tau / gains, joint_names=robot.joint_names))
    return robot, gains, recordings


def test_drive_gains_are_recovered_within_one_percent_from_a_loaded_and_an_unloaded_recording(hyper9_recordings):
    robot, gains, (unloaded, loaded) = hyper9_recordings
    # a dead-band at hyper9's Stribeck regime: below it sign(qd) of the friction is the velocity noise's
    fit = estimate_drive_gains(
        robot.structure(),
        [Recording(unloaded), Recording(loaded, 2.6)],
        DriveModel(gains="unknown"),
        velocity_deadband=0.02,
    )
    np.testing.assert_array_less(np.abs(fit.gains / gains - 1), 0.01)
    assert np.all(fit.gains_std > 0) and fit.model.diagnostics["drive_gains"] == fit.gains.tolist()
    torque = unloaded.tau * gains  # the model of the same fit predicts the arm's torque
    error = fit.model.predict_torque(unloaded.q, unloaded.qd, unloaded.qdd) - torque
    assert np.sqrt(np.mean(error**2)) < 0.05 * np.sqrt(np.mean(torque**2))


def test_drive_gains_need_an_unloaded_and_a_loaded_recording(hyper9_recordings):
    robot, _, (unloaded, loaded) = hyper9_recordings
    with pytest.raises(ConfigError, match="1 unloaded and 0 loaded"):
        estimate_drive_gains(robot.structure(), [Recording(unloaded)], DriveModel(gains="unknown"))


# ------------------------------------------------------------------------------ the command line
def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def planar_logs(planar, tmp_path_factory):
    """Current logs of planar3r without and with a 2 kg payload (noise-free, gains 40, 25, 10) and their layout."""
    folder = tmp_path_factory.mktemp("drives")
    t, q, qd, qdd = exact_multisine(planar, 1, 10.0, 50.0)
    gains = np.array([40.0, 25.0, 10.0])
    loaded = with_payload(planar, payload_parameters(2.0, [0.05, 0.02, 0.0], np.diag([0.001, 0.002, 0.003])))
    for name, arm in (("unloaded", planar), ("loaded", loaded)):
        np.savez(folder / f"{name}.npz", t=t, q=q, qd=qd, qdd=qdd, i=arm.inverse_dynamics(q, qd, qdd) / gains)
    (folder / "layout.yaml").write_text("drives: {gains: unknown}\n")
    return folder, gains


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--payload-mass", "2"], "--payload-mass 2 must come right before the --data"),
        (["--payload-mass", "-1", "--data", "loaded.npz"], "--payload-mass must be a finite number > 0 kg"),
        (["--estimator", "ols"], "--estimator does not apply to estimating unknown drive gains"),
        ([], "needs recordings both without and with a payload"),
    ],
)
def test_drive_gain_cli_bad_input_is_one_error_line_and_writes_nothing(planar_logs, extra, expected):
    folder, _ = planar_logs
    before = _listing(folder)
    args = ["identify", "--robot", "planar3r", "--layout", "layout.yaml", "--data", "unloaded.npz", *extra]
    result = cli_process(args, folder)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], result.stderr
    assert _listing(folder) == before


def test_drive_gain_cli_estimates_the_gains_and_saves_the_model(planar_logs):
    folder, gains = planar_logs
    args = ["identify", "--robot", "planar3r", "--layout", "layout.yaml", "--data", "unloaded.npz"]
    result = cli_process([*args, "--payload-mass", "2", "--data", "loaded.npz", "--out", "arm.json"], folder)
    assert result.returncode == 0, result.stderr
    printed = result.stdout.split("gains: [")[1].split("]")[0]
    np.testing.assert_allclose([float(x) for x in printed.split(",")], gains, rtol=1e-5)
    model = rid.load_model(folder / "arm.json")
    np.testing.assert_allclose(model.diagnostics["drive_gains"], gains, rtol=1e-8)


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ("drives: {gains: [40, 25]}\n", "drives.gains has 2 values but the robot has 3 joints"),
        ("drives: {gains: [1, 1, 1], transmission: [[1, 0, 0], [0, 1, 0], [0, 1e-12, 0]]}\n", "singular"),
        ("drives: {gains: [1, .nan, 1]}\n", "must hold finite numbers only"),
    ],
)
def test_a_bad_drive_layout_from_the_cli_is_one_error_line_and_writes_nothing(planar_logs, layout, expected):
    folder, _ = planar_logs
    (folder / "bad.yaml").write_text(layout)
    before = _listing(folder)
    args = ["identify", "--robot", "planar3r", "--layout", "bad.yaml", "--data", "unloaded.npz", "--out", "m.json"]
    result = cli_process(args, folder)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], result.stderr
    assert _listing(folder) == before

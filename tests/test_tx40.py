"""BIRDy's Staubli TX40 (issue 30, deliver 1): tx40 and its coupled variant tx40_coupled, and coupled drives.

The coupled drive is a transmission (robotid_sim.dynamics.coupling): joint 6's motor turns with s = q5 + q6 and
its friction Fvm6·ṡ + Fcm6·tanh(ṡ/eps) acts on joints 5 and 6; its parameters end theta.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

import robotid_sim as rid
from robotid_sim.dynamics.regressor import reference_regressor
from robotid_sim.envs.dynamics import CopyParameters
from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.identification import load_model
from robotid_sim.robot import bundled_robots, load_robot
from robotid_sim.robot.build import build
from robotid_sim.robot.export import mjcf_text, write_robot
from robotid_sim.robot.physical import pseudo_inertia
from robotid_sim.robot.structure import RobotStructure
from robotid_sim.sim import PyBulletSimulator

NAMES = ["tx40", "tx40_coupled"]

#: BIRDy's TX40.m (../shared/anchors/birdy_tx40.md): mass, first moments (MX, MY, MZ) and inertia about the DH
#: frame origin (XX, XY, XZ, YY, YZ, ZZ) of each link
BIRDY_MASS = [8.61, 4.85, 4.07, 3.62, 1.02, 0.2]
BIRDY_FIRST_MOMENTS = [
    [0, 0, -0.05 * 8.61],
    [0.392, -0.0072, 0.162],
    [0.0326, 0.0244, 0.265],
    [0.0145, -0.00724, -0.586],
    [0, -0.00306, -0.00102],
    [0, 0, 0.0084],
]
BIRDY_ORIGIN_INERTIA = [
    [0.424, 0, 0, 0.424, 0, 0.352],
    [1.63e-2, 7.85e-4, -1.57e-2, 8.81e-2, 3.24e-4, 8.28e-2],
    [2.23e-2, -1.95e-4, -1.16e-3, 2.24e-2, -2.22e-3, 4.41e-3],
    [1.09e-1, 2.9e-5, 1.35e-3, 1.08e-1, -1.17e-3, 4.07e-3],
    [1.01e-3, 0, 0, 1.00e-3, -3.06e-6, 1.01e-3],
    [3.53e-3, 0, 0, 3.53e-3, 0, 3.53e-4],
]


@pytest.fixture(scope="module")
def tx40s():
    return {name: load_robot(name) for name in NAMES}


@pytest.fixture(scope="module")
def exact_data(tx40s):
    """Noise-free simulations (1 s at 200 Hz) of both robots."""
    return {
        name: rid.simulate(robot, "default", duration=1.0, noise=None, rate_hz=200) for name, robot in tx40s.items()
    }


def _coupled_sidecar(tmp_path: Path, **drive) -> Path:
    """tx40_coupled's sidecar with its coupling entry replaced by ``drive`` (a list entry's fields)."""
    data = yaml.safe_load((bundled_robots()["tx40_coupled"] / "robot.yaml").read_text())
    data["coupling"] = [drive]
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _urdf() -> Path:
    return bundled_robots()["tx40_coupled"] / "robot.urdf"


@pytest.fixture(scope="module")
def coupled_with_rotor(tmp_path_factory):
    """tx40_coupled whose coupled drive also has a rotor inertia (a full 2 x 2 block of the mass matrix)."""
    path = _coupled_sidecar(tmp_path_factory.mktemp("rotor"), joints=[5, 6], fv=0.8, fc=1.6, rotor_inertia=0.02)
    return load_robot(_urdf(), path)


@pytest.mark.parametrize("name", NAMES)
def test_the_bundled_urdfs_are_the_dh_generators_output(name, tmp_path):
    d = tmp_path / name
    d.mkdir()
    src = bundled_robots()[name]
    (d / "robot.yaml").write_text((src / "robot.yaml").read_text())
    assert build(d / "robot.yaml").read_text() == (src / "robot.urdf").read_text()


def test_the_coupled_sidecar_is_tx40s_plus_the_coupling(tx40s):
    """tx40_coupled follows tx40 (excitation, limits, inertials): only its notes, the coupling and the efforts of
    the joints the coupled drive loads more (5 and 6) differ."""
    plain, coupled = (tx40s[name].sidecar.model_dump() for name in NAMES)
    rows = list(zip(plain["dh"].pop("rows"), coupled["dh"].pop("rows"), strict=True))
    assert [k for k, (a, b) in enumerate(rows) if a != b] == [4, 5]
    assert all({**a, "effort": 0} == {**b, "effort": 0} for a, b in rows)
    assert coupled.pop("coupling") == [{"joints": [5, 6], "fv": 0.8, "fc": 1.6}] and plain.pop("coupling") is None
    for key in ("citation", "notes"):
        plain.pop(key), coupled.pop(key)
    assert plain == coupled


@pytest.mark.parametrize("name", NAMES)
def test_tx40_loads_and_passes_the_parity_gate(name, tx40s):
    robot = tx40s[name]
    assert robot.n_dof == 6 and robot.joint_kinds == ["revolute"] * 6
    with PyBulletSimulator(robot) as sim:  # the parity gate runs when the simulator starts
        assert sim.robot is robot


def test_the_coupled_variant_is_tx40_plus_the_coupling_parameters_at_the_end(tx40s):
    plain, coupled = tx40s["tx40"], tx40s["tx40_coupled"]
    assert not plain.coupling and plain.n_parameters == 78  # 6 x (10 inertial, Ia, fc, fv)
    assert coupled.parameter_names == plain.parameter_names + ["Fvm6", "Fcm6"]
    assert np.array_equal(coupled.true_parameters(), np.r_[plain.true_parameters(), 0.8, 1.6])
    assert coupled.parameter_slices()["coupling"].tolist() == [78, 79]
    assert plain.parameter_slices()["coupling"].size == 0


def test_base_parameters_52_for_tx40_and_54_with_fvm6_fcm6_for_the_coupled(tx40s):
    plain, coupled = (tx40s[name].base_parameters() for name in NAMES)
    assert plain.count == 52
    assert coupled.count == 54
    assert {"Fvm6", "Fcm6"} <= set(coupled.names)
    assert set(plain.names) < set(coupled.names)


@pytest.mark.parametrize("name", [*NAMES, "rotor"])
def test_regressor_times_theta_is_the_inverse_dynamics(name, tx40s, coupled_with_rotor):
    robot = coupled_with_rotor if name == "rotor" else tx40s[name]
    q, qd, qdd = robot.random_states(np.random.default_rng(3), 40)
    tau = robot.inverse_dynamics(q, qd, qdd)
    theta = robot.true_parameters()
    Y = robot.regressor(q, qd, qdd)
    scale = np.abs(tau).max()
    assert np.abs(Y @ theta - tau).max() < 1e-9 * scale
    assert np.abs(reference_regressor(robot, q, qd, qdd) @ theta - tau).max() < 1e-9 * scale
    columns = np.array([0, 13, 60, *range(76, robot.n_parameters)])  # the compiled columns and the coupling's
    assert np.abs(robot.regressor(q, qd, qdd, columns=columns) - Y[:, :, columns]).max() < 1e-12 * scale
    assert np.abs(reference_regressor(robot, q, qd, qdd, columns=columns) - Y[:, :, columns]).max() < 1e-9 * scale
    assert np.abs(robot.forward_dynamics(q, qd, tau) - qdd).max() < 1e-9 * np.abs(qdd).max()


def test_the_coupled_drive_is_a_transmission_on_qd5_plus_qd6(tx40s, coupled_with_rotor):
    """Fvm6·ṡ + Fcm6·tanh(ṡ/0.01) on joints 5 and 6 with ṡ = qd5 + qd6; its rotor adds Ia·[[1, 1], [1, 1]] to M."""
    plain, coupled = tx40s["tx40"], tx40s["tx40_coupled"]
    q, qd, qdd = coupled.random_states(np.random.default_rng(4), 10)
    s = qd[:, 4] + qd[:, 5]
    drive = 0.8 * s + 1.6 * np.tanh(s / 0.01)
    extra = coupled.inverse_dynamics(q, qd, qdd) - plain.inverse_dynamics(q, qd, qdd)
    assert np.allclose(extra, np.c_[np.zeros((10, 4)), drive, drive], rtol=0, atol=1e-12)
    block = coupled_with_rotor.mass_matrix(q) - coupled.mass_matrix(q)
    assert np.allclose(block[:, 4:, 4:], 0.02, rtol=0, atol=1e-15) and not block[:, :4].any()
    assert coupled_with_rotor.parameter_names[-3:] == ["Iam6", "Fvm6", "Fcm6"]


@pytest.mark.parametrize("name", NAMES)
def test_noise_free_data_are_the_model_and_ols_recovers_the_base_parameters(name, tx40s, exact_data):
    robot, ds = tx40s[name], exact_data[name]
    tau = robot.inverse_dynamics(ds.q, ds.qd, ds.qdd)
    assert np.abs(ds.tau - tau).max() < 1e-9 * np.abs(tau).max()  # the truth first
    model = rid.identify(ds, robot, "ols")
    true = robot.base_parameters().true_values()
    assert list(model.parameter_names) == robot.base_parameters().names
    assert np.all(np.abs(model.base_values() - true) <= 1e-6 * np.maximum(np.abs(true), 1e-3))


def test_pybullet_torque_steps_carry_the_coupled_drive(coupled_with_rotor):
    """Any motor torque: Bullet + the injected drive (friction on qd5 + qd6, rotor block in M) == the model."""
    robot = coupled_with_rotor
    rng = np.random.default_rng(5)
    q0, qd0 = np.array([0.3, -0.4, 0.5, 0.2, 0.6, -0.3]), rng.uniform(-1, 1, 6)
    tau = rng.uniform(-20, 20, 6)
    with PyBulletSimulator(robot) as sim:
        sim.reset(q0, qd0)
        qdd = sim.step_torque(tau)
        expected = robot.forward_dynamics(q0, qd0, tau)[0]
        assert np.abs(qdd - expected).max() < 1e-9 * np.abs(expected).max()
        rigid = robot.rigid_body_torque(q0, qd0, qdd)
        motor = sim.motor_torque(rigid, qd0[None], qdd[None])[0]
    assert np.abs(motor - tau).max() < 1e-9 * np.abs(tau).max()


@pytest.mark.parametrize("name", NAMES)
def test_inertials_are_physically_consistent(name, tx40s):
    eigenvalues = np.linalg.eigvalsh(pseudo_inertia(tx40s[name].inertials))
    assert np.all(eigenvalues > 1e-4)


def test_com_frame_inertias_are_birdys_origin_frame_tensors(tx40s):
    """The sidecar's rows hold each link's inertia about its COM; moved back to the DH frame origin,
    I_O = I_C + m (|c|² E − c cᵀ), they are BIRDy's numbers (and so are the model's standard parameters)."""
    robot = tx40s["tx40"]
    for k, row in enumerate(robot.sidecar.dh["rows"]):
        m, c = row["mass"], np.array(row["com"])
        xx, xy, xz, yy, yz, zz = row["inertia"]
        I_com = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        I_origin = I_com + m * (c @ c * np.eye(3) - np.outer(c, c))
        ours = I_origin[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]
        assert np.allclose(ours, BIRDY_ORIGIN_INERTIA[k], rtol=1e-12, atol=1e-15), k
        assert np.isclose(m, BIRDY_MASS[k]) and np.allclose(m * c, BIRDY_FIRST_MOMENTS[k], rtol=1e-12, atol=1e-15)
    expected = np.c_[BIRDY_ORIGIN_INERTIA, BIRDY_FIRST_MOMENTS, BIRDY_MASS]
    assert np.allclose(robot.inertials, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("drive", "field"),
    [
        ({"joints": [5, 7], "fv": 0.8, "fc": 1.6}, "coupling[0].joints: joint 7 is not a joint number from 1 to 6"),
        ({"joints": [6, 6], "fv": 0.8, "fc": 1.6}, "coupling[0].joints: joint 6 is listed twice"),
        ({"joints": [5, 6], "fv": 0.8, "fc": -1.6}, "coupling[0].fc must be a finite number >= 0"),
        ({"joints": [5, 6], "fv": 0.8, "fc": 1.6, "gain": 2}, "coupling[0]: unknown field(s) ['gain']"),
        ({"joints": [5, 6], "fv": "x", "fc": 1.6}, "coupling[0].fv must be a number"),
        ({"joints": [5, 6], "fv": 0.8}, "coupling[0].fc is required"),
        ({"joints": 5, "fv": 0.8, "fc": 1.6}, "coupling[0].joints must list the joint numbers"),
    ],
)
def test_a_bad_coupling_entry_is_one_line_naming_the_field(drive, field, tmp_path):
    path = _coupled_sidecar(tmp_path, **drive)
    with pytest.raises(ConfigError) as err:
        load_robot(_urdf(), path)
    message = str(err.value)
    assert "\n" not in message and f"sidecar field {field}" in message and str(path) in message


def test_two_drives_of_the_same_motor_are_refused(tmp_path):
    path = _coupled_sidecar(tmp_path, joints=[5, 6], fv=0.8, fc=1.6)
    data = yaml.safe_load(path.read_text())
    data["coupling"].append({"joints": [4, 6], "fv": 0.1, "fc": 0.1})
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"two drives end with joint 6.*Fvm6"):
        load_robot(_urdf(), path)


def test_a_locked_joint_leaves_the_drive_renumbered():
    robot = load_robot("tx40_coupled", lock_joints={"joint1": 0.0})
    assert robot.coupling.drives[0].joints == (3, 4)  # joints 5 and 6 are joints 4 and 5 of the locked robot
    assert robot.parameter_names[-2:] == ["Fvm5", "Fcm5"]


def test_the_structure_round_trips_the_coupling_and_older_layouts_keep_theirs(tx40s):
    plain, coupled = tx40s["tx40"].structure(), tx40s["tx40_coupled"].structure()
    data = coupled.to_dict()
    assert data["coupling"] == [{"joints": [5, 6], "rotor_inertia": False}]
    assert "coupling" not in plain.to_dict()  # a robot without coupled drives: same layout and fingerprint
    back = RobotStructure.from_dict(data)
    assert back == coupled and back.parameter_names == coupled.parameter_names
    assert "coupling: only in the model" in back.differences(plain)
    with pytest.raises(ModelError, match=r"robot structure: coupling\[0\].joints: joint 9"):
        RobotStructure.from_dict({**data, "coupling": [{"joints": [5, 9]}]})


def test_an_identified_coupled_model_round_trips_and_exports(tx40s, exact_data, tmp_path):
    robot, ds = tx40s["tx40_coupled"], exact_data["tx40_coupled"]
    model = rid.identify(ds, robot, "ols")
    model.save(tmp_path / "model.json")
    loaded = load_model(tmp_path / "model.json")
    assert loaded.structure == robot.structure()
    assert np.array_equal(loaded.predict_torque(ds.q, ds.qd, ds.qdd), model.predict_torque(ds.q, ds.qd, ds.qdd))
    # the robot with its values out to URDF + sidecar and back: the same dynamics, the drive included
    write_robot(robot, urdf=tmp_path / "out.urdf")
    back = load_robot(tmp_path / "out.urdf")
    assert back.coupling == robot.coupling
    assert np.abs(back.inverse_dynamics(ds.q, ds.qd, ds.qdd) - ds.tau).max() < 1e-9 * np.abs(ds.tau).max()
    _, notes = mjcf_text(robot)
    assert any("coupled drives (Fvm6, Fcm6) are left out" in note for note in notes)


def test_env_copies_of_a_coupled_model_step_its_forward_dynamics(tx40s, exact_data):
    """No compiled env step for coupled drives: each copy steps its own robot's forward dynamics."""
    robot, ds = tx40s["tx40_coupled"], exact_data["tx40_coupled"]
    model = rid.identify(ds, robot, "ols")
    copies = CopyParameters(model, 2)
    assert not copies.compiled
    q, qd, tau = ds.q[:2], ds.qd[:2], ds.tau[:2]
    qdd, ok = copies.forward(q, qd, tau)
    assert ok.all() and np.abs(qdd - model.forward_dynamics(q, qd, tau)).max() < 1e-9 * np.abs(qdd).max()
    assert CopyParameters(rid.identify(exact_data["tx40"], tx40s["tx40"], "ols"), 1).compiled

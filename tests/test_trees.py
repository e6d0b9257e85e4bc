"""Fixed-base kinematic trees (issue 29, deliver 5): loading, dynamics, simulation and identification.

References: PyBullet's own tree dynamics (``calculateInverseDynamics``, ``calculateMassMatrix``) on the
copy of the URDF the simulator loads, and the model's own identities (regressor times theta, CRBA
against the columns of the RNEA, forward against inverse dynamics).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from helpers import pybullet_data_file
from pybullet_reference import PyBulletReference

import robotid_sim as rid
from robotid_sim.dynamics import crba
from robotid_sim.dynamics.forward import mass_matrix_from_inverse
from robotid_sim.dynamics.regressor import reference_regressor
from robotid_sim.robot.export import write_robot
from robotid_sim.robot.structure import RobotStructure
from robotid_sim.robot.urdf import pybullet_urdf

PANDA = "franka_panda/panda.urdf"
PANDA_PARENTS = [-1, 0, 1, 2, 3, 4, 5, 6, 6]


def _link(name: str, mass: float, com: str, inertia: tuple[float, ...]) -> str:
    ixx, ixy, ixz, iyy, iyz, izz = inertia
    return (
        f'<link name="{name}"><inertial><origin xyz="{com}" rpy="0.1 -0.2 0.3"/><mass value="{mass}"/>'
        f'<inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" izz="{izz}"/></inertial></link>'
    )


def _joint(name: str, kind: str, parent: str, child: str, xyz: str, rpy: str = "0 0 0", axis: str = "0 0 1") -> str:
    limit = '<limit lower="-0.05" upper="0.05" effort="50" velocity="0.5"/>'
    if kind == "revolute":
        limit = '<limit lower="-2" upper="2" effort="50" velocity="2"/>'
    return (
        f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>{limit if kind != "fixed" else ""}</joint>'
    )


def two_arm_urdf(torso: str = "revolute") -> str:
    """A torso (revolute about z, or ``torso="fixed"``: both arms then hang from the base) carrying a
    three-joint left arm (revolute, revolute, prismatic) and a two-joint right arm on a fixed mount."""
    inertia = (0.02, 0.001, -0.002, 0.025, 0.0015, 0.012)
    parts = [
        '<link name="base"/>',
        _joint("torso_joint", torso, "base", "torso", "0 0 0.3"),
        _link("torso", 5.0, "0.01 0 0.2", (0.2, 0.01, 0.0, 0.18, -0.01, 0.08)),
        _joint("left_shoulder", "revolute", "torso", "left_upper", "0 0.25 0.35", "0.1 0 0.2", "0 1 0"),
        _link("left_upper", 1.2, "0 0.02 0.15", inertia),
        _joint("left_elbow", "revolute", "left_upper", "left_fore", "0 0 0.3", "0 0.3 0", "1 0 0"),
        _link("left_fore", 0.8, "0.01 0 0.12", inertia),
        _joint("left_wrist", "prismatic", "left_fore", "left_hand", "0 0 0.25", "0.2 0 0", "0 0 1"),
        _link("left_hand", 0.3, "0 0.01 0.03", (0.002, 0.0, 0.0, 0.002, 0.0, 0.001)),
        _joint("right_mount_joint", "fixed", "torso", "right_mount", "0 -0.25 0.35", "-0.2 0 0"),
        _link("right_mount", 0.2, "0 0 0.02", (0.001, 0.0, 0.0, 0.001, 0.0, 0.001)),
        _joint("right_shoulder", "revolute", "right_mount", "right_upper", "0 0 0.05", "0 0 0", "0 1 0"),
        _link("right_upper", 1.1, "0.02 0 0.14", inertia),
        _joint("right_elbow", "revolute", "right_upper", "right_fore", "0 0 0.3", "0 0 0.4", "0 0.6 0.8"),
        _link("right_fore", 0.7, "0 0.01 0.1", inertia),
    ]
    return f'<?xml version="1.0"?><robot name="two_arm">{"".join(parts)}</robot>'


TWO_ARM_NAMES = ["torso_joint", "left_shoulder", "left_elbow", "left_wrist", "right_shoulder", "right_elbow"]
TWO_ARM_PARENTS = {"revolute": [-1, 0, 1, 2, 0, 4], "fixed": [-1, 0, 1, -1, 3]}


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, rid.Robot]:
    """The Panda with its fingers, the two-arm tree and its torso-less variant (two arms on the base)."""
    folder = tmp_path_factory.mktemp("trees")
    out = {"panda": rid.load_robot(pybullet_data_file(PANDA))}
    for torso in ("revolute", "fixed"):
        path = folder / f"two_arm_{torso}.urdf"
        path.write_text(two_arm_urdf(torso))
        out[f"two_arm_{torso}"] = rid.load_robot(path)
    return out


def _states(robot: rid.Robot, N: int, seed: int = 0):
    return robot.random_states(np.random.default_rng(seed), N)


# ---------------------------------------------------------------------------- loading
def test_panda_with_its_fingers_loads_as_a_tree_and_its_structure_round_trips(trees):
    panda = trees["panda"]
    assert panda.joint_names == [f"panda_joint{k}" for k in range(1, 8)] + [
        "panda_finger_joint1",
        "panda_finger_joint2",
    ]
    assert panda.parents.tolist() == PANDA_PARENTS and not panda.is_serial
    assert [j.kind for j in panda.joints[7:]] == ["prismatic", "prismatic"]
    structure = panda.structure()
    data = structure.to_dict()
    parent_names = [j["parent"] for j in data["joints"]]
    assert parent_names == [None] + [f"panda_joint{k}" for k in range(1, 7)] + ["panda_joint7", "panda_joint7"]
    again = RobotStructure.from_dict(data)
    assert again == structure and again.parents.tolist() == PANDA_PARENTS
    # a serial chain writes no parents: its structure (and every saved model's fingerprint) is unchanged
    assert all("parent" not in j for j in rid.load_robot("hyper9").structure().to_dict()["joints"])
    for torso, parents in TWO_ARM_PARENTS.items():
        robot = trees[f"two_arm_{torso}"]
        assert robot.joint_names == [n for n in TWO_ARM_NAMES if torso == "revolute" or n != "torso_joint"]
        assert robot.parents.tolist() == parents


def test_a_structure_naming_an_unknown_parent_is_refused(trees):
    data = trees["two_arm_revolute"].structure().to_dict()
    data["joints"][2]["parent"] = "nope"
    with pytest.raises(rid.ModelError, match=r"joint 'left_elbow': its parent 'nope' is not a joint"):
        RobotStructure.from_dict(data)
    data["joints"][2]["parent"] = "left_wrist"  # after it: not a tree in order
    with pytest.raises(
        rid.ModelError, match=r"joint 'left_elbow' \(index 2\) has parent 3: a parent must be an earlier"
    ):
        RobotStructure.from_dict(data)


@pytest.mark.parametrize("jtype", ["floating", "planar"])
def test_a_floating_base_is_refused_by_name(jtype, tmp_path):
    text = two_arm_urdf().replace(
        '<joint name="torso_joint" type="revolute">', f'<joint name="torso_joint" type="{jtype}">'
    )
    path = tmp_path / "floating.urdf"
    path.write_text(text)
    with pytest.raises(
        rid.ModelError, match=rf"joint 'torso_joint' has type '{jtype}'.*floating bases are not supported"
    ):
        rid.load_robot(path)


# ---------------------------------------------------------------------------- dynamics against PyBullet
@pytest.mark.parametrize("name", ["panda", "two_arm_revolute", "two_arm_fixed"])
def test_tree_inverse_dynamics_and_mass_matrix_match_pybullet(name, trees, tmp_path):
    robot = trees[name]
    path = tmp_path / "copy.urdf"
    path.write_text(re.sub(r"<visual>.*?</visual>", "", pybullet_urdf(robot.urdf_path, robot.inertials), flags=re.S))
    reference = PyBulletReference(path, gravity=robot.gravity, joint_names=robot.joint_names)
    q, qd, qdd = _states(robot, 20)
    tau = robot.rigid_body_torque(q, qd, qdd)
    expected = reference.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(tau, expected, rtol=0, atol=1e-9 * np.abs(expected).max())
    M = robot.mass_matrix(q)
    expected = reference.mass_matrix(q)
    np.testing.assert_allclose(M, expected, rtol=0, atol=1e-9 * np.abs(expected).max())


# ---------------------------------------------------------------------------- the model's own identities
def _check_identities(robot: rid.Robot, q, qd, qdd) -> None:
    """Regressor @ theta = RNEA torque; M = RNEA columns, symmetric positive definite; forward inverts inverse."""
    theta = robot.true_parameters()
    tau = robot.inverse_dynamics(q, qd, qdd)
    scale = np.abs(tau).max()
    Y = robot.regressor(q, qd, qdd)
    np.testing.assert_allclose(Y @ theta, tau, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(reference_regressor(robot, q, qd, qdd), Y, rtol=0, atol=1e-9 * np.abs(Y).max())
    base = robot.base_parameters()
    np.testing.assert_allclose(base.regressor(q, qd, qdd) @ base.true_values(), tau, rtol=0, atol=1e-9 * scale)
    M = robot.mass_matrix(q)
    columns = mass_matrix_from_inverse(robot.rigid_body_torque, q)
    np.testing.assert_allclose(M, columns, rtol=0, atol=1e-9 * np.abs(M).max())
    np.testing.assert_allclose(M, M.transpose(0, 2, 1), rtol=0, atol=1e-12 * np.abs(M).max())
    assert np.linalg.eigvalsh(M).min() > 0
    np.testing.assert_allclose(robot.forward_dynamics(q, qd, tau), qdd, rtol=0, atol=1e-9 * np.abs(qdd).max())


def _on_other_branches(parents: np.ndarray) -> np.ndarray:
    """(n, n) True where neither joint carries the other."""
    n = len(parents)
    carries = np.eye(n, dtype=bool)
    for j in range(n):
        k = parents[j]
        while k >= 0:
            carries[k, j] = True
            k = parents[k]
    return ~(carries | carries.T)


@pytest.mark.parametrize("name", ["panda", "two_arm_revolute", "two_arm_fixed"])
def test_tree_regressor_mass_matrix_and_forward_dynamics_are_consistent(name, trees, monkeypatch):
    robot = trees[name]
    q, qd, qdd = _states(robot, 30, seed=1)
    _check_identities(robot, q, qd, qdd)
    # joints on other branches: no torque from each other's links, no mass-matrix coupling
    apart = _on_other_branches(robot.parents)
    M = robot.mass_matrix(q)
    assert np.all(M[:, apart] == 0.0)
    Y = robot.regressor(q, qd, qdd).reshape(30, robot.n_dof, robot.n_dof, -1)  # (sample, joint i, link j, param)
    assert np.all(Y[:, apart] == 0.0)
    # the threaded kernels, and the numpy fallback (no numba), give the same
    threaded = (robot.regressor(q, qd, qdd), robot.rigid_body_torque(q, qd, qdd), M)
    monkeypatch.setattr(crba, "threaded", lambda N: True)
    for ours, theirs in zip(
        threaded, (robot.regressor(q, qd, qdd), robot.rigid_body_torque(q, qd, qdd), robot.mass_matrix(q)), strict=True
    ):
        np.testing.assert_array_equal(ours, theirs)
    _check_identities(robot, q, qd, qdd)
    monkeypatch.setattr(crba, "_KERNELS", False)
    assert crba.kernels() is None
    _check_identities(robot, q, qd, qdd)


def test_the_per_copy_kernels_step_a_tree(trees):
    """The env kernels (one chain, per-copy parameters) solve the tree's forward dynamics too."""
    robot = trees["two_arm_revolute"]
    q, qd, qdd = _states(robot, 4, seed=2)
    tau = robot.rigid_body_torque(q, qd, qdd)
    chain = crba.pack_chain(robot.joints)
    inert = np.ascontiguousarray(np.broadcast_to(robot.inertials, (4, *robot.inertials.shape)))
    out, ok = np.empty_like(q), np.empty(4, dtype=np.bool_)
    g = np.ascontiguousarray(robot.gravity)
    crba.kernels().forward_per_copy(*chain.kernel_arrays, inert, g, np.zeros((4, robot.n_dof)), q, qd, tau, out, ok)
    assert ok.all()
    np.testing.assert_allclose(out, qdd, rtol=0, atol=1e-9 * np.abs(qdd).max())


# ---------------------------------------------------------------------------- simulate and identify
def test_two_arm_tree_simulates_with_the_parity_gate_and_identifies_exactly(trees, tmp_path):
    robot = trees["two_arm_revolute"]
    with rid.PyBulletSimulator(robot) as sim:  # the parity gate: PyBullet is the model, to 1e-9
        assert sim.joint_ids == sorted(sim.joint_ids)
    ds = rid.simulate(robot, "default", duration=3.0)
    model = rid.identify(ds, robot, "ols")
    true = robot.base_parameters().true_values()
    assert np.abs(model.base_values() - true).max() < 1e-6 * max(1.0, np.abs(true).max())
    q, qd, qdd = _states(robot, 200, seed=3)  # validation: states the identification never saw
    tau = robot.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(model.predict_torque(q, qd, qdd), tau, rtol=0, atol=1e-6 * np.abs(tau).max())
    # a saved model keeps the tree: it loads against the robot and predicts the same
    again = rid.load_model(model.save(tmp_path / "model.json"), robot)
    assert again.structure.parents.tolist() == TWO_ARM_PARENTS["revolute"]
    np.testing.assert_array_equal(again.predict_torque(q, qd, qdd), model.predict_torque(q, qd, qdd))


def test_panda_with_free_fingers_passes_the_parity_gate(trees):
    with rid.PyBulletSimulator(trees["panda"]) as sim:
        assert len(sim.joint_ids) == 9


# ---------------------------------------------------------------------------- export
def test_an_exported_tree_reads_back_as_the_same_tree(trees, tmp_path):
    """URDF export hangs each joint from its parent joint's link; MJCF nests the bodies the same way."""
    robot = trees["two_arm_revolute"]
    export = write_robot(robot, tmp_path / "out.urdf", tmp_path / "out.xml")
    again = rid.load_robot(export.paths[0])
    assert again.joint_names == robot.joint_names and again.parents.tolist() == robot.parents.tolist()
    q, qd, qdd = _states(robot, 10, seed=4)
    tau = robot.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(again.inverse_dynamics(q, qd, qdd), tau, rtol=0, atol=1e-12 * np.abs(tau).max())
    world = ET.parse(export.paths[2]).getroot().find("worldbody")
    torso = world.find("body")
    assert [b.get("name") for b in torso.findall("body")] == ["left_upper", "right_upper"]

"""Robot loading options (issue 9): joint locking, a light sidecar, URDF <dynamics> friction, the auto-found sidecar.

A locked joint is a fixed joint at the given position in the model *and* in what PyBullet loads
(the parity gate compares them to 1e-9), so a locked robot identifies exactly; its locks are part
of its structure, so a saved model refuses a robot locked otherwise.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import pybullet_data_file

import robotid_sim as rid
from robotid_sim.dynamics.chain import rpy_to_matrix
from robotid_sim.robot.model import FRICTION_FROM_SIDECAR, FRICTION_FROM_URDF, FRICTION_NONE
from robotid_sim.robot.structure import RobotStructure
from robotid_sim.robot.urdf import pybullet_urdf
from robotid_sim.sim.pybullet_sim import PyBulletSimulator

FINGERS = {"finger_joint1": 0.01, "finger_joint2": 0.035}


def _link(name: str, mass: float, com: str, inertia=(0.01, 0.0, 0.0, 0.012, 0.0, 0.008)) -> str:
    ixx, ixy, ixz, iyy, iyz, izz = inertia
    return (
        f'<link name="{name}"><inertial><origin xyz="{com}" rpy="0.1 0.2 0.3"/><mass value="{mass}"/>'
        f'<inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" izz="{izz}"/></inertial></link>'
    )


def _joint(name, parent, child, jtype, xyz, axis, limit='lower="-2" upper="2"', dynamics=""):
    limit_el = f'<limit {limit} effort="50" velocity="2"/>' if jtype != "fixed" else ""
    return (
        f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}" rpy="0.05 -0.1 0.2"/><axis xyz="{axis}"/>{limit_el}{dynamics}</joint>'
    )


def _gripper_arm(dynamics: tuple[str, str, str] = ("", "", ""), fingers: int = 2) -> str:
    """A 3R arm with a hand and a two-finger (or one-finger) prismatic gripper: a tree, not a chain."""
    finger_limit = 'lower="0" upper="0.04"'
    parts = [
        '<link name="base_link"/>',
        _link("link1", 2.0, "0.02 0.01 0.1", (0.03, 0.001, 0.0, 0.025, -0.002, 0.01)),
        _joint("j1", "base_link", "link1", "revolute", "0 0 0.1", "0 0 1", dynamics=dynamics[0]),
        _link("link2", 1.5, "0.15 0.02 -0.01", (0.02, 0.001, -0.002, 0.03, 0.001, 0.025)),
        _joint("j2", "link1", "link2", "revolute", "0 0.05 0.2", "0 1 0", dynamics=dynamics[1]),
        _link("link3", 0.8, "0.1 -0.02 0.01", (0.004, 0.0002, 0.0, 0.005, 0.0003, 0.002)),
        _joint("j3", "link2", "link3", "revolute", "0.3 0 0", "0 1 0", dynamics=dynamics[2]),
        _link("hand", 0.5, "0.03 0 0.01", (0.002, 0.0, 0.0, 0.0015, 0.0, 0.001)),
        _joint("hand_joint", "link3", "hand", "fixed", "0.2 0 0", "1 0 0"),
        _link("left_finger", 0.06, "0.02 0.005 0", (1e-4, 0.0, 0.0, 1.2e-4, 0.0, 0.5e-4)),
        _joint("finger_joint1", "hand", "left_finger", "prismatic", "0.06 0 0", "0 1 0", finger_limit),
    ]
    if fingers == 2:
        parts += [
            _link("right_finger", 0.06, "0.02 -0.005 0", (1e-4, 0.0, 0.0, 1.2e-4, 0.0, 0.5e-4)),
            _joint("finger_joint2", "hand", "right_finger", "prismatic", "0.06 0 0", "0 -1 0", finger_limit),
        ]
    return f'<?xml version="1.0"?>\n<robot name="gripper_arm">{"".join(parts)}</robot>'


def _write(tmp_path: Path, text: str, name: str = "arm.urdf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _identified_error(robot, duration: float) -> tuple[float, object]:
    """Noise-free data from the default excitation, OLS: the largest base-parameter error (relative to max |true|)."""
    ds = rid.simulate(robot, "default", duration=duration)
    model = rid.identify(ds, robot, "ols")
    true = robot.base_parameters().true_values()
    return float(np.abs(model.base_values() - true).max() / max(1.0, np.abs(true).max())), model


# ---------------------------------------------------------------------------- joint locking
def test_panda_with_locked_fingers_loads_simulates_and_identifies_exactly():
    """The acceptance test of issue 9: pybullet_data's Franka Panda, fingers locked at 2 cm."""
    path = pybullet_data_file("franka_panda/panda.urdf")
    assert rid.load_robot(path).n_dof == 9  # a tree (tests/test_trees.py); locked fingers make it serial
    locks = {"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.02}
    robot = rid.load_robot(path, lock_joints=locks)
    assert robot.joint_names == [f"panda_joint{k}" for k in range(1, 8)]
    assert robot.locked_joints == locks
    assert robot.name == "panda (locked panda_finger_joint1=0.02, panda_finger_joint2=0.02)"
    assert robot.friction_source == FRICTION_NONE and robot.sidecar is None
    error, _ = _identified_error(robot, duration=4.0)
    assert error < 1e-6, error


def test_locked_fingers_are_merged_at_their_locked_pose_and_pybullet_simulates_it(tmp_path):
    path = _write(tmp_path, _gripper_arm())
    robot = rid.load_robot(path, lock_joints=FINGERS)
    assert robot.joint_names == ["j1", "j2", "j3"] and robot.locked_joints == FINGERS
    closed = rid.load_robot(path, lock_joints={"finger_joint1": 0.0, "finger_joint2": 0.0})
    # finger k moves its 0.06 kg along ±y of its joint frame (rpy 0.05 -0.1 0.2 in the hand, itself
    # rpy 0.05 -0.1 0.2 in link 3): link 3's body gains that mass times the displacement as first moment
    R = rpy_to_matrix([0.05, -0.1, 0.2])
    moved = 0.06 * (R @ R @ [0.0, 0.01, 0.0]) + 0.06 * (R @ R @ [0.0, -0.035, 0.0])
    delta = robot.inertials[2] - closed.inertials[2]
    np.testing.assert_allclose(delta[6:9], moved, atol=1e-15)
    assert delta[9] == pytest.approx(0.0, abs=1e-15)
    with PyBulletSimulator(robot) as sim:  # the parity gate (1e-9) passed
        assert len(sim.joint_ids) == 3
    error, _ = _identified_error(robot, duration=4.0)
    assert error < 1e-6, error


def test_pybullet_urdf_writes_locked_joints_as_fixed_with_the_lock_in_the_origin(tmp_path):
    path = _write(tmp_path, _gripper_arm())
    root = ET.fromstring(pybullet_urdf(path, lock_joints=FINGERS).split("\n", 1)[1])
    joints = {j.get("name"): j for j in root.findall("joint")}
    for name, y in (("finger_joint1", 0.01), ("finger_joint2", -0.035)):
        joint = joints[name]
        assert joint.get("type") == "fixed"
        assert [el.tag for el in joint] == ["parent", "child", "origin"]
        xyz = np.array(joint.find("origin").get("xyz").split(), float)
        R = rpy_to_matrix([0.05, -0.1, 0.2])
        np.testing.assert_allclose(xyz, [0.06, 0, 0] + R @ [0, y, 0], atol=1e-15)
    assert joints["j1"].get("type") == "revolute"


def test_a_joint_locked_mid_chain_is_the_full_arm_at_that_position(tmp_path):
    """Locking j2 at 0.7 rad: mass matrix and inverse dynamics are the full arm's with q2 = 0.7, qd2 = qdd2 = 0."""
    path = _write(tmp_path, _gripper_arm())
    full = rid.load_robot(path, lock_joints=FINGERS)
    robot = rid.load_robot(path, lock_joints={"j2": 0.7, **FINGERS})
    assert robot.joint_names == ["j1", "j3"]
    assert list(robot.locked_joints) == ["j2", "finger_joint1", "finger_joint2"]  # URDF order
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.uniform(-1, 1, (4, 2)) for _ in range(3))

    def widen(x, middle):
        return np.column_stack([x[:, 0], np.full(len(x), middle), x[:, 1]])

    keep = [0, 2]
    M_full = full.mass_matrix(widen(q, 0.7))[:, keep][:, :, keep]
    np.testing.assert_allclose(robot.mass_matrix(q), M_full, rtol=1e-12, atol=1e-14)
    tau_full = full.rigid_body_torque(widen(q, 0.7), widen(qd, 0.0), widen(qdd, 0.0))[:, keep]
    np.testing.assert_allclose(robot.rigid_body_torque(q, qd, qdd), tau_full, rtol=1e-12, atol=1e-12)
    with PyBulletSimulator(robot):  # the parity gate passes
        pass


def test_an_unknown_lock_names_the_moving_joints(tmp_path):
    path = _write(tmp_path, _gripper_arm())
    with pytest.raises(
        rid.ModelError,
        match=r"cannot lock joint 'finger_joint3'.*moving joints that can be locked are j1, j2, j3, finger_joint1, "
        r"finger_joint2",
    ):
        rid.load_robot(path, lock_joints={"finger_joint3": 0.0})
    with pytest.raises(rid.ModelError, match=r"cannot lock joint 'hand_joint': it is a fixed joint already"):
        rid.load_robot(path, lock_joints={"hand_joint": 0.0})


@pytest.mark.parametrize(
    ("locks", "match"),
    [
        (
            {"finger_joint1": 0.05, "finger_joint2": 0.0},
            r"'finger_joint1' cannot be locked at 0.05 m: its limits are \[0, 0.04\] m",
        ),
        ({"j2": -2.5, **FINGERS}, r"'j2' cannot be locked at -2.5 rad: its limits are \[-2, 2\] rad"),
        ({"finger_joint1": float("nan"), "finger_joint2": 0.0}, r"position of joint 'finger_joint1' must be finite"),
        ({"finger_joint1": float("inf"), "finger_joint2": 0.0}, r"position of joint 'finger_joint1' must be finite"),
        ({"finger_joint1": "open", "finger_joint2": 0.0}, r"position of joint 'finger_joint1' must be a number"),
    ],
)
def test_a_lock_outside_the_limits_or_not_finite_is_refused(tmp_path, locks, match):
    path = _write(tmp_path, _gripper_arm())
    with pytest.raises(rid.ModelError, match=match):
        rid.load_robot(path, lock_joints=locks)


def test_per_joint_sidecar_lists_count_the_unlocked_joints_or_every_joint_of_the_urdf(tmp_path):
    path = _write(tmp_path, _gripper_arm())
    sidecar = _write(tmp_path, yaml.safe_dump({"rotor_inertia": [0.01] * 4}), "four.yaml")
    with pytest.raises(
        rid.ConfigError,
        match=r"'rotor_inertia' must have 3 values \(one per joint that is not locked, or 5 with the locked "
        r"joint\(s\) finger_joint1, finger_joint2: one per moving joint of the URDF\), got \(4,\) "
        r"\(sidecar .*four\.yaml\)",
    ):
        rid.load_robot(path, sidecar=sidecar, lock_joints=FINGERS)
    friction = {"friction": {"model": "coulomb_viscous", "fc": [0.1] * 4, "fv": [0.2] * 3}}
    sidecar = _write(tmp_path, yaml.safe_dump(friction), "friction4.yaml")
    with pytest.raises(
        rid.ConfigError, match=r"'fc' must have 3 values.*or 5 with the locked joint\(s\) finger_joint1, finger_joint2"
    ):
        rid.load_robot(path, sidecar=sidecar, lock_joints=FINGERS)
    whole = _write(tmp_path, yaml.safe_dump({"rotor_inertia": [0.01, 0.02, 0.03, 0.04, 0.05]}), "five.yaml")
    assert rid.load_robot(path, sidecar=whole, lock_joints=FINGERS).rotor_inertia.tolist() == [0.01, 0.02, 0.03]
    good = _write(tmp_path, yaml.safe_dump({"rotor_inertia": [0.01] * 3}), "three.yaml")
    assert rid.load_robot(path, sidecar=good, lock_joints=FINGERS).rotor_inertia.tolist() == [0.01] * 3


def test_a_model_identified_on_a_locked_robot_refuses_other_locks(tmp_path):
    """The locks are in the structure a saved model embeds: here they are the only kinematic difference."""
    path = _write(tmp_path, _gripper_arm(fingers=1))
    robot = rid.load_robot(path, lock_joints={"finger_joint1": 0.01})
    structure = robot.structure()
    assert structure.locked_joints == {"finger_joint1": 0.01}
    assert structure.to_dict()["locked_joints"] == {"finger_joint1": 0.01}
    assert RobotStructure.from_dict(structure.to_dict()) == structure
    _, model = _identified_error(robot, duration=3.0)
    saved = model.save(tmp_path / "model.json")
    assert rid.load_model(saved, robot=robot).structure == structure
    other = rid.load_robot(path, lock_joints={"finger_joint1": 0.03})
    assert other.joint_names == robot.joint_names
    with pytest.raises(rid.ModelError, match=r"robot differs.*locked_joints.finger_joint1: 0.01 in the model, 0.03"):
        rid.load_model(saved, robot=other)
    unlocked = rid.load_robot(path)  # one finger only: a 4-joint chain without locks
    assert unlocked.joint_names == ["j1", "j2", "j3", "finger_joint1"]
    with pytest.raises(rid.ModelError, match=r"robot differs.*locked_joints: only in the model"):
        rid.load_model(saved, robot=unlocked)


def test_a_structure_without_locks_keeps_its_layout_and_fingerprint(robots):
    """Files saved before locks existed have no 'locked_joints': they load with the same SHA-256."""
    structure = robots["planar3r"].structure()
    data = structure.to_dict()
    assert "locked_joints" not in data and structure.locked_joints == {}
    again = RobotStructure.from_dict(data)
    assert again.sha256 == structure.sha256 and again.differences(structure) == []


# ---------------------------------------------------------------------------- light sidecar
def test_a_sidecar_with_only_friction_is_enough(tmp_path):
    path = _write(tmp_path, _gripper_arm(fingers=1))
    friction = {"model": "coulomb_viscous", "fc": [0.3, 0.2, 0.1], "fv": 0.05}
    sidecar = _write(tmp_path, yaml.safe_dump({"friction": friction}), "light.yaml")
    robot = rid.load_robot(path, sidecar=sidecar, lock_joints={"finger_joint1": 0.02})
    assert robot.sidecar is not None and robot.sidecar.citation is None
    assert robot.friction_source == FRICTION_FROM_SIDECAR
    assert robot.friction.fc.tolist() == [0.3, 0.2, 0.1] and robot.friction.fv.tolist() == [0.05] * 3
    assert robot.rotor_inertia is None and robot.gear_ratio.tolist() == [1.0] * 3
    assert robot.velocity_limit.tolist() == [2.0] * 3  # the URDF's <limit velocity>
    assert robot.acceleration_limit.tolist() == [5.0] * 3  # DEFAULT_ACCELERATION_LIMIT
    only_velocity = _write(tmp_path, yaml.safe_dump({"limits": {"velocity": 1.5}}), "vel.yaml")
    robot = rid.load_robot(path, sidecar=only_velocity, lock_joints={"finger_joint1": 0.02})
    assert robot.velocity_limit.tolist() == [1.5] * 3 and robot.acceleration_limit.tolist() == [5.0] * 3
    assert robot.friction_source == FRICTION_NONE
    only_acceleration = _write(tmp_path, yaml.safe_dump({"limits": {"acceleration": [3, 4, 5]}}), "acc.yaml")
    robot = rid.load_robot(path, sidecar=only_acceleration, lock_joints={"finger_joint1": 0.02})
    assert robot.velocity_limit.tolist() == [2.0] * 3 and robot.acceleration_limit.tolist() == [3, 4, 5]


def test_an_unknown_sidecar_field_is_still_named(tmp_path):
    path = _write(tmp_path, _gripper_arm(fingers=1))
    sidecar = _write(tmp_path, yaml.safe_dump({"friction": {"model": "none"}, "gear_ration": 2}), "typo.yaml")
    with pytest.raises(rid.ConfigError, match=r"unknown field 'gear_ration'"):
        rid.load_robot(path, sidecar=sidecar)
    sidecar = _write(tmp_path, yaml.safe_dump({"limits": {"velocity": 1, "jerk": 3}}), "jerk.yaml")
    with pytest.raises(rid.ConfigError, match=r"unknown field 'limits.jerk'"):
        rid.load_robot(path, sidecar=sidecar)


# ---------------------------------------------------------------------------- URDF <dynamics> friction
_TAGS = ('<dynamics damping="0.3" friction="0.5"/>', '<dynamics damping="0.2"/>', "")


def test_urdf_dynamics_tags_become_coulomb_viscous_friction_identified_exactly(tmp_path):
    path = _write(tmp_path, _gripper_arm(_TAGS))
    robot = rid.load_robot(path, lock_joints=FINGERS)
    assert robot.friction_source == FRICTION_FROM_URDF
    assert robot.friction.kind == "coulomb_viscous"
    assert robot.friction.fc.tolist() == [0.5, 0.0, 0.0] and robot.friction.fv.tolist() == [0.3, 0.2, 0.0]
    assert robot.parameter_names[10:13] == ["fc1", "fv1", "S1"]
    error, model = _identified_error(robot, duration=4.0)  # the simulator injects this friction
    assert error < 1e-6, error
    base = robot.base_parameters()
    identified = dict(zip(base.names, model.base_values(), strict=True))
    for name, value in {"fc1": 0.5, "fv1": 0.3, "fc2": 0.0, "fv2": 0.2, "fc3": 0.0, "fv3": 0.0}.items():
        row = base.K[base.names.index(name)]
        assert row[base.standard_names.index(name)] == 1.0 and np.count_nonzero(row) == 1  # a base parameter alone
        assert identified[name] == pytest.approx(value, abs=1e-6)


def test_a_sidecar_friction_replaces_the_dynamics_tags_with_a_warning(tmp_path, caplog):
    path = _write(tmp_path, _gripper_arm(_TAGS))
    sidecar = _write(tmp_path, yaml.safe_dump({"friction": {"model": "none"}}), "nofriction.yaml")
    with caplog.at_level(logging.WARNING, logger="robotid_sim.robot.model"):
        robot = rid.load_robot(path, sidecar=sidecar, lock_joints=FINGERS)
    assert robot.friction.kind == "none" and robot.friction_source == FRICTION_FROM_SIDECAR
    assert "the sidecar's friction (none) replaces the URDF's <dynamics> tags" in caplog.text
    caplog.clear()
    same = {"model": "coulomb_viscous", "fc": [0.5, 0, 0], "fv": [0.3, 0.2, 0]}
    sidecar = _write(tmp_path, yaml.safe_dump({"friction": same}), "same.yaml")
    with caplog.at_level(logging.WARNING, logger="robotid_sim.robot.model"):
        rid.load_robot(path, sidecar=sidecar, lock_joints=FINGERS)
    assert "replaces" not in caplog.text  # the same values: nothing to warn about


def test_all_zero_or_negative_dynamics_tags(tmp_path):
    zero = ('<dynamics damping="0.0" friction="0.0"/>',) * 3
    robot = rid.load_robot(_write(tmp_path, _gripper_arm(zero)), lock_joints=FINGERS)
    assert robot.friction.kind == "none" and robot.friction_source == FRICTION_NONE
    negative = ('<dynamics damping="-0.1"/>', "", "")
    path = _write(tmp_path, _gripper_arm(negative), "neg.urdf")
    with pytest.raises(rid.ModelError, match=r"<dynamics damping> of joint 'j1' is negative \(-0.1\)"):
        rid.load_robot(path, lock_joints=FINGERS)
    sidecar = _write(tmp_path, yaml.safe_dump({"friction": {"model": "none"}}), "nofriction.yaml")
    assert rid.load_robot(path, sidecar=sidecar, lock_joints=FINGERS).friction.kind == "none"  # tags unused


# ---------------------------------------------------------------------------- auto-found sidecar
def test_a_scenario_beside_the_urdf_is_not_taken_for_its_sidecar(tmp_path, caplog):
    path = _write(tmp_path, _gripper_arm(fingers=1))
    scenario = {"robot": "arm.urdf", "lock_joints": {"finger_joint1": 0.02}, "estimators": [{"name": "ols"}]}
    found = _write(tmp_path, yaml.safe_dump(scenario), "arm.yaml")
    with caplog.at_level(logging.WARNING, logger="robotid_sim.robot.sidecar"):
        robot = rid.load_robot(path, lock_joints={"finger_joint1": 0.02})
    assert robot.sidecar is None
    assert f"ignoring {found} found beside {path}: it is a scenario" in caplog.text
    assert "pass the sidecar explicitly (sidecar=" in caplog.text
    with pytest.raises(rid.ConfigError, match=r"unknown field 'estimators'.*unknown field 'robot'"):
        rid.load_robot(path, sidecar=found)  # given explicitly: fails loudly


def test_an_auto_found_sidecar_that_is_mostly_sidecar_fields_still_fails_loudly(tmp_path, caplog):
    path = _write(tmp_path, _gripper_arm(fingers=1))
    _write(tmp_path, yaml.safe_dump({"friction": {"model": "none"}, "gear_ration": 2, "citation": "x"}), "arm.yaml")
    with pytest.raises(rid.ConfigError, match=r"found beside .*arm\.urdf.*unknown field 'gear_ration'"):
        rid.load_robot(path)
    _write(tmp_path, "- a list\n- of things\n", "arm.yaml")
    with caplog.at_level(logging.WARNING, logger="robotid_sim.robot.sidecar"):
        assert rid.load_robot(path).sidecar is None
    assert "not a mapping of fields but list" in caplog.text

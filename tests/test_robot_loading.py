"""Robot descriptions: URDF parsing, sidecars, DH generator, and bad input (issue 2)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from conftest import BUNDLED

import robotid_sim as rid
from robotid_sim.robot.build import build

_JOINT = """<?xml version="1.0"?>
<robot name="bad">
  <link name="base"/>
  <link name="l1"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <joint name="j1" type="{type}">
    <parent link="base"/><child link="l1"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
</robot>"""


@pytest.mark.parametrize("jtype", ["floating", "planar", "spherical"])
def test_unsupported_joint_type_is_rejected_by_name(jtype, tmp_path):
    path = tmp_path / "bad.urdf"
    path.write_text(_JOINT.format(type=jtype))
    with pytest.raises(
        rid.ModelError, match=rf"'j1' has type '{jtype}'.*only revolute, continuous, prismatic and fixed"
    ):
        rid.load_robot(path)


def test_branching_urdf_loads_as_a_tree(tmp_path):
    text = _JOINT.format(type="revolute").replace(
        "</robot>",
        '<link name="l2"/><joint name="j2" type="revolute"><parent link="base"/><child link="l2"/>'
        '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>',
    )
    path = tmp_path / "tree.urdf"
    path.write_text(text)
    robot = rid.load_robot(path)
    assert robot.joint_names == ["j1", "j2"] and robot.parents.tolist() == [-1, -1] and not robot.is_serial


def test_urdf_without_sidecar_has_no_friction_and_no_rotor_inertia(arm6_path):
    robot = rid.load_robot(arm6_path)
    assert robot.rotor_inertia is None
    assert robot.n_parameters == 10 * robot.n_dof
    assert robot.parameter_names[:10] == ["XX1", "XY1", "XZ1", "YY1", "YZ1", "ZZ1", "MX1", "MY1", "MZ1", "M1"]


def test_fixed_links_are_merged_into_their_parent(arm6_path):
    robot = rid.load_robot(arm6_path)
    assert robot.joint_names == ["j1", "j2", "j3", "j4", "j5", "j6"]
    # link 4 carries its own 1.2 kg plus the 0.7 kg fixed link; link 6 its 0.5 kg plus the tool
    assert robot.inertials[3, 9] == pytest.approx(1.9)
    assert robot.inertials[5, 9] == pytest.approx(0.8)


def _write_robot(tmp_path, sidecar: dict):
    (tmp_path / "arm.urdf").write_text(_JOINT.format(type="revolute"))
    (tmp_path / "arm.yaml").write_text(yaml.safe_dump(sidecar))
    return tmp_path / "arm.urdf"


GOOD_SIDECAR = {
    "citation": "test",
    "friction": {"model": "coulomb_viscous", "fc": [0.1], "fv": [0.2], "offset": [0.0]},
    "rotor_inertia": [0.01],
    "gear_ratio": 1,
    "limits": {"velocity": 1.0, "acceleration": 2.0},
}


def test_sidecar_next_to_urdf_is_used(tmp_path):
    robot = rid.load_robot(_write_robot(tmp_path, GOOD_SIDECAR))
    assert robot.parameter_names == [
        *(f"{k}1" for k in ["XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M"]),
        "Ia1",
        "fc1",
        "fv1",
        "S1",
    ]


def test_sidecar_without_gear_ratio_gives_ones(tmp_path):
    """Every sidecar field is optional since issue 9 (a light sidecar for a foreign URDF)."""
    light = {k: v for k, v in GOOD_SIDECAR.items() if k != "gear_ratio"}
    assert np.array_equal(rid.load_robot(_write_robot(tmp_path, light)).gear_ratio, np.ones(1))


def test_sidecar_unknown_field_is_named(tmp_path):
    with pytest.raises(rid.ConfigError, match="unknown field 'gear_ration'"):
        rid.load_robot(_write_robot(tmp_path, {**GOOD_SIDECAR, "gear_ration": 3}))


def test_sidecar_unknown_friction_field_is_named(tmp_path):
    bad = {**GOOD_SIDECAR, "friction": {"model": "coulomb_viscous", "fc": [0.1], "fv": [0.2], "stiction": [1]}}
    with pytest.raises(rid.ConfigError, match=r"unknown field\(s\) \['stiction'\]"):
        rid.load_robot(_write_robot(tmp_path, bad))


def test_sidecar_wrong_number_of_joint_values_is_named(tmp_path):
    bad = {**GOOD_SIDECAR, "rotor_inertia": [0.01, 0.02]}
    with pytest.raises(rid.ConfigError, match="'rotor_inertia' must have 1 values"):
        rid.load_robot(_write_robot(tmp_path, bad))


def test_unknown_robot_name_lists_the_bundled_ones():
    with pytest.raises(rid.ModelError, match="unknown robot 'hyper10'.*hyper9"):
        rid.load_robot("hyper10")


@pytest.mark.parametrize(
    ("q", "match"),
    [
        (np.zeros((5, 4)), r"'q' must have shape \(N, 3\)"),
        (np.full((5, 3), np.nan), r"'q' contains NaN or inf \(first at sample 0, joint 1\)"),
    ],
)
def test_bad_state_arrays_are_rejected_by_name(robots, q, match):
    robot = robots["planar3r"]
    with pytest.raises(rid.DataError, match=match):
        robot.regressor(q, np.zeros((5, 3)), np.zeros((5, 3)))


def test_mismatched_sample_counts_are_rejected(robots):
    robot = robots["planar3r"]
    with pytest.raises(rid.DataError, match="'qd' has 4 samples but the other inputs have 5"):
        robot.inverse_dynamics(np.zeros((5, 3)), np.zeros((4, 3)), np.zeros((5, 3)))


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_urdfs_are_the_dh_generators_output(name, tmp_path):
    d = tmp_path / name
    d.mkdir()
    src = rid.bundled_robots()[name]
    (d / "robot.yaml").write_text((src / "robot.yaml").read_text())
    assert build(d / "robot.yaml").read_text() == (src / "robot.urdf").read_text()


def test_standard_and_modified_dh_give_the_same_arm(tmp_path):
    """A 2R planar arm described both ways has the same dynamics."""
    from robotid_sim.robot.dh import dh_to_urdf

    link = {"mass": 1.5, "inertia": [0.01, 0, 0, 0.02, 0, 0.03]}
    std = {
        "convention": "standard",
        "rows": [{"a": 0.4, **link, "com": [-0.2, 0.01, 0.0]}, {"a": 0.3, **link, "com": [-0.15, 0.0, 0.02]}],
    }
    mod = {
        "convention": "modified",
        "rows": [{"a": 0.0, **link, "com": [0.2, 0.01, 0.0]}, {"a": 0.4, **link, "com": [0.15, 0.0, 0.02]}],
    }
    (tmp_path / "s.urdf").write_text(dh_to_urdf(std))
    (tmp_path / "m.urdf").write_text(dh_to_urdf(mod))
    rs, rm = rid.load_robot(tmp_path / "s.urdf"), rid.load_robot(tmp_path / "m.urdf")
    q, qd, qdd = rs.random_states(np.random.default_rng(0), 50)
    assert np.allclose(rs.inverse_dynamics(q, qd, qdd), rm.inverse_dynamics(q, qd, qdd), atol=1e-12)

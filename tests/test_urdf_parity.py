"""The truth holds for any URDF or fails loudly (issue 8).

PyBullet must simulate exactly the model robotid_sim builds from a URDF, whatever the URDF: a
massless frame, a missing mesh, PyBullet's limit conventions; what cannot be simulated exactly
is refused with a ModelError naming the link or joint.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import pybullet_data_file

import robotid_sim as rid
from robotid_sim.dynamics.chain import inertial_parameters
from robotid_sim.robot import physical
from robotid_sim.robot.urdf import pybullet_urdf
from robotid_sim.sim import pybullet_sim
from robotid_sim.sim.pybullet_sim import PyBulletSimulator
from robotid_sim.sim.simulate import generic_excitation_note, resolve_excitation

INERTIA = 'ixx="{0}" ixy="{1}" ixz="{2}" iyy="{3}" iyz="{4}" izz="{5}"'


def _link(name: str, mass=None, com="0 0 0", inertia=(0.01, 0.0, 0.0, 0.012, 0.0, 0.008), extra="") -> str:
    if mass is None:
        return f'<link name="{name}">{extra}</link>'
    return (
        f'<link name="{name}"><inertial><origin xyz="{com}" rpy="0.1 0.2 0.3"/><mass value="{mass}"/>'
        f"<inertia {INERTIA.format(*inertia)}/></inertial>{extra}</link>"
    )


def _joint(name, parent, child, jtype="revolute", xyz="0 0 0.1", axis="0 0 1", limit='lower="-2" upper="2"'):
    limit_el = f'<limit {limit} effort="50" velocity="2"/>' if limit is not None else ""
    return (
        f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}" rpy="0.05 -0.1 0.2"/><axis xyz="{axis}"/>{limit_el}</joint>'
    )


def _arm(*, tool=True, l2_inertia=(0.02, 0.001, -0.002, 0.03, 0.001, 0.025), extra="") -> str:
    """A 3-joint arm (revolute, revolute, prismatic) with off-axis COMs; ``tool0`` on a fixed joint."""
    parts = [
        _link("base_link"),
        _link("link1", 2.0, "0.02 0.01 0.1", (0.03, 0.001, 0.0, 0.025, -0.002, 0.01)),
        _joint("j1", "base_link", "link1"),
        _link("link2", 1.5, "0.15 0.02 -0.01", l2_inertia),
        _joint("j2", "link1", "link2", xyz="0 0.05 0.2", axis="0 1 0"),
        _link("link3", 0.8, "0.01 -0.02 0.05", (0.004, 0.0002, 0.0, 0.005, 0.0003, 0.002)),
        _joint("j3", "link2", "link3", "prismatic", xyz="0.3 0 0", axis="1 0 0", limit='lower="-0.1" upper="0.15"'),
    ]
    if tool:
        parts += [_link("tool0"), _joint("tool_joint", "link3", "tool0", "fixed", xyz="0.1 0 0.02", limit=None)]
    return f'<?xml version="1.0"?>\n<robot name="arm3">{"".join(parts)}{extra}</robot>'


def _write(tmp_path: Path, text: str, name: str = "arm.urdf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _assert_identified_exactly(robot, duration=None):
    """Noise-free data from the default excitation: OLS gives the true base parameters."""
    ds = rid.simulate(robot, "default", duration=duration)
    model = rid.identify(ds, robot, "ols")
    true = robot.base_parameters().true_values()
    err = np.abs(model.base_values() - true)
    assert err.max() < 1e-6 * max(1.0, np.abs(true).max()), err.max()
    return ds


# ---------------------------------------------------------------------------- physical consistency
def _body(mass, com, principal, rpy=(0.3, -0.2, 0.5)):
    from robotid_sim.dynamics.chain import rpy_to_matrix

    R = rpy_to_matrix(rpy)
    return inertial_parameters(mass, np.asarray(com, float), R @ np.diag(principal) @ R.T)


def test_physical_checks_accept_a_rigid_body_and_name_each_violation():
    good = _body(2.0, [0.1, 0.2, -0.05], [0.01, 0.02, 0.025])
    assert physical.physically_consistent(good)
    assert physical.link_violations(good, "link1") == []
    triangle = _body(1.0, [0.1, 0, 0], [0.001, 0.002, 0.01])
    (msg,) = physical.link_violations(triangle, "link2")
    assert msg.startswith("link2: principal moments of inertia about the COM") and "triangle inequality" in msg
    negative = _body(1.0, [0, 0, 0], [-0.001, 0.01, 0.01])
    assert any(
        "inertia about the COM is not positive definite (eigenvalues -0.001" in v
        for v in physical.link_violations(negative, "link3")
    )
    assert physical.link_violations(_body(-1.0, [0, 0, 0], [0.01] * 3), "l4")[0] == "l4: mass is not positive (-1 kg)"


def test_semidefinite_checks_accept_point_masses_rods_and_massless_frames():
    rod = _body(1.0, [0.3, 0.1, 0.0], [0.0, 0.1, 0.1])
    point = _body(1.0, [0.2, 0.0, 0.1], [0.0, 0.0, 0.0])
    for phi in (rod, point, np.zeros(10)):
        assert not physical.physically_consistent(phi)
        assert physical.physically_consistent(phi, strict=False)
        assert physical.link_violations(phi, strict=False) == []


def test_batched_checks_match_the_single_link_ones():
    rng = np.random.default_rng(0)
    phis = np.array(
        [
            _body(rng.uniform(-0.5, 3), rng.normal(size=3) * 0.2, rng.uniform(-0.002, 0.05, size=3), rng.normal(size=3))
            for _ in range(200)
        ]
    )
    names = [f"l{i}" for i in range(len(phis))]
    for check in (
        physical.mass_positive,
        physical.inertia_positive_definite,
        physical.triangle_inequality,
        physical.pseudo_inertia_positive_definite,
        physical.physically_consistent,
    ):
        batch = check(phis)
        assert batch.shape == (200,)
        assert [bool(check(phi)) for phi in phis] == batch.tolist()
    assert physical.violations(phis, names) == sum(
        (physical.link_violations(phi, name) for phi, name in zip(phis, names, strict=True)), []
    )
    assert 0 < physical.physically_consistent(phis).sum() < 200


def test_pseudo_inertia_is_positive_definite_exactly_when_mass_and_triangle_hold():
    rng = np.random.default_rng(1)
    for _ in range(300):
        phi = _body(
            rng.uniform(-0.5, 3), rng.normal(size=3) * 0.2, rng.uniform(-0.002, 0.05, size=3), rng.normal(size=3)
        )
        eig = np.linalg.eigvalsh(physical.pseudo_inertia(phi))
        if abs(eig).min() < 1e-9:  # too close to the boundary to tell by eigenvalues
            continue
        assert bool(physical.pseudo_inertia_positive_definite(phi)) == bool(eig.min() > 0)
        assert bool(physical.pseudo_inertia_positive_definite(phi)) == bool(
            physical.mass_positive(phi) and physical.triangle_inequality(phi)
        )


# ---------------------------------------------------------------------------- the robots
def test_pybullet_data_kuka_iiwa_is_identified_exactly_from_the_default_excitation():
    robot = rid.load_robot(pybullet_data_file("kuka_iiwa/model.urdf"))
    assert robot.sidecar is None
    _assert_identified_exactly(robot, duration=6.0)


def test_pybullet_data_xarm6_is_refused_naming_its_inconsistent_link():
    """PyBullet zeroes link2's inertia (triangle inequality broken): refused, not simulated wrongly."""
    path = pybullet_data_file("xarm/xarm6_robot.urdf")
    with pytest.raises(rid.ModelError, match=r"fix the <inertial> of link 'link2' in .*xarm6_robot\.urdf.*triangle"):
        rid.load_robot(path)


def test_massless_tool_frame_on_a_fixed_joint_is_simulated_as_modelled(tmp_path):
    """PyBullet alone would give tool0 1 kg and a unit inertia; the model and the simulator say 0."""
    robot = rid.load_robot(_write(tmp_path, _arm(tool=True)))
    assert robot.joint_names == ["j1", "j2", "j3"]
    with PyBulletSimulator(robot) as sim:
        tool = next(i for i, name in sim.link_names.items() if name == "tool0")
        assert pybullet_sim.p.getDynamicsInfo(sim.body, tool, physicsClientId=sim.client)[0] == 0.0
    _assert_identified_exactly(robot, duration=5.0)


def test_link_breaking_the_triangle_inequality_is_refused_by_name(tmp_path):
    path = _write(tmp_path, _arm(l2_inertia=(0.001, 0.0, 0.0, 0.002, 0.0, 0.01)))
    with pytest.raises(
        rid.ModelError, match=r"fix the <inertial> of link 'link2' in .*arm\.urdf.*0\.01 > 0\.001 \+ 0\.002"
    ):
        rid.load_robot(path)


def test_inconsistent_fixed_part_merged_into_a_consistent_body_is_accepted(tmp_path, caplog):
    """A small part with an impossible inertia on a fixed joint: the merged body is what is simulated."""
    camera = _link("camera", 0.05, "0 0 0", (0.0, 0.0, 0.0, 0.0, 0.0, 1e-5))
    text = _arm(tool=False, extra=camera + _joint("cam_joint", "link3", "camera", "fixed", limit=None))
    robot = rid.load_robot(_write(tmp_path, text))
    assert "link 'camera'" in caplog.text
    with PyBulletSimulator(robot):
        pass


def test_missing_mesh_files_do_not_matter(tmp_path):
    meshes = (
        '<visual><geometry><mesh filename="package://nowhere/meshes/link.dae"/></geometry></visual>'
        '<collision><geometry><mesh filename="meshes/missing.stl" scale="0.001 0.001 0.001"/></geometry></collision>'
    )
    text = (
        _arm()
        .replace('<link name="link2">', f'<link name="link2">{meshes}')
        .replace('<link name="tool0">', f'<link name="tool0">{meshes}')
    )
    robot = rid.load_robot(_write(tmp_path, text))
    ds = rid.simulate(robot, "default", duration=0.5)
    assert np.all(np.isfinite(ds.tau))


def test_existing_visual_meshes_are_kept_for_rendering_with_absolute_paths(tmp_path):
    (tmp_path / "meshes").mkdir()
    (tmp_path / "meshes" / "l2.obj").write_text("v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nf 1 2 3\n")
    visual = '<visual><geometry><mesh filename="meshes/l2.obj"/></geometry></visual>'
    path = _write(tmp_path, _arm().replace('<link name="link2">', f'<link name="link2">{visual}'))
    text = pybullet_urdf(path)
    assert str((tmp_path / "meshes" / "l2.obj").resolve()) in text
    assert "<collision" not in text


# ---------------------------------------------------------------------------- malformed URDFs
def _swap(old: str, new: str):
    return lambda text: text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            _swap(
                "</robot>",
                '<joint name="j9" type="fixed"><parent link="base_link"/><child link="link2"/></joint></robot>',
            ),
            r"link 'link2' is the child of two joints, 'j2' and 'j9'",
        ),
        (_swap('<parent link="link1"/>', ""), r"joint 'j2' in .* has no <parent link"),
        (_swap('<child link="link3"/>', ""), r"joint 'j3' in .* has no <child link"),
        (_swap('<mass value="1.5"/>', '<mass value="-1.5"/>'), r"link 'link2' in .* has a negative mass \(-1.5 kg\)"),
        (
            _swap('<mass value="1.5"/>', '<mass value="heavy"/>'),
            r"cannot read numbers in the <mass value> of link 'link2'",
        ),
        (_swap('<axis xyz="0 1 0"/>', '<axis xyz="0 one 0"/>'), r"cannot read numbers in joint 'j2' axis"),
        (_swap('lower="-0.1"', 'lower="low"'), r"the <limit> of joint 'j3' \(lower\)"),
        (_swap('ixx="0.02"', 'ixx="nan"'), r"<inertia ixx> of link 'link2' must be finite"),
        (
            _swap(
                "</robot>",
                '<link name="a"/><link name="b"/>' + _joint("ja", "a", "b") + _joint("jb", "b", "a") + "</robot>",
            ),
            r"links \['a', 'b'\] are not connected to the root link 'base_link'",
        ),
        (
            _swap("</robot>", _joint("back", "tool0", "base_link", "fixed", limit=None) + "</robot>"),
            r"no root link: its joints form a cycle",
        ),
        (_swap("</robot>", '<link name="link2"/></robot>'), r"link name 'link2' is used twice"),
    ],
)
def test_malformed_urdfs_are_refused_naming_the_link_or_joint(tmp_path, edit, match):
    text = edit(_arm())
    assert text != _arm()
    with pytest.raises(rid.ModelError, match=match):
        rid.load_robot(_write(tmp_path, text))


def test_a_long_chain_loads_without_recursion_limits(tmp_path):
    parts = [_link("l0")]
    for i in range(1, 1200):
        parts += [_link(f"l{i}"), _joint(f"f{i}", f"l{i - 1}", f"l{i}", "fixed", limit=None)]
    parts += [_link("tip", 1.0), _joint("j", "l1199", "tip")]
    robot = rid.load_robot(_write(tmp_path, f'<robot name="long">{"".join(parts)}</robot>'))
    assert robot.joint_names == ["j"]


# ---------------------------------------------------------------------------- limits
@pytest.mark.parametrize(
    "limit",
    ['lower="1" upper="-1"', 'lower="0" upper="0"', "", None],
    ids=["lower-above-upper", "both-zero", "limit-without-lower-upper", "no-limit-element"],
)
def test_prismatic_no_limit_convention_is_unlimited(tmp_path, limit):
    old = '<limit lower="-0.1" upper="0.15" effort="50" velocity="2"/>'
    text = _arm().replace(old, "" if limit is None else f'<limit {limit} effort="50" velocity="2"/>')
    assert text != _arm()
    robot = rid.load_robot(_write(tmp_path, text))
    lower, upper = robot.position_limits
    assert lower[2] == -np.inf and upper[2] == np.inf
    assert lower[0] == -2.0 and upper[0] == 2.0


def test_revolute_with_lower_above_upper_is_refused_with_the_continuous_hint(tmp_path):
    text = _arm().replace('lower="-2" upper="2"', 'lower="2" upper="-2"', 1)
    with pytest.raises(rid.ModelError, match=r"joint 'j1' has limits lower=2.0 >= upper=-2.0; use type='continuous'"):
        rid.load_robot(_write(tmp_path, text))


def test_bullet_does_not_hold_a_joint_at_its_limit(robots):
    """A joint pushed past its limit goes past it (no hidden constraint force) and is reported."""
    robot = robots["planar3r"]
    t = np.arange(400) * 1e-3
    q = np.zeros((400, 3))
    q[:, 0] = robot.position_limits[1][0] - 0.05 + 0.5 * t**2
    qd, qdd = np.zeros_like(q), np.zeros_like(q)
    qd[:, 0], qdd[:, 0] = t, 1.0
    with PyBulletSimulator(robot) as sim:
        with pytest.raises(rid.DataError, match="joint 'joint1' left its limits"):
            sim.track(q, qd, qdd)


# ---------------------------------------------------------------------------- default excitation
def test_sidecarless_urdf_simulates_with_the_default_excitation_and_says_which_limits(tmp_path):
    text = (
        _arm()
        .replace('limit lower="-0.1" upper="0.15"', 'limit lower="1" upper="-1"')
        .replace('<joint name="j1" type="revolute">', '<joint name="j1" type="continuous">')
    )
    robot = rid.load_robot(_write(tmp_path, text))
    assert robot.sidecar is None
    ds = rid.simulate(robot, "default", duration=2.0)
    note = ds.metadata["excitation_default"]
    assert note == generic_excitation_note(robot)
    assert note["reason"] == "robot has no sidecar"
    assert note["position_lower"] == pytest.approx([-np.pi, -2.0, -0.2])
    assert note["position_upper"] == pytest.approx([np.pi, 2.0, 0.2])
    assert note["velocity_limit"] == [2.0, 2.0, 2.0] and note["acceleration_limit"] == [5.0, 5.0, 5.0]
    assert "'j1' (rad: ±3.14159)" in note["summary"] and "'j3' (m: ±0.2)" in note["summary"]
    exc = resolve_excitation(robot, "default")
    q, _, _ = exc.evaluate(np.linspace(0, exc.duration, 2001))
    assert np.abs(q[:, 2]).max() <= 0.2 + 1e-9 and np.abs(q[:, 0]).max() <= np.pi + 1e-9


def test_a_scenario_on_a_sidecarless_urdf_runs_with_the_default_excitation(tmp_path):
    """``excitation: default`` in a scenario: the generic excitation, another seed for validation, noted in both."""
    from robotid_sim.sim.dataset import load_dataset

    urdf = _write(tmp_path, _arm())
    scenario = tmp_path / "study.yaml"  # not arm.yaml: that would be the URDF's sidecar
    scenario.write_text(
        f"robot: {urdf}\nexcitation: default\nsimulation: {{duration: 4}}\nvalidation: {{duration: 2}}\n"
        "estimators: [{name: ols}]\n"
    )
    run_dir = rid.run_scenario(scenario, tmp_path / "runs")
    ident = load_dataset(run_dir / "data" / "identification.npz")
    val = load_dataset(run_dir / "data" / "validation.npz")
    robot = rid.load_robot(urdf)
    assert ident.metadata["excitation_default"] == val.metadata["excitation_default"] == generic_excitation_note(robot)
    assert not np.allclose(ident.q[: len(val.q)], val.q)


@pytest.mark.parametrize("name", ["planar3r", "hyper9"])
def test_a_default_excitation_without_a_seed_is_validated_on_another_trajectory(name):
    """planar3r's and hyper9's defaults have no seed to move: the run asked for validation.excitation."""
    from robotid_sim.scenario import prepare_run
    from robotid_sim.scenario.schema import parse_scenario

    plan = prepare_run(parse_scenario({"name": "d", "robot": name, "excitation": "default", "estimators": ["ols"]}))
    t = np.linspace(0.0, 5.0, 501)
    q_ident, q_val = plan.excitation.evaluate(t)[0], plan.validation_excitation.evaluate(t)[0]
    assert np.abs(q_ident - q_val).max() > 0.1
    plan.validation_excitation.check_limits(plan.robot)


def test_an_explicit_excitation_without_a_seed_needs_a_validation_excitation():
    from robotid_sim.scenario import prepare_run
    from robotid_sim.scenario.schema import parse_scenario

    sine = {"type": "sequential_sine", "amplitudes": [0.5, 0.5, 0.5], "frequencies": "auto"}
    scenario = parse_scenario({"name": "s", "robot": "planar3r", "excitation": sine, "estimators": ["ols"]})
    with pytest.raises(rid.ConfigError, match=r"add a 'seed' to the excitation or give validation: \{excitation"):
        prepare_run(scenario)


def test_robots_with_their_own_default_excitation_have_no_note(robots):
    assert generic_excitation_note(robots["planar3r"]) is None


# ---------------------------------------------------------------------------- the parity gate
def test_simulator_simulates_the_robots_own_parameters(tmp_path):
    robot = rid.load_robot(_write(tmp_path, _arm()))
    theta = robot.true_parameters().copy()
    theta[robot.parameter_names.index("M3")] *= 1.5
    theta[robot.parameter_names.index("MX3")] *= 1.5
    heavier = robot.with_parameters(theta)
    ds = rid.simulate(heavier, {"type": "fourier", "harmonics": 3, "base_frequency": 0.5, "seed": 1}, duration=1.0)
    tau = heavier.inverse_dynamics(ds.q, ds.qd, ds.qdd)
    assert np.linalg.norm(ds.tau - tau) < 1e-8 * np.linalg.norm(tau)


def test_parameters_pybullet_would_alter_are_refused(tmp_path):
    robot = rid.load_robot(_write(tmp_path, _arm()))
    theta = robot.true_parameters().copy()
    theta[robot.parameter_names.index("ZZ2")] += 1.0  # ZZ about the COM > XX + YY
    with pytest.raises(rid.ModelError, match=r"link 'link2'.*triangle inequality.*fix the <inertial> of link 'link2'"):
        PyBulletSimulator(robot.with_parameters(theta))


def test_parity_gate_quotes_pybullets_warnings(tmp_path, monkeypatch):
    robot = rid.load_robot(_write(tmp_path, _arm()))
    theta = robot.true_parameters().copy()
    theta[robot.parameter_names.index("ZZ2")] += 1.0
    monkeypatch.setattr(pybullet_sim, "_refuse_inconsistent_bodies", lambda robot: None)
    with pytest.raises(rid.ModelError, match=r"link 'link2'.*PyBullet said: .*Bad inertia tensor properties"):
        PyBulletSimulator(robot.with_parameters(theta))


def test_parity_gate_names_the_joint_where_the_kinematics_differ(tmp_path):
    robot = rid.load_robot(_write(tmp_path, _arm()))
    joints = list(robot.joints)
    joints[1] = dataclasses.replace(joints[1], origin_translation=joints[1].origin_translation + [0.01, 0.0, 0.0])
    with pytest.raises(
        rid.ModelError,
        match=r"PyBullet's mass matrix of robot 'arm3' .* differs from the model's at entry \('j1', 'j1'\)",
    ):
        PyBulletSimulator(dataclasses.replace(robot, joints=joints))


def test_joint_moving_no_mass_is_refused_before_simulating(tmp_path):
    link3 = _link("link3", 0.8, "0.01 -0.02 0.05", (0.004, 0.0002, 0.0, 0.005, 0.0003, 0.002))
    text = _arm(tool=False).replace(link3, _link("link3"))
    assert text != _arm(tool=False)
    robot = rid.load_robot(_write(tmp_path, text))
    assert robot.inertials[2].tolist() == [0.0] * 10
    with pytest.raises(rid.ModelError, match=r"joint 'j3' of robot 'arm3' .* moves \(almost\) no mass or inertia"):
        PyBulletSimulator(robot)


@pytest.mark.parametrize("name", ["planar3r", "hyper9"])
def test_bundled_robots_pass_the_parity_gate(name, robots):
    with PyBulletSimulator(robots[name]) as sim:
        assert sim.robot is robots[name]


# ---------------------------------------------------------------------------- console output
def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)


def test_importing_and_using_the_simulator_prints_nothing():
    out = _run(
        "import robotid_sim as rid\n"
        "import robotid_sim.sim.pybullet_sim as m\n"
        "print('imported', flush=True)\n"
        "sim = m.PyBulletSimulator(rid.load_robot('planar3r'))\n"
        "print('after')\n"
    )
    assert out.stdout == "imported\nafter\n"
    assert "pybullet build time" not in out.stderr and "b3Warning" not in out.stdout + out.stderr


def test_verbose_lets_pybullet_print():
    out = _run(
        "import robotid_sim as rid\n"
        "import robotid_sim.sim.pybullet_sim as m\n"
        "m.set_verbose(True)\n"
        "m.PyBulletSimulator(rid.load_robot('planar3r'))\n"
    )
    assert "pybullet build time" in out.stdout + out.stderr


def test_output_is_captured_and_descriptors_restored(capfd):
    import os

    with pybullet_sim.pybullet_output() as captured:
        os.write(1, b"b3Warning[x.cpp,1]:\nsomething odd\n")
        os.write(2, b"on stderr\n")
    os.write(1, b"visible\n")
    assert captured.messages() == ["something odd", "on stderr"]
    assert capfd.readouterr().out == "visible\n"

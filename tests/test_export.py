"""Identified models out to simulators (issue 28, deliver 4): URDF with its sidecar, MJCF, the CLI ``export``."""

from __future__ import annotations

import dataclasses
import logging
import xml.etree.ElementTree as ET
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from conftest import BUNDLED
from helpers import cli_process

import robotid_sim as rid
from robotid_sim.cli import main
from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.identification import FeatureLibraryModel, StandardParameterModel
from robotid_sim.identification.export import consistent_standard_parameters, export_model
from robotid_sim.identification.features import FeatureLibrary
from robotid_sim.identification.lmi import standard_consistency
from robotid_sim.identification.models import BaseParameterModel
from robotid_sim.robot.model import urdf_friction_tags
from robotid_sim.sim.dataset import Dataset
from robotid_sim.testing import exact_multisine

MODELS = ("ols", "lmi_wls")
#: env step of the tracking test (s)
CONTROL_DT = 0.002


@pytest.fixture(scope="session")
def identified(robots) -> dict[tuple[str, str], object]:
    """An ols (base parameters) and an lmi_wls (standard parameters) model of every bundled robot, from 6 s of
    noise-free data at 50 Hz (robotid_sim.testing's exact multi-sine; the session's robots, so their base
    parameters are reduced once for the whole test session)."""
    out = {}
    for name in BUNDLED:
        robot = robots[name]
        t, q, qd, qdd = exact_multisine(robot, 0, 6.0, 50.0)
        dataset = Dataset(t, q, qd, qdd, robot.inverse_dynamics(q, qd, qdd), joint_names=robot.joint_names)
        for estimator in MODELS:
            out[name, estimator] = rid.identify(dataset, robot, estimator)
    return out


@pytest.fixture(scope="session")
def exported(identified, tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Each model written with ``model.to_urdf``: the URDF path (its sidecar beside it)."""
    folder = tmp_path_factory.mktemp("exported")
    out = {}
    for (name, estimator), model in identified.items():
        path = folder / f"{name}_{estimator}.urdf"
        assert model.to_urdf(path) == [path, path.with_suffix(".yaml")]
        out[name, estimator] = path
    return out


def _states(model, seed: int = 3, n: int = 200):
    return model.structure.random_states(np.random.default_rng(seed), n)


# ------------------------------------------------------------------------------ URDF round trip
@pytest.mark.parametrize("estimator", MODELS)
@pytest.mark.parametrize("name", BUNDLED)
def test_the_exported_urdf_loads_back_with_the_models_torque(identified, exported, name, estimator):
    """Rigid body, friction and rotor inertia (the last two through the sidecar found beside the URDF) to 1e-9
    (measured: at most 5e-12 N·m, on hyper9's ols model)."""
    model = identified[name, estimator]
    back = rid.load_robot(exported[name, estimator])
    q, qd, qdd = _states(model)
    assert np.abs(back.inverse_dynamics(q, qd, qdd) - model.predict_torque(q, qd, qdd)).max() < 1e-9
    assert back.joint_names == model.joint_names and back.parameter_names == model.structure.parameter_names
    assert (back.rotor_inertia is not None) == model.structure.has_rotor_inertia
    theta = back.true_parameters()
    assert standard_consistency(model.structure, theta).consistent
    if estimator == "lmi_wls":  # a standard-parameter model writes its own values
        assert np.allclose(theta, model.values, rtol=1e-12, atol=1e-15)
    else:  # the base model's base values, reproduced by a consistent standard set
        base = model.structure.base_parameters()
        assert np.allclose(base.K @ theta, model.base_values(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["planar3r", "hyper9"])
def test_urdf_dynamics_tags_carry_coulomb_and_viscous_friction(exported, name):
    path = exported[name, "ols"]
    back = rid.load_robot(path)
    fc, fv = urdf_friction_tags(back.friction)
    joints = [j for j in ET.parse(path).getroot().findall("joint")]
    tags = np.array(
        [[float(j.find("dynamics").get("friction")), float(j.find("dynamics").get("damping"))] for j in joints]
    )
    assert np.array_equal(tags, np.stack([fc, fv], axis=1)) and np.all(tags[:, 0] > 0)
    # hyper9's law has an exponent: its fv term is not viscous and stays in the sidecar only
    assert np.all(tags[:, 1] == 0) == (name == "hyper9")


def test_loading_an_exported_urdf_warns_of_nothing(exported, caplog):
    """The tags hold the Coulomb and viscous part of the sidecar's law (scara: with offsets; hyper9: Stribeck with
    an exponent), so the sidecar replacing them is no contradiction to warn about."""
    for name in ("scara", "hyper9"):
        with caplog.at_level(logging.WARNING):
            rid.load_robot(exported[name, "ols"])
    assert caplog.text == ""


def _without_friction(model, urdf: Path):
    """The model with its friction off as the export ``urdf`` splits it: the exported standard set without friction,
    as the model's own kind. (A base value may mix friction with inertia: scara's offset S3 and the weight on its vertical
    prismatic joint are both constant forces, so the base model alone cannot say which part is friction.)"""
    structure = model.structure
    theta = rid.load_robot(urdf).true_parameters()
    theta[structure.parameter_slices()["friction"]] = 0.0
    if isinstance(model, StandardParameterModel):
        return model.with_values(theta)
    base = structure.base_parameters()
    assert np.array_equal(base.independent, model.columns)
    return model.with_values(base.K @ theta)


@pytest.mark.parametrize("estimator", MODELS)
@pytest.mark.parametrize("name", BUNDLED)
def test_pybullet_env_of_the_exported_urdf_tracks_the_identified_env(identified, exported, name, estimator):
    """PyBulletArm-v0 from the exported URDF against IdentifiedArm-v0 of the same model, friction off on both, the
    same actions (critically damped PD, 2 rad/s, towards the reach goal on the model) for 200 steps: within 1e-6 rad.

    Steps of 2 ms (two physics substeps; measured: at most 1.2e-11 rad, hyper9's ols model): the truth gets the
    identified env's actions without feedback from its own state, and hyper9's nine links swinging freely amplify a
    rounding difference tenfold every 0.2 s (at the default 10 ms steps, 2 s: 2e-3 rad for its ols model, 3e-7 for
    its lmi_wls model, below 4e-12 on the other robots), which would test the arm's chaos, not the export."""
    model = _without_friction(identified[name, estimator], exported[name, estimator])
    env = gymnasium.make("robotid_sim/IdentifiedArm-v0", model=model, control_dt=CONTROL_DT)
    limit = env.unwrapped.arm.torque_limit
    truth = gymnasium.make(
        "robotid_sim/PyBulletArm-v0",
        robot=str(exported[name, estimator]),
        sidecar=str(exported[name, estimator].with_suffix(".yaml")),
        friction=False,
        torque_limit=limit.tolist(),
        control_dt=CONTROL_DT,
    )
    obs, _ = env.reset(seed=0)
    assert np.array_equal(obs, truth.reset(seed=0)[0])
    n, worst = model.n_dof, 0.0
    for _ in range(200):
        q, qd, target = (obs[None, k * n : (k + 1) * n].astype(float) for k in range(3))
        tau = model.bias_torque(q, qd)[0] + model.mass_matrix(q)[0] @ (4.0 * (target - q) - 4.0 * qd)[0]
        action = np.clip(tau / limit, -1, 1).astype(np.float32)
        obs, _, terminated, _, _ = env.step(action)
        assert not truth.step(action)[2] and not terminated
        worst = max(worst, float(np.abs(env.unwrapped.q - truth.unwrapped.q).max()))
    assert worst < 1e-6


# ------------------------------------------------------------------------------ refusals
def _impossible_ols(model) -> BaseParameterModel:
    """The ols model with the last link's inertia about its joint axis negative: no rigid body has it."""
    values = np.array(model.values)
    k = model.parameter_names.index(f"ZZ{model.n_dof}")
    values[k] = -abs(values[k]) - 1.0
    return model.with_values(values)


def test_a_base_model_without_a_consistent_standard_set_is_refused_naming_the_link(identified, tmp_path):
    model = _impossible_ols(identified["planar3r", "ols"])
    with pytest.raises(ModelError, match=r"link 3 \('link3'|link 3 \("):
        model.to_urdf(tmp_path / "out.urdf")
    assert list(tmp_path.iterdir()) == []


def test_an_inconsistent_standard_model_is_refused_naming_the_link(identified, tmp_path):
    model = identified["planar3r", "lmi_wls"]
    values = np.array(model.values)
    values[model.parameter_names.index("M2")] = -1.0
    with pytest.raises(ModelError, match=r"link 2 pseudo-inertia eigenvalue .* \(link\(s\) 'link2'\)"):
        model.with_values(values).to_mjcf(tmp_path / "out.xml")
    assert list(tmp_path.iterdir()) == []


def test_a_negative_friction_coefficient_is_named(identified, tmp_path):
    model = identified["planar3r", "ols"]
    values = np.array(model.values)
    values[model.parameter_names.index("fc2")] = -0.5
    with pytest.raises(ModelError, match="fc2 = -0.5 must be >= 0"):
        model.with_values(values).to_urdf(tmp_path / "out.urdf")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_an_impossible_model_in_one_line_with_exit_2(identified, tmp_path):
    """In a process forked from the test's (helpers.cli_process): a new interpreter would spend ~10 s importing
    cvxpy on the 2-core CI machine."""
    saved = _impossible_ols(identified["planar3r", "ols"]).save(tmp_path / "m.json")
    before = sorted(tmp_path.iterdir())
    out = [str(tmp_path / "out.urdf"), "--mjcf", str(tmp_path / "out.xml")]
    result = cli_process(["export", str(saved), "--urdf", *out], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "link 3" in lines[0], lines
    assert sorted(tmp_path.iterdir()) == before


def test_models_without_rigid_body_parameters_are_refused(tmp_path):
    library = FeatureLibrary.parse(["qdd1", "qd1"], 1)
    model = FeatureLibraryModel(library, np.array([[0.5, 0.1]]))
    with pytest.raises(ModelError, match="'feature_library' model has no rigid-body parameters"):
        export_model(model, urdf=tmp_path / "out.urdf")
    saved = model.save(tmp_path / "sindy.json")
    before = sorted(tmp_path.iterdir())
    results = [
        cli_process(["export", str(model_file), "--urdf", str(tmp_path / "out.urdf")], tmp_path)
        for model_file in (saved, tmp_path / "missing.json")
    ]
    assert [result.returncode for result in results] == [2, 2]
    err = [line for result in results for line in result.stderr.strip().splitlines()]
    assert len(err) == 2 and "no rigid-body parameters" in err[0] and "model file not found" in err[1]
    assert sorted(tmp_path.iterdir()) == before


def test_existing_files_are_kept_unless_overwrite_is_asked_and_bad_targets_are_named(identified, tmp_path):
    model = identified["planar3r", "lmi_wls"]
    (tmp_path / "out.yaml").write_text("mine\n")
    for target, message in [
        ({"urdf": tmp_path / "out.urdf"}, "out.yaml' already exists"),
        ({"urdf": tmp_path / "out.txt"}, "must end in '.urdf'"),
        ({"mjcf": tmp_path / "out.urdf"}, "must end in '.xml'"),
        ({"urdf": tmp_path / "no" / "out.urdf"}, "does not exist"),
        ({}, "nothing to export"),
    ]:
        with pytest.raises(ConfigError, match=message):
            export_model(model, **target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml"]
    assert (tmp_path / "out.yaml").read_text() == "mine\n"
    export_model(model, urdf=tmp_path / "out.urdf", overwrite=True)
    assert rid.load_robot(tmp_path / "out.urdf").rotor_inertia is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.urdf", "out.yaml"]  # no temporary file left


def test_names_from_the_model_file_never_become_paths(identified, tmp_path):
    """A model whose robot, joints and links are named like paths and markup writes exactly the files given."""
    model = identified["planar3r", "lmi_wls"]
    structure = model.structure
    joints = tuple(
        dataclasses.replace(j, name=f"../../j{k}<&\"'>", link_name=f"/tmp/evil{k}/../x")
        for k, j in enumerate(structure.joints)
    )
    odd = StandardParameterModel(
        dataclasses.replace(structure, name="../../robot", joints=joints, _cache={}), model.values
    )
    folder = tmp_path / "out"
    folder.mkdir()
    odd.to_urdf(folder / "arm.urdf")
    odd.to_mjcf(folder / "arm.xml")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["arm.urdf", "arm.xml", "arm.yaml", "out"]
    back = rid.load_robot(folder / "arm.urdf")
    assert back.joint_names == [j.name for j in joints] and back.name == "../../robot"


def test_the_cad_robot_of_a_base_model_must_match_its_kinematics(identified):
    model = identified["planar3r", "ols"]
    with pytest.raises(ModelError, match="differs from the one"):
        consistent_standard_parameters(model, robot="three_axis")
    assert np.allclose(  # the closest set to the CAD values of noise-free data is the truth itself
        consistent_standard_parameters(model), rid.load_robot("planar3r").true_parameters(), atol=1e-6
    )


def test_cli_export_writes_urdf_sidecar_and_mjcf(identified, tmp_path, capsys):
    saved = identified["scara", "lmi_wls"].save(tmp_path / "m.json")
    out = tmp_path / "scara"
    assert main(["export", str(saved), "--urdf", f"{out}.urdf", "--mjcf", f"{out}.xml"]) == 0
    printed = capsys.readouterr().out
    assert all(f"wrote {out}{suffix}" in printed for suffix in (".urdf", ".yaml", ".xml"))
    assert "offset are left out" in printed  # what MJCF cannot carry is said
    assert main(["export", str(saved), "--urdf", f"{out}.urdf"]) == 2
    assert main(["export", str(saved), "--urdf", f"{out}.urdf", "--overwrite"]) == 0


# ------------------------------------------------------------------------------ MJCF
@pytest.mark.parametrize("name", BUNDLED)
def test_mujoco_inverse_dynamics_of_the_mjcf_is_the_models_rigid_body_rotor_and_viscous_torque(
    identified, exported, tmp_path, name
):
    """mj_inverse of the exported model (friction loss off) against the model's rigid body + rotor inertia + viscous
    friction on random states, to 1e-6 (prrrp: prismatic joints; hyper9: rotor inertia and a friction exponent)."""
    mujoco = pytest.importorskip("mujoco")
    model = identified[name, "ols"]
    path = model.to_mjcf(tmp_path / "arm.xml")
    mj = mujoco.MjModel.from_xml_path(str(path))
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS
    data = mujoco.MjData(mj)
    robot = rid.load_robot(exported[name, "ols"])  # the same standard set, without solving the program again
    _, fv = urdf_friction_tags(robot.friction)
    q, qd, qdd = _states(model, seed=5, n=50)
    expected = robot.rigid_body_torque(q, qd, qdd) + fv * qd
    if robot.rotor_inertia is not None:
        expected += robot.rotor_inertia * qdd
    for k in range(len(q)):
        data.qpos[:], data.qvel[:], data.qacc[:] = q[k], qd[k], qdd[k]
        mujoco.mj_inverse(mj, data)
        assert np.abs(data.qfrc_inverse - expected[k]).max() < 1e-6, (k, data.qfrc_inverse, expected[k])


def test_pybullet_env_takes_a_sidecar_only_with_a_robot_given_by_name_or_path(robots):
    with pytest.raises(ConfigError, match="sidecar= applies to a robot given by name or URDF path"):
        gymnasium.make("robotid_sim/PyBulletArm-v0", robot=robots["planar3r"], sidecar="robot.yaml")

"""A robot's structure answers the parameter-layout and regressor queries without a Robot, and
``Robot.from_structure`` puts parameter values back into one."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.dynamics.regressor import reference_regressor
from robotid_sim.errors import ModelError
from robotid_sim.robot.structure import RobotStructure

ROBOT_PACKAGE = Path(rid.__file__).parent / "robot"


def test_the_structure_module_does_not_import_the_robot_module():
    """robot.model imports robot.structure (Robot.structure()); the reverse import would be a cycle."""
    tree = ast.parse((ROBOT_PACKAGE / "structure.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and (m == "robotid_sim.robot" or m.startswith("robotid_sim.robot."))}


@pytest.mark.parametrize("name", ["planar3r", "hyper9", "three_axis", "prrrp"])
def test_a_structure_has_the_layout_regressor_and_random_states_of_its_robot(robots, name):
    robot = robots[name]
    structure = RobotStructure.from_dict(robot.structure().to_dict())  # no Robot behind it
    assert structure.parameter_names == robot.parameter_names and structure.n_parameters == robot.n_parameters
    for group, idx in robot.parameter_slices().items():
        assert np.array_equal(structure.parameter_slices()[group], idx)
    states = robot.random_states(np.random.default_rng(3), 20)
    assert all(map(np.array_equal, structure.random_states(np.random.default_rng(3), 20), states))
    assert np.array_equal(structure.regressor(*states), robot.regressor(*states))
    assert np.array_equal(reference_regressor(structure, *states), reference_regressor(robot, *states))


@pytest.mark.parametrize("name", ["planar3r", "hyper9", "three_axis", "prrrp"])
def test_a_robot_from_its_structure_and_true_parameters_has_its_dynamics(robots, name):
    robot = robots[name]
    copy = rid.Robot.from_structure(robot.structure(), robot.true_parameters())
    q, qd, qdd = robot.random_states(np.random.default_rng(4), 20)
    assert copy.name == robot.name and copy.parameter_names == robot.parameter_names
    assert np.array_equal(copy.true_parameters(), robot.true_parameters())
    assert np.array_equal(copy.inverse_dynamics(q, qd, qdd), robot.inverse_dynamics(q, qd, qdd))


def test_a_robot_from_a_structure_refuses_a_parameter_vector_of_another_length(robots):
    structure = robots["planar3r"].structure()
    with pytest.raises(ModelError, match=f"theta must have {structure.n_parameters} values"):
        rid.Robot.from_structure(structure, np.zeros(structure.n_parameters + 1))

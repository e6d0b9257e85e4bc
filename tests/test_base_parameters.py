"""Base parameters (issue 2, SPEC §4)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from conftest import BUNDLED

ALL = BUNDLED + ["arm6"]


@pytest.mark.parametrize("name", ALL)
def test_base_parameter_count_does_not_depend_on_the_random_samples(name, robots):
    robot = robots[name]
    a = robot.base_parameters(n_samples=150, seed=1)
    b = robot.base_parameters(n_samples=300, seed=2)
    assert a.count == b.count
    assert list(a.independent) == list(b.independent)
    assert np.allclose(a.K, b.K, atol=1e-8)


@pytest.mark.parametrize("name", ALL)
def test_base_regressor_has_full_column_rank(name, robots, rng):
    robot = robots[name]
    base = robot.base_parameters()
    W = base.regressor(*robot.random_states(rng, 400)).reshape(-1, base.count)
    assert np.linalg.matrix_rank(W) == base.count


@pytest.mark.parametrize("name", ALL)
def test_base_regressor_times_true_base_values_equals_full_torque(name, robots, rng):
    robot = robots[name]
    base = robot.base_parameters()
    q, qd, qdd = robot.random_states(rng, 500)
    tau = robot.inverse_dynamics(q, qd, qdd)
    tau_base = base.regressor(q, qd, qdd) @ base.true_values()
    assert np.linalg.norm(tau_base - tau) / np.linalg.norm(tau) < 1e-10


def test_hyper9_has_91_base_parameters_as_seed_001(robots):
    # seed 001 §2.2: 126 standard parameters (14 per joint), 91 base parameters, with the friction of Eq. 5
    robot = robots["hyper9"]
    eq5 = robot.structure().with_friction_law({"model": "nonlinear", "alpha": 1.0})
    assert eq5.n_parameters == 126
    assert eq5.base_parameters().count == 91
    # the simulated arm's law adds the Stribeck level fs of each joint (nonlinear_stribeck)
    assert robot.n_parameters == 135 and robot.base_parameters().count == 100


def test_planar3r_expressions_read_like_seed_003_table_3(robots):
    base = robots["planar3r"].base_parameters()
    expr = dict(zip(base.names, base.expressions, strict=True))
    ZZ1, M2, M3 = sympy.symbols("ZZ1 M2 M3")
    # ZZ1 regroups the masses of links 2 and 3 at l1 = 0.36 m: l1² = 0.1296
    assert set(expr["ZZ1"].free_symbols) == {ZZ1, M2, M3}
    assert float(expr["ZZ1"].coeff(M2)) == pytest.approx(0.1296, rel=1e-9)
    assert float(expr["ZZ1"].coeff(M3)) == pytest.approx(0.1296, rel=1e-9)
    assert dict((n, e) for n, e, _ in base.table())["ZZ1"] == "0.1296*M2 + 0.1296*M3 + ZZ1"
    # planar arm: ZZ, MX, MY per link regrouped (9) + fc, fv, S per joint (9)
    assert base.count == 18


def test_prrrp_base_set_groups_the_masses_like_seed_004_table_3(robots):
    robot = robots["prrrp"]
    base = robot.base_parameters()
    values = dict(zip(base.names, base.true_values(), strict=True))
    # joint 5 (prismatic, vertical) sees m5 alone: lambda8* = m5
    assert values["M5"] == pytest.approx(0.5114, rel=1e-9)
    # joint 1 sees the total mass: lambda1* + lambda8* = 4.8084 kg
    assert values["M1"] + values["M5"] == pytest.approx(4.8084, rel=1e-9)


def test_expression_coefficients_reproduce_K(robots):
    base = robots["scara"].base_parameters()
    theta = robots["scara"].true_parameters()
    subs = dict(zip(sympy.symbols(base.standard_names), theta, strict=True))
    values = [float(e.subs(subs)) for e in base.expressions]
    assert np.allclose(values, base.true_values(), rtol=1e-5, atol=1e-9)

"""Friction models (issue 2, SPEC §4): torque laws, linear columns, bad configs."""

from __future__ import annotations

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.dynamics.friction import (
    CoulombViscous,
    NonlinearExponent,
    NonlinearStribeck,
    Stribeck,
    friction_from_dict,
    linear_fields,
)

QD = np.array([[-0.5, 0.0, 0.2], [1.2, -0.05, 0.0]])


def test_coulomb_viscous_offset_law():
    f = CoulombViscous(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.1, 0.2]), np.array([0.1, 0.0, -0.1]))
    expected = np.sign(QD) * [1.0, 2.0, 3.0] + QD * [0.5, 0.1, 0.2] + [0.1, 0.0, -0.1]
    assert np.allclose(f.torque(QD), expected)
    assert np.allclose(np.einsum("nik,ik->ni", f.columns(QD), f.values()), expected)


def test_nonlinear_exponent_law_of_seed_001_eq_5():
    alpha = np.array([0.6, 1.0, 1.4])
    f = NonlinearExponent(np.ones(3), np.full(3, 2.0), np.full(3, 0.3), alpha)
    expected = np.sign(QD) + 2.0 * np.abs(QD) ** alpha * np.sign(QD) + 0.3
    assert np.allclose(f.torque(QD), expected)
    assert np.allclose(np.einsum("nik,ik->ni", f.columns(QD), f.values()), expected)


def test_stribeck_law_of_seed_000_eq_34():
    fc, fs, vs, fv = np.full(3, 0.6), np.full(3, 0.9), np.full(3, 0.1), np.full(3, 0.5)
    f = Stribeck(fc, fs, fv, vs)
    expected = (fc + (fs - fc) * np.exp(-((QD / vs) ** 2))) * np.sign(QD) + fv * QD
    assert np.allclose(f.torque(QD), expected)
    # breakaway: just above zero velocity the friction is the static level fs, far above it fc + fv qd
    assert f.torque(np.full((1, 3), 1e-6))[0] == pytest.approx(fs, rel=1e-6)
    assert f.torque(np.full((1, 3), 2.0))[0] == pytest.approx(fc + 2.0 * fv, rel=1e-9)


def test_eq_5_with_a_stribeck_regime():
    """hyper9's truth: Eq. 5 far from rest, the dry friction rising to fs towards rest."""
    fc, fs, fv, offset = np.full(3, 0.6), np.full(3, 0.9), np.full(3, 2.0), np.full(3, 0.1)
    alpha, vs = np.array([0.6, 1.0, 1.4]), np.full(3, 0.01)
    f = NonlinearStribeck(fc, fs, fv, offset, alpha, vs)
    eq5 = NonlinearExponent(fc, fv, offset, alpha)
    expected = (fc + (fs - fc) * np.exp(-((QD / vs) ** 2))) * np.sign(QD) + fv * np.abs(QD) ** alpha * np.sign(QD)
    assert np.allclose(f.torque(QD), expected + offset)
    assert np.allclose(np.einsum("nik,ik->ni", f.columns(QD), f.values()), f.torque(QD))
    fast = np.full((1, 3), 0.2)
    assert np.allclose(f.torque(fast), eq5.torque(fast), rtol=1e-12)  # exp(-400) = 0
    assert f.torque(np.full((1, 3), 1e-9))[0] == pytest.approx(fs + offset, rel=1e-4)  # + fv·(1e-9)^α
    assert f.parameter_names(0) == ["fc1", "fs1", "fv1", "S1"]
    assert linear_fields("nonlinear_stribeck") == ("fc", "fs", "fv", "offset")
    again = friction_from_dict(f.to_dict(), 3)
    assert np.array_equal(again.values(), f.values()) and np.array_equal(again.vs, vs)
    with pytest.raises(rid.ConfigError, match="'vs'"):
        friction_from_dict({**f.to_dict(), "vs": [0.01, 0.0, 0.01]}, 3)


def test_sign_smoothing_is_used_by_both_torque_and_columns():
    f = friction_from_dict({"model": "coulomb_viscous", "fc": 1.0, "fv": 0.0, "offset": 0.0, "sign_smoothing": 0.01}, 3)
    assert np.allclose(f.torque(QD), np.tanh(QD / 0.01))
    assert np.allclose(f.columns(QD)[..., 0], np.tanh(QD / 0.01))


def test_with_values_keeps_the_nonlinear_parameters():
    f = NonlinearExponent(np.ones(3), np.ones(3), np.zeros(3), np.array([0.7, 0.8, 0.9]))
    g = f.with_values(np.full((3, 3), 2.0))
    assert np.allclose(g.values(), 2.0) and np.allclose(g.alpha, [0.7, 0.8, 0.9])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"model": "dahl"}, "friction.model must be one of"),
        ({"model": "stribeck", "fc": 1, "fs": 1, "fv": 1}, r"missing field\(s\) \['vs'\]"),
        ({"model": "nonlinear", "fc": 1, "fv": 1, "alpha": [0.5, -1, 1]}, "'alpha' must be > 0"),
        ({"model": "coulomb_viscous", "fc": [1, 2], "fv": 1}, "'fc' must have 3 values"),
    ],
)
def test_bad_friction_config_names_the_problem(spec, message):
    with pytest.raises(rid.ConfigError, match=message):
        friction_from_dict(spec, 3)

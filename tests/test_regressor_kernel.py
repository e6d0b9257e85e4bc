"""The compiled regressor (numba kernels behind ``Robot.regressor``) against the batched numpy
reference (:func:`robotid_sim.dynamics.regressor.reference_regressor`).

Every bundled robot, the in-test arm6 and a skew 4-joint arm written here (skew revolute and
prismatic axes, rotated joint origins, URDF friction), at N = 1 (serial kernel) and N = 10,000
(threaded kernel), for the full, the base and an arbitrary column set.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BUNDLED

import robotid_sim as rid
from robotid_sim.dynamics import crba
from robotid_sim.dynamics.regressor import reference_regressor

ALL = BUNDLED + ["arm6", "skew4"]
BIG = 10_000  # above crba.PARALLEL_MIN_SAMPLES: the threaded kernel, several blocks and a partial one
TOL = 1e-12


@pytest.fixture(autouse=True)
def _threaded_from_parallel_min_samples(monkeypatch):
    """BIG batches run on the threaded kernels whatever the size of numba's pool (one thread in each of
    pytest-xdist's workers, where :func:`crba.threaded` takes the serial ones)."""
    monkeypatch.setattr(crba, "threaded", lambda N: N >= crba.PARALLEL_MIN_SAMPLES)


_JOINT = (
    '<joint name="j{i}" type="{kind}"><parent link="{parent}"/><child link="l{i}"/>'
    '<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>'
    '<limit lower="{lo}" upper="{hi}" effort="50" velocity="3"/><dynamics damping="{fv}" friction="{fc}"/></joint>'
)
_LINK = (
    '<link name="l{i}"><inertial><origin xyz="{com}" rpy="0.2 -0.3 0.4"/><mass value="{m}"/>'
    '<inertia ixx="0.02" ixy="0.001" ixz="-0.002" iyy="0.03" iyz="0.0015" izz="0.025"/></inertial></link>'
)
_SKEW4 = [
    # kind, origin xyz, origin rpy, axis (not unit: the URDF reader normalises), COM, mass
    ("revolute", "0.01 0.02 0.2", "0.3 -0.2 0.1", "0.3 -0.4 0.87", "0.02 0.01 0.1", 3.0),
    ("prismatic", "0.1 -0.05 0.15", "-0.7 0.4 1.1", "0.5 0.5 -0.7", "0.05 -0.02 0.03", 2.0),
    ("revolute", "0.25 0.03 -0.04", "1.3 0.2 -0.6", "-0.2 0.9 0.3", "0.12 0.01 -0.02", 1.5),
    ("prismatic", "0.05 0.12 0.02", "0.1 0.9 -0.3", "0.6 -0.1 0.2", "-0.01 0.03 0.06", 0.7),
]


def _skew4_urdf() -> str:
    parts = ['<link name="base"/>']
    for i, (kind, xyz, rpy, axis, com, m) in enumerate(_SKEW4, start=1):
        lo, hi = (-0.2, 0.3) if kind == "prismatic" else (-3.0, 3.0)
        parent = "base" if i == 1 else f"l{i - 1}"
        fv, fc = 0.1 * i, 0.05 * i
        parts.append(
            _JOINT.format(i=i, kind=kind, parent=parent, xyz=xyz, rpy=rpy, axis=axis, lo=lo, hi=hi, fv=fv, fc=fc)
        )
        parts.append(_LINK.format(i=i, com=com, m=m))
    return f'<?xml version="1.0"?>\n<robot name="skew4">{"".join(parts)}</robot>'


@pytest.fixture(scope="module")
def all_robots(robots, tmp_path_factory) -> dict[str, rid.Robot]:
    path = tmp_path_factory.mktemp("skew4") / "skew4.urdf"
    path.write_text(_skew4_urdf())
    skew4 = rid.load_robot(path)
    assert skew4.joint_kinds == ["revolute", "prismatic", "revolute", "prismatic"]
    assert skew4.friction.suffixes  # URDF <dynamics> friction columns
    return {**robots, "skew4": skew4}


def _states(robot, N: int, seed: int = 7):
    return robot.random_states(np.random.default_rng(seed), N)


def _column_sets(robot) -> dict[str, np.ndarray | None]:
    rng = np.random.default_rng(3)
    subset = np.sort(rng.choice(robot.n_parameters, size=robot.n_parameters // 3, replace=False))
    return {"full": None, "base": robot.base_parameters().independent, "subset": subset}


def _assert_matches_reference(Y: np.ndarray, ref: np.ndarray) -> float:
    """Same shape and layout, within TOL of max |ref|, and exactly zero wherever ref is."""
    assert Y.shape == ref.shape
    assert Y.dtype == np.float64 and Y.flags.c_contiguous
    err = float(np.max(np.abs(Y - ref), initial=0.0) / max(np.max(np.abs(ref), initial=0.0), 1e-300))
    assert err < TOL, err
    assert np.all(Y[ref == 0.0] == 0.0)
    return err


@pytest.mark.parametrize("N", [1, BIG])
@pytest.mark.parametrize("name", ALL)
def test_compiled_regressor_matches_the_numpy_reference(all_robots, name, N):
    robot = all_robots[name]
    q, qd, qdd = _states(robot, N)
    for columns in _column_sets(robot).values():
        Y = robot.regressor(q, qd, qdd, columns=columns)
        _assert_matches_reference(Y, reference_regressor(robot, q, qd, qdd, columns=columns))


@pytest.mark.parametrize("N", [1, BIG])
@pytest.mark.parametrize("name", ALL)
def test_regressor_times_theta_is_the_inverse_dynamics(all_robots, name, N):
    robot = all_robots[name]
    q, qd, qdd = _states(robot, N, seed=11)
    tau = robot.inverse_dynamics(q, qd, qdd)
    err = np.max(np.abs(robot.regressor(q, qd, qdd) @ robot.true_parameters() - tau)) / np.max(np.abs(tau))
    assert err < 1e-10, err
    base = robot.base_parameters()
    err = np.max(np.abs(base.regressor(q, qd, qdd) @ base.true_values() - tau)) / np.max(np.abs(tau))
    assert err < 1e-10, err


def test_threaded_and_serial_kernels_agree_exactly(all_robots, monkeypatch):
    robot = all_robots["hyper9"]
    N = 3 * 256 + 37  # several blocks of the threaded driver and a partial last one
    q, qd, qdd = _states(robot, N)
    columns = robot.base_parameters().independent
    monkeypatch.setattr(crba, "threaded", lambda N: True)
    threaded = robot.regressor(q, qd, qdd), robot.regressor(q, qd, qdd, columns=columns)
    monkeypatch.setattr(crba, "threaded", lambda N: False)
    serial = robot.regressor(q, qd, qdd), robot.regressor(q, qd, qdd, columns=columns)
    for a, b in zip(threaded, serial, strict=True):
        assert np.array_equal(a, b)
    # one sample at a time gives the rows of the batch
    assert np.array_equal(robot.regressor(q[5], qd[5], qdd[5])[0], serial[0][5])


def test_without_numba_the_reference_is_used(all_robots, monkeypatch):
    robot = all_robots["scara"]
    q, qd, qdd = _states(robot, 20)
    compiled = robot.regressor(q, qd, qdd)
    monkeypatch.setattr(crba, "_KERNELS", False)  # as without numba
    fallback = robot.regressor(q, qd, qdd)
    assert np.array_equal(fallback, reference_regressor(robot, q, qd, qdd))
    _assert_matches_reference(compiled, fallback)


def test_structure_regressor_and_odd_inputs(all_robots):
    robot = all_robots["hyper9"]
    q, qd, qdd = _states(robot, 30)
    Y = robot.regressor(q, qd, qdd)
    # the structure (a zero-parameter robot) gives the same regressor
    assert np.array_equal(robot.structure().regressor(q, qd, qdd), Y)
    # read-only, Fortran-ordered and list inputs are accepted
    q_ro = np.asfortranarray(q)
    q_ro.flags.writeable = False
    assert np.array_equal(robot.regressor(q_ro, qd.tolist(), qdd), Y)
    # no columns, and no samples
    assert robot.regressor(q, qd, qdd, columns=[]).shape == (30, robot.n_dof, 0)
    assert robot.regressor(q[:0], qd[:0], qdd[:0]).shape == (0, robot.n_dof, robot.n_parameters)


@pytest.mark.parametrize("columns", [[3, 2], [1, 1], [-1, 4], [0, 10_000], [[0, 1]], [0.0, 1.0]])
def test_bad_columns_are_refused(all_robots, columns):
    robot = all_robots["hyper9"]
    q, qd, qdd = _states(robot, 2)
    for _ in range(2):  # the column maps are cached: a refusal is not, the second call refuses too
        with pytest.raises(rid.DataError, match="columns"):
            robot.regressor(q, qd, qdd, columns=columns)


def test_a_cached_column_map_gives_the_regressor_of_its_columns_whatever_their_integer_type(all_robots):
    """The column maps are kept per columns (a filter asks for the base columns at every sample): the same
    columns as int32, int64 or a list, before and after other column sets, give the same columns of the full
    regressor."""
    robot = all_robots["hyper9"]
    q, qd, qdd = _states(robot, 3)
    full = robot.regressor(q, qd, qdd)
    for columns in ([0, 5, 17, 40], np.array([0, 5, 17, 40], dtype=np.int32), np.arange(3), [0, 5, 17, 40]):
        np.testing.assert_array_equal(robot.regressor(q, qd, qdd, columns=columns), full[:, :, np.asarray(columns)])


@pytest.mark.parametrize("N", [1, BIG])
@pytest.mark.parametrize("name", ALL)
def test_compiled_torque_matches_the_numpy_reference(all_robots, name, N):
    """The batched torque (compiled RNEA, no regressor) against the batched-numpy Newton–Euler, and the
    motor torque against the reference regressor times theta."""
    from robotid_sim.dynamics.newton_euler import rnea

    robot = all_robots[name]
    q, qd, qdd = _states(robot, N, seed=5)
    tau = robot.rigid_body_torque(q, qd, qdd)
    ref = rnea(robot.joints, robot.inertials, q.T.copy(), qd.T.copy(), qdd.T.copy(), robot.gravity).T
    assert np.max(np.abs(tau - ref)) / np.max(np.abs(ref)) < TOL
    motor = robot.inverse_dynamics(q, qd, qdd)
    expected = reference_regressor(robot, q, qd, qdd) @ robot.true_parameters()
    assert np.max(np.abs(motor - expected)) / np.max(np.abs(expected)) < TOL

"""Forward sensitivities of the closed loop (issue 30): ∂q/∂β and ∂u/∂β carried along one simulated loop
(:meth:`ClosedLoopSimulation.sensitivities`), and cloe / clie's ``jacobian`` option that uses them."""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim import plugins
from robotid_sim.dynamics import crba
from robotid_sim.errors import ConfigError
from robotid_sim.identification import IdentificationProblem
from robotid_sim.identification.closed_loop_model import ClosedLoopSimulation, ClosedLoopSpec, simulate_closed_loop
from robotid_sim.robot import load_robot
from robotid_sim.sim.closed_loop_data import BIRDY_TX40_PID, PIDLoop
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.simulate import resolve_excitation

#: the agreement of the sensitivities with central differences of relative step 1e-4 (:func:`_column_errors`):
#: with the rigid-body derivatives held over a control step (measured: 1.5e-7 on tx40, 8.5e-6 on planar3r), and
#: evaluated at every physics step (the derivative of the discrete loop: 1e-7 and 3.4e-9)
TOLERANCE = {True: 1e-4, False: 1e-6}


def _loop_dataset(robot, structure, loop, duration, every):
    """Noise-free closed-loop data of ``structure`` with ``robot``'s true parameters: a 5-harmonic Fourier
    reference of one period of ``duration`` s, a sample every ``every`` control steps from the fifth."""
    excitation = {"type": "fourier", "harmonics": 5, "base_frequency": 1.0 / duration, "periods": 1, "seed": 0}
    excitation = resolve_excitation(robot, excitation).describe()
    spec = ClosedLoopSpec(loop, excitation, duration, loop.control_rate_hz / every)
    t = np.arange(5, int(round(duration * loop.control_rate_hz)), every) / loop.control_rate_hz
    sim = simulate_closed_loop(structure, robot.true_parameters(), spec, t)
    closed_loop = {
        "controller": loop.to_dict(),
        "excitation": excitation,
        "duration": duration,
        "sample_rate_hz": loop.control_rate_hz / every,
    }
    return Dataset(
        t, *(sim[key][0] for key in ("q", "qd", "qdd", "u")), joint_names=robot.joint_names,
        metadata={"robot": robot.name, "closed_loop": closed_loop},
    )  # fmt: skip


@pytest.fixture(scope="module")
def tx40_loop():
    """BIRDy's TX40 loop (5 kHz, four physics steps, its tanh(qd / 0.01) Coulomb law) for 0.05 s."""
    robot = load_robot("tx40")
    return robot, robot.structure(), _loop_dataset(robot, robot.structure(), BIRDY_TX40_PID, 0.05, 5)


@pytest.fixture(scope="module")
def planar_loop():
    """planar3r with a smooth Coulomb law under a PID whose integral saturates (anti_windup 2e-4), 1 kHz with
    two physics steps, 0.5 s."""
    robot = load_robot("planar3r")
    structure = robot.structure().with_friction_law({**robot.structure().friction_law, "sign_smoothing": 0.05})
    n = robot.n_dof
    loop = PIDLoop(
        kp=np.full(n, 400.0), kd=np.full(n, 4.0), ki=np.full(n, 200.0), anti_windup=2e-4,
        control_rate_hz=1000.0, physics_substeps=2,
    )  # fmt: skip
    return robot, structure, _loop_dataset(robot, structure, loop, 0.5, 2)


def _central_differences(simulation, beta, relative=1e-4):
    """∂q/∂β, ∂u/∂β (N, n, b) by central differences, in one batched run of 2b copies."""
    h = relative * np.maximum(np.abs(beta), 1e-3 * np.abs(beta).max())
    b = len(beta)
    run = simulation.run(np.vstack([beta + np.diag(h), beta - np.diag(h)]))
    return [np.moveaxis((run[key][:b] - run[key][b:]) / (2 * h[:, None, None]), 0, -1) for key in "qu"]


def _column_errors(a, b, beta):
    """The error of each column (b,) of a against b, both (N, n, b), in the Jacobian's scaled coordinates
    (column c times |β_c|, as cloe's Levenberg–Marquardt sees it), relative to the largest scaled column of b."""
    a, b = a.reshape(-1, a.shape[-1]) * np.abs(beta), b.reshape(-1, b.shape[-1]) * np.abs(beta)
    return np.linalg.norm(a - b, axis=0) / np.linalg.norm(b, axis=0).max()


@pytest.mark.parametrize("case", ["tx40_loop", "planar_loop"])
def test_the_sensitivities_are_the_derivatives_of_the_simulated_loop(case, request):
    """Against central differences, both where the rigid-body derivatives are held over a control step's
    physics steps (the default) and where they are evaluated at each; the nominal signals are run()'s exactly."""
    robot, structure, ds = request.getfixturevalue(case)
    simulation = ClosedLoopSimulation(IdentificationProblem(structure, ds))
    beta = simulation.problem.base.K @ robot.true_parameters() * 1.02
    dq_fd, du_fd = _central_differences(simulation, beta)
    nominal = simulation.run(beta)
    for hold in (True, False):
        before = simulation.evaluations
        result, dq, du = simulation.sensitivities(beta, np.full(len(beta), 1e-6), hold=hold)
        assert simulation.evaluations == before + 1 and result["ok"].tolist() == [True]
        for key in ("q", "qd", "qdd", "u"):
            np.testing.assert_array_equal(result[key], nominal[key])
        assert dq.shape == du.shape == (len(ds.t), robot.n_dof, len(beta))
        assert _column_errors(dq, dq_fd, beta).max() < TOLERANCE[hold]
        assert _column_errors(du, du_fd, beta).max() < TOLERANCE[hold]


def test_without_numba_the_sensitivities_are_the_forward_differences(planar_loop, monkeypatch):
    robot, structure, ds = planar_loop
    ds = ds.slice(stop=50)  # the first 0.1 s: the numpy loop is slow
    simulation = ClosedLoopSimulation(IdentificationProblem(structure, ds))
    beta = simulation.problem.base.K @ robot.true_parameters()
    steps = 1e-6 * np.maximum(np.abs(beta), 1e-3 * np.abs(beta).max())
    _, dq, du = simulation.sensitivities(beta, steps)
    monkeypatch.setattr(crba, "kernels", lambda: None)
    result, dq_fd, du_fd = simulation.sensitivities(beta, steps)
    assert simulation.evaluations == 1 + len(beta) + 1 and result["q"].shape == (1, len(ds.t), robot.n_dof)
    assert _column_errors(dq_fd, dq, beta).max() < 1e-3 and _column_errors(du_fd, du, beta).max() < 1e-3


def test_a_diverging_loop_is_flagged_and_its_sensitivities_are_nan(planar_loop):
    robot, structure, ds = planar_loop
    simulation = ClosedLoopSimulation(IdentificationProblem(structure, ds))
    massless = robot.true_parameters().copy()
    massless[structure.parameter_slices()["inertial"]] = 0.0  # M singular at the first step (no rotor inertia)
    beta = simulation.problem.base.K @ massless
    result, dq, du = simulation.sensitivities(beta, np.full(len(beta), 1e-6))
    assert result["ok"].tolist() == [False] and simulation.run(beta)["ok"].tolist() == [False]
    assert np.all(np.isnan(result["q"])) and np.all(np.isnan(dq)) and np.all(np.isnan(du))


@pytest.mark.parametrize("name", ["cloe", "clie"])
def test_both_jacobians_reach_the_same_estimate(planar_loop, name):
    """Noise-free from a perturbed start: the true parameters. On noisy data the same minimum either way: the
    estimates a thousandth of a standard deviation apart at most (measured: 2e-4), the sensitivities' cost the
    lower (forward differences of step 1e-6 stop a little short: their Jacobian is off by ~1e-3 in the columns
    that move the loop least)."""
    robot, structure, ds = planar_loop
    truth = structure.base_parameters().K @ robot.true_parameters()
    rng = np.random.default_rng(3)
    initial = robot.true_parameters() * (1 + 0.03 * rng.standard_normal(structure.n_parameters))
    estimator = plugins.get_estimator(name)
    model = estimator.from_options(jacobian="sensitivity").fit(IdentificationProblem(structure, ds, initial=initial))
    assert np.linalg.norm(model.base_values() - truth) / np.linalg.norm(truth) < 1e-6
    assert model.diagnostics["converged"] is True
    q, tau = (x + sd * rng.standard_normal(x.shape) for x, sd in ((ds.q, 1e-5), (ds.tau, 0.02)))
    noisy = Dataset(ds.t, q, ds.qd, ds.qdd, tau, joint_names=ds.joint_names, metadata=ds.metadata)
    sensitivity, difference = (
        estimator.from_options(jacobian=jacobian).fit(IdentificationProblem(structure, noisy, initial=initial))
        for jacobian in ("sensitivity", "finite_difference")
    )
    sigma = np.sqrt(np.diag(sensitivity.covariance))
    assert np.linalg.norm(sensitivity.base_values() - truth) > 1e-3 * np.linalg.norm(truth)  # the noise moved it
    assert np.max(np.abs(sensitivity.base_values() - difference.base_values()) / sigma) < 1e-3
    cost, other = sensitivity.diagnostics["cost"], difference.diagnostics["cost"]
    assert cost <= other < cost * (1 + 1e-8)
    assert sensitivity.diagnostics["model_evaluations"] < difference.diagnostics["model_evaluations"] / 5


def test_a_bad_jacobian_is_one_clear_line():
    with pytest.raises(ConfigError, match="jacobian") as info:
        plugins.get_estimator("cloe").from_options(jacobian="central")
    assert "\n" not in str(info.value)

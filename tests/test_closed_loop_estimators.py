"""The closed-loop model simulation and the estimators that re-run it (issue 30): idim_iv, pc_idim_iv, didim,
pc_didim, cloe, clie."""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim import plugins
from robotid_sim.cli import main
from robotid_sim.dynamics import crba
from robotid_sim.errors import ConfigError, DataError, IdentificationError
from robotid_sim.identification import IdentificationProblem, load_model
from robotid_sim.identification.closed_loop_model import ClosedLoopSpec, closed_loop_of, simulate_closed_loop
from robotid_sim.identification.lmi import standard_consistency
from robotid_sim.robot import load_robot
from robotid_sim.sim.closed_loop_data import PIDLoop, birdy_dataset, closed_loop_record
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.simulate import resolve_excitation
from robotid_sim.testing import exact_closed_loop_dataset, exact_datasets, parametrize_with_checks
from tests.helpers import cli_process

NAMES = ("idim_iv", "pc_idim_iv", "didim", "pc_didim", "cloe", "clie")
CLASSES = [plugins.get_estimator(name) for name in NAMES]


def _relative_error(model, structure, theta) -> float:
    truth = structure.base_parameters().K @ theta
    return float(np.linalg.norm(model.base_values() - truth) / np.linalg.norm(truth))


@pytest.fixture(scope="module")
def smooth_loop():
    """Noise-free closed-loop data of planar3r with a smooth Coulomb law (sign_smoothing 0.05), from the model
    simulation (which equals PyBullet's loop: test below), 1 s: (structure, θ, dataset).

    A perturbed start is tried on this one: with the bundled law's sign(qd) the simulated loop chatters at every
    velocity reversal, where CLIE's torque error stops being smooth in β, and DIDIM's Jacobian approximation
    (W_s for ∂u_s/∂β) holds only for a stiff loop: with kp = 1000 it creeps (4–7 % after 30 iterations from
    1 %), with kp = 3000 it converges in about 20."""
    robot = load_robot("planar3r")
    structure = robot.structure().with_friction_law({**robot.structure().friction_law, "sign_smoothing": 0.05})
    excitation = {"type": "fourier", "harmonics": 5, "base_frequency": 1.0, "periods": 1, "seed": 0}
    excitation = resolve_excitation(robot, excitation).describe()
    loop = PIDLoop(kp=np.full(3, 3000.0), kd=np.full(3, 30.0), ki=np.full(3, 5.0))
    spec = ClosedLoopSpec(loop, excitation, 1.0, 1000.0)
    t = np.arange(5, 995) / 1000.0
    theta = robot.true_parameters()
    sim = simulate_closed_loop(structure, theta, spec, t)
    closed_loop = {"controller": loop.to_dict(), "excitation": excitation, "duration": 1.0, "sample_rate_hz": 1000.0}
    ds = Dataset(
        t, *(sim[key][0] for key in ("q", "qd", "qdd", "u")), joint_names=robot.joint_names,
        metadata={"robot": "planar3r", "closed_loop": closed_loop},
    )  # fmt: skip
    return structure, theta, ds


# ------------------------------------------------------------------------------------------ the simulation
@pytest.mark.parametrize("robot_name", ["planar3r", "tx40"])
def test_the_model_simulation_with_the_true_parameters_is_the_pybullet_record(robot_name):
    """planar3r: the contract's data (one physics step per control step, 1 s); tx40: BIRDy's loop (four physics
    steps per control step) for 0.1 s."""
    if robot_name == "tx40":
        robot = load_robot("tx40")
        ds = birdy_dataset(closed_loop_record(robot, duration=0.1), derivatives="exact", trim=5, decimation=1)
    else:
        robot, ds = exact_closed_loop_dataset(robot_name)
    sim = simulate_closed_loop(robot.structure(), robot.true_parameters(), closed_loop_of(ds), ds.t)
    assert sim["ok"].tolist() == [True]
    assert np.abs(sim["q"][0] - ds.q).max() < 1e-9
    for key, measured in (("qd", ds.qd), ("qdd", ds.qdd), ("u", ds.tau)):
        assert np.abs(sim[key][0] - measured).max() < 1e-9 * np.abs(measured).max(), key


def test_copies_run_their_own_parameters_and_a_diverging_one_is_flagged_not_raised(smooth_loop, monkeypatch):
    structure, theta, ds = smooth_loop
    spec, t = closed_loop_of(ds), ds.t[:10]
    broken = theta.copy()
    broken[structure.parameter_slices()["inertial"]] = 0.0  # a massless arm: M singular at the first step
    heavier = theta * 1.1
    sim = simulate_closed_loop(structure, np.stack([theta, broken, heavier]), spec, t)
    assert sim["ok"].tolist() == [True, False, True]
    assert np.all(np.isnan(sim["q"][1])) and np.all(np.isfinite(sim["q"][[0, 2]]))
    alone = simulate_closed_loop(structure, heavier, spec, t)
    assert np.array_equal(alone["q"][0], sim["q"][2])
    assert np.abs(sim["q"][0] - ds.q[:10]).max() < 1e-12
    monkeypatch.setattr(crba, "kernels", lambda: None)  # no numba: the batched numpy loop
    numpy = simulate_closed_loop(structure, np.stack([theta, broken, heavier]), spec, t)
    assert numpy["ok"].tolist() == [True, False, True]
    for key in ("q", "qd", "qdd", "u"):
        assert np.allclose(numpy[key][[0, 2]], sim[key][[0, 2]], rtol=1e-9, atol=1e-9), key


def test_bad_simulation_input_is_one_clear_line(smooth_loop):
    structure, theta, ds = smooth_loop
    spec = closed_loop_of(ds)
    cases = [
        (lambda: simulate_closed_loop(structure, theta[:-1], spec, ds.t), DataError, "thetas must be"),
        (lambda: simulate_closed_loop(structure, theta * np.nan, spec, ds.t), DataError, "NaN"),
        (lambda: simulate_closed_loop(structure, theta, spec, ds.t + 1e-5), DataError, "control grid"),
        (lambda: simulate_closed_loop(structure, theta, spec, ds.t[::-1]), DataError, "increasing"),
        (lambda: simulate_closed_loop(structure, theta, spec, [2.0]), DataError, "after the end"),
        (lambda: closed_loop_of(exact_datasets("planar3r")[1]), DataError, "needs closed-loop data"),
    ]
    coupled = load_robot("tx40_coupled")
    cases.append(
        (
            lambda: simulate_closed_loop(coupled.structure(), coupled.true_parameters(), spec, ds.t),
            ConfigError,
            "coupled",
        )
    )
    for call, error, words in cases:
        with pytest.raises(error, match=words) as info:
            call()
        assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------------------ the estimators
@parametrize_with_checks(CLASSES)
def test_the_closed_loop_estimators_pass_the_contract(estimator, check):
    check(estimator)


@pytest.mark.parametrize("name", NAMES)
def test_each_estimator_recovers_the_base_parameters_from_a_perturbed_start(smooth_loop, name):
    """pc_didim (didim's iteration, about 20 constrained solves from a perturbed start) starts from its own
    constrained least squares, to keep the test short."""
    structure, theta, ds = smooth_loop
    rng = np.random.default_rng(1)
    initial = None if name == "pc_didim" else theta * (1 + 0.03 * rng.standard_normal(theta.size))
    model = plugins.get_estimator(name)().fit(IdentificationProblem(structure, ds, initial=initial))
    assert _relative_error(model, structure, theta) < 1e-6
    d = model.diagnostics
    assert d["converged"] is True and d["iterations"] >= 1 and d["model_evaluations"] >= d["iterations"]
    if name.startswith("pc_"):
        assert d["consistent"] and standard_consistency(structure, model.values).consistent


def test_an_initial_estimate_whose_loop_diverges_is_one_clear_line(smooth_loop):
    structure, theta, ds = smooth_loop
    massless = theta.copy()
    massless[structure.parameter_slices()["inertial"]] = 0.0
    problem = IdentificationProblem(structure, ds, initial=massless)
    with pytest.raises(IdentificationError, match="initial estimate diverged") as info:
        plugins.get_estimator("didim")().fit(problem)
    assert "\n" not in str(info.value)


def test_open_loop_data_is_refused_before_any_work_in_one_line(monkeypatch):
    robot, ds, _ = exact_datasets("planar3r")
    problem = IdentificationProblem(robot, ds)
    for cls in CLASSES:
        monkeypatch.setattr(cls, "_fit", lambda self, problem: pytest.fail("_fit ran"))
        with pytest.raises(
            DataError, match=rf"estimator '{cls.name}' needs closed-loop data \(metadata\['closed_loop'\]"
        ):
            cls().fit(problem)


def test_the_cli_refuses_cloe_on_an_open_loop_log_with_one_line_and_exit_2(tmp_path):
    exact_datasets("planar3r")[1].save(tmp_path / "log.csv")
    args = ["identify", "--data", "log.csv", "--robot", "planar3r", "--estimator", "cloe", "--out", "model.json"]
    result = cli_process(args, tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "estimator 'cloe' needs closed-loop data" in lines[0]
    assert not (tmp_path / "model.json").exists()


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_a_saved_closed_loop_record_identifies_through_the_cli_as_in_memory(tmp_path, monkeypatch, suffix):
    """Regression: reading a log starts its t at 0 and kept the file's metadata only under 'file_metadata', so a
    saved birdy_dataset was refused as open-loop data; the log now carries 'closed_loop' with the loop's time
    at t = 0 ('t_offset_s')."""
    robot, ds = exact_closed_loop_dataset("planar3r")
    assert ds.t[0] > 0  # trimmed: the loop's time at the first sample is not 0
    ds.save(tmp_path / f"log{suffix}")
    args = ["identify", "--data", f"log{suffix}", "--robot", "planar3r", "--estimator", "idim_iv", "--out", "m.json"]
    monkeypatch.chdir(tmp_path)  # in this process: numba's threads are running, a fork would not be safe
    assert main(args) == 0
    saved = load_model(tmp_path / "m.json")
    in_memory = plugins.get_estimator("idim_iv")().fit(IdentificationProblem(robot, ds))
    np.testing.assert_allclose(saved.values, in_memory.values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(in_memory.values, robot.base_parameters().true_values(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "name, options, words",
    [
        ("idim_iv", {"tol": 0}, "tol"),
        ("didim", {"max_iterations": 0}, "max_iterations"),
        ("pc_didim", {"margin": -1}, "margin"),
        ("cloe", {"fd_step": 1.0}, "fd_step"),
        ("clie", {"max_evaluations": 1}, "max_evaluations"),
    ],
)
def test_bad_options_are_one_clear_line(name, options, words):
    with pytest.raises(ConfigError, match=words) as info:
        plugins.get_estimator(name).from_options(**options)
    assert "\n" not in str(info.value)

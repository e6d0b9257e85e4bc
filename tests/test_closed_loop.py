"""Controller plugins and closed-loop runs (SPEC §10, issue 11): pid, feedforward and computed_torque on
the PyBullet truth or an identified model, the η metric of seed 000 Fig. 15, the ``closed_loop:`` scenario
section and ``robotid-sim closed-loop``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import robotid_sim as rid
from robotid_sim import plugins
from robotid_sim.cli import main
from robotid_sim.control import (
    PD,
    PID,
    ComputedTorque,
    ComputedTorquePD,
    Feedforward,
    Plant,
    Reference,
)
from robotid_sim.control.closed_loop import ClosedLoopResult, integrate_closed_loop, run_closed_loop
from robotid_sim.errors import ConfigError, PluginError
from robotid_sim.studies import load_run_result

#: the three-axis arm of seed 000 tracks a Fourier reference for this long (s) in the η comparison
SECONDS = 6.0
#: seed 000's Case II noise (SNR 70/50/30 dB on q/qd/qdd) and a torque sensor's
NOISE = {"q": {"snr_db": 70}, "qd": {"snr_db": 50}, "qdd": {"snr_db": 30}, "tau": {"std": 0.05}}
#: identification data: another Fourier series than the reference tracked
IDENTIFICATION = {"type": "fourier", "harmonics": 5, "base_frequency": 0.2, "seed": 7}


@pytest.fixture(scope="module")
def three_axis(robots):
    return robots["three_axis"]


@pytest.fixture(scope="module")
def models(three_axis):
    """``ols`` models of three_axis identified from noise-free and from noisy simulated data."""
    exact = rid.simulate(three_axis, IDENTIFICATION, duration=5.0)
    noisy = rid.simulate(three_axis, IDENTIFICATION, duration=5.0, noise=NOISE, seed=1)
    return {"exact": rid.identify(exact, three_axis, "ols"), "noisy": rid.identify(noisy, three_axis, "ols")}


@pytest.fixture(scope="module")
def seed000(three_axis, models):
    """Seed 000 Fig. 15 on the PyBullet truth with its Stribeck friction: PID, feedforward of an identified
    model + PID, computed torque on an accurate identified model."""
    controllers = {
        "pid": PID(),
        "feedforward": Feedforward(model=models["noisy"]),
        "computed_torque": ComputedTorque(model=models["exact"]),
    }
    return {name: run_closed_loop(three_axis, c, "default", SECONDS) for name, c in controllers.items()}


# ------------------------------------------------------------------------------- seed 000 Fig. 15
def test_feedforward_beats_pid_on_every_joint_and_computed_torque_is_3x_better(seed000, record_property):
    eta = {name: result.eta for name, result in seed000.items()}
    for name, values in eta.items():
        print(f"η {name:16s} [deg]: {np.round(values, 4).tolist()}")  # noqa: T201 - the figures the README quotes
        record_property(f"eta_{name}_deg", np.round(values, 5).tolist())
    assert np.all(eta["pid"] > eta["feedforward"])
    assert np.all(3.0 * eta["computed_torque"] <= eta["pid"])
    assert np.mean(eta["pid"]) > 0.2  # PID alone does lag: gravity and dry friction (seed 000: ~1.2°)


def test_closed_loop_result_records_every_step_and_its_metrics(seed000, three_axis):
    result = seed000["pid"]
    steps = int(round(SECONDS / 1e-3))
    assert result.t.shape == (steps,) and result.q.shape == result.q_ref.shape == result.tau.shape == (steps, 3)
    assert np.array_equal(result.q[0], result.q_ref[0])  # starts on the reference
    assert np.allclose(result.eta, np.degrees(np.abs(result.q_ref - result.q).mean(axis=0)))
    metrics = result.metrics()
    assert metrics["units"] == ["deg"] * 3 and metrics["plant"] == "pybullet" and metrics["friction"] is True
    assert metrics["joints"] == three_axis.joint_names and metrics["duration_s"] == pytest.approx(SECONDS)
    assert metrics["max_error"] == pytest.approx(np.degrees(np.abs(result.error).max(axis=0)).tolist())
    assert result.controller == {"type": "pid", "kp": 80.0, "ki": 8.0, "kd": 2.0, "integral_limit": None,
                                 "gravity_compensation": False}  # fmt: skip
    json.dumps(metrics)


# ------------------------------------------------------------------------------- the control laws
def _state(rng, n=3):
    q, qd, q_ref, qd_ref, qdd_ref = (rng.normal(size=n) for _ in range(5))
    return q, qd, Reference(q_ref, qd_ref, qdd_ref)


def test_pid_law_integrates_the_error_and_reset_clears_it(three_axis, rng):
    q, qd, reference = _state(rng)
    pid = PID(kp=[10.0, 20.0, 30.0], ki=4.0, kd=0.5)
    pid.reset(Plant(three_axis, dt=0.01))
    e = reference.q - q
    first = pid(0.0, q, qd, reference)
    second = pid(0.01, q, qd, reference)
    p_d = np.array([10.0, 20.0, 30.0]) * e + 0.5 * (reference.qd - qd)
    assert np.allclose(first, p_d + 4.0 * 0.01 * e, rtol=1e-12)
    assert np.allclose(second, p_d + 4.0 * 0.02 * e, rtol=1e-12)
    pid.reset(Plant(three_axis, dt=0.01))
    assert np.allclose(pid(0.0, q, qd, reference), first, rtol=1e-12)


def test_pid_anti_windup_clamps_the_integral_term(three_axis, rng):
    q, qd, reference = _state(rng)
    pid = PID(kp=0.0, ki=100.0, kd=0.0, integral_limit=[0.5, 1.0, 2.0])
    pid.reset(Plant(three_axis, dt=0.1))
    for _ in range(50):
        tau = pid(0.0, q, qd, reference)
    assert np.allclose(np.abs(tau), [0.5, 1.0, 2.0]) and np.allclose(np.sign(tau), np.sign(reference.q - q))


def test_pid_gravity_compensation_is_pds(three_axis, rng):
    q, qd, reference = _state(rng)
    pid, pd = PID(ki=0.0, gravity_compensation=True), PD(gravity_compensation=True)
    for controller in (pid, pd):
        controller.reset(Plant(three_axis, dt=1e-3))
    assert np.allclose(pid(0.0, q, qd, reference), pd(0.0, q, qd, reference), rtol=1e-12)


def test_feedforward_is_the_model_torque_at_the_reference_plus_pid(three_axis, models, rng):
    q, qd, reference = _state(rng)
    model = models["noisy"]
    ff, pid = Feedforward(model=model), PID()
    for controller in (ff, pid):
        controller.reset(Plant(three_axis, dt=1e-3))
    expected = model.predict_torque(reference.q[None], reference.qd[None], reference.qdd[None])[0]
    assert np.allclose(ff(0.0, q, qd, reference), expected + pid(0.0, q, qd, reference), rtol=1e-12)
    assert ff.model is model


def test_computed_torque_is_the_mass_matrix_times_the_command_plus_the_bias(three_axis, models, rng):
    q, qd, reference = _state(rng)
    model = models["noisy"]
    ct = ComputedTorque(model=model, kp=100.0, kd=20.0)
    ct.reset(Plant(three_axis, dt=1e-3))
    command = reference.qdd + 20.0 * (reference.qd - qd) + 100.0 * (reference.q - q)
    expected = model.mass_matrix(q[None])[0] @ command + model.bias_torque(q[None], qd[None])[0]
    assert np.allclose(ct(0.0, q, qd, reference), expected, rtol=1e-12)


def test_computed_torque_on_the_plants_own_model_is_realised_exactly_like_computed_torque_pd(three_axis):
    default = run_closed_loop(three_axis, ComputedTorquePD(), "default", 0.3)
    own = run_closed_loop(three_axis, "computed_torque", "default", 0.3)
    assert np.array_equal(own.q, default.q) and np.array_equal(own.tau, default.tau)


def test_built_in_controllers_are_registered_and_pd_still_works():
    assert plugins.get_controller("pid") is PID
    assert plugins.get_controller("feedforward") is Feedforward
    assert plugins.get_controller("computed_torque") is ComputedTorque
    assert plugins.get_controller("pd") is PD and plugins.get_controller("computed_torque_pd") is ComputedTorquePD
    assert PD().get_params() == {"kp": 80.0, "kd": 2.0, "gravity_compensation": False}
    assert ComputedTorque().describe() == {"type": "computed_torque", "model": None, "kp": 400.0, "kd": 40.0}


# ------------------------------------------------------------------------------- options
@pytest.mark.parametrize(
    ("controller", "message"),
    [
        (PID(kp=[1.0, 2.0]), r"controller 'pid': option 'kp' must be a scalar or have 3 values"),
        (PID(ki=-1.0), r"controller 'pid': option 'ki' must be finite and >= 0"),
        (PID(integral_limit=-1.0), r"controller 'pid': option 'integral_limit' must be finite and >= 0"),
        (PID(gravity_compensation="yes"), r"controller 'pid': option 'gravity_compensation' must be true or false"),
        (Feedforward(model=object()), r"controller 'feedforward': option 'model' must be an identified model"),
        (Feedforward(model="missing.json"), r"controller 'feedforward': option 'model': model file not found"),
        (ComputedTorque(kd=np.nan), r"controller 'computed_torque': option 'kd' must be finite"),
    ],
)
def test_bad_options_name_the_controller_and_the_option(three_axis, controller, message):
    with pytest.raises(ConfigError, match=message):
        controller.reset(Plant(three_axis, dt=1e-3))


def test_a_model_of_another_robot_is_refused(robots, three_axis, tmp_path):
    other = rid.identify(rid.simulate("planar3r", IDENTIFICATION, duration=3.0), robots["planar3r"], "ols")
    with pytest.raises(ConfigError, match=r"controller .computed_torque.: option .model.: the robot differs"):
        ComputedTorque(model=other).reset(Plant(three_axis, dt=1e-3))
    path = other.save(tmp_path / "planar3r.json")
    with pytest.raises(ConfigError, match=r"controller 'feedforward': option 'model': the robot differs"):
        Feedforward(model=path).reset(Plant(three_axis, dt=1e-3))


def test_unknown_controllers_and_options_are_errors(three_axis):
    with pytest.raises(PluginError, match=r"unknown controller 'pidd'.*did you mean 'pid'"):
        run_closed_loop(three_axis, "pidd", duration=0.1)
    with pytest.raises(ConfigError, match=r"controller 'pid': unknown option\(s\) \['model'\]"):
        run_closed_loop(three_axis, {"name": "pid", "options": {"model": None}}, duration=0.1)
    with pytest.raises(ConfigError, match="friction=False switches off the friction of the PyBullet plant"):
        run_closed_loop(three_axis, "pid", duration=0.1, plant=three_axis, friction=False)


# ------------------------------------------------------------------------------- models as options and plants
def test_feedforward_with_a_saved_model_path_runs_as_with_the_model(three_axis, models, tmp_path):
    path = models["noisy"].save(tmp_path / "ols.json")
    by_path = run_closed_loop(three_axis, Feedforward(model=str(path)), "default", 0.5)
    by_object = run_closed_loop(three_axis, Feedforward(model=models["noisy"]), "default", 0.5)
    assert np.array_equal(by_path.q, by_object.q)
    assert by_path.controller["model"] == str(path)
    assert by_object.controller["model"] == {"kind": "base_linear", "estimator": "ols"}


def test_an_identified_model_is_a_plant_integrated_like_bullet(three_axis, models, seed000):
    """A noise-free ols model is the truth to rounding; closed on it, PID moves as in PyBullet."""
    on_model = run_closed_loop(three_axis, PID(), "default", 2.0, plant=models["exact"])
    in_bullet = seed000["pid"]
    assert on_model.plant == "model base_linear (ols)" and on_model.diverged_at is None
    assert np.max(np.abs(on_model.q - in_bullet.q[: len(on_model.t)])) < 1e-6


class _Diverging:
    """A model whose forward dynamics blow up after 10 calls."""

    n_dof = 3

    def __init__(self):
        self.calls = 0

    def predict_torque(self, q, qd, qdd):
        return np.zeros_like(q)

    def forward_dynamics(self, q, qd, tau):
        self.calls += 1
        return np.full_like(q, np.inf if self.calls > 10 else 0.0)


def test_a_diverging_model_plant_gives_an_infinite_eta_not_an_error(three_axis):
    result = run_closed_loop(three_axis, PID(), "default", 0.1, plant=_Diverging())
    assert result.diverged_at == pytest.approx(0.011) and np.all(np.isinf(result.eta))
    assert np.all(np.isnan(result.q[12:])) and np.all(np.isfinite(result.q[:11]))


def test_a_controller_returning_a_bad_torque_on_a_model_plant_is_named(three_axis, models):
    class Broken(PID):
        def __call__(self, t, q, qd, reference):
            return np.zeros(2)

    q_ref = np.zeros((5, 3))
    with pytest.raises(
        rid.DataError, match=r"controller 'pid' returned a torque that is not 3 finite numbers at step 0"
    ):
        integrate_closed_loop(models["exact"], Broken(), q_ref, q_ref, q_ref, 1e-3)


def test_prismatic_joints_are_in_millimetres():
    result = ClosedLoopResult({}, "pybullet", ["a", "b"], ["revolute", "prismatic"], np.arange(2) * 1e-3,
                              np.zeros((2, 2)), np.zeros((2, 2)), np.full((2, 2), 0.01), np.zeros((2, 2)),
                              np.zeros((2, 2)))  # fmt: skip
    assert result.units == ["deg", "mm"] and np.allclose(result.eta, [np.degrees(0.01), 10.0])


# ------------------------------------------------------------------------------- scenario section
SCENARIO = {
    "name": "cl",
    "robot": "three_axis",
    "excitation": IDENTIFICATION,
    "noise": {"tau": {"std": 0.05}},
    "simulation": {"rate_hz": 100, "duration": 3.0},
    "validation": {"duration": 1.0, "trajectory_horizon": 0.0},
    "estimators": ["ols"],
    "closed_loop": {
        "model": "ols",
        "controllers": ["pid", "feedforward", {"name": "computed_torque", "options": {"model": "CAD"}}],
        "duration": 1.0,
    },
}


def _scenario(tmp_path: Path, **closed_loop) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "closed_loop": {**SCENARIO["closed_loop"], **closed_loop}}))
    return path


def test_scenario_closed_loop_section_end_to_end(tmp_path):
    run = rid.run_scenario(_scenario(tmp_path), out_dir=tmp_path / "runs")
    metrics = json.loads((run / "metrics.json").read_text())
    estimators = [row["estimator"] for row in metrics["estimators"]]
    controllers = {row["controller"]: row for row in metrics["controllers"]}
    assert estimators == ["ols", "CAD"]
    assert list(controllers) == ["pid", "feedforward(ols)", "computed_torque(CAD)"]
    assert controllers["feedforward(ols)"]["model"] == "ols" and controllers["pid"]["model"] is None
    for row in controllers.values():
        assert len(row["eta"]) == 3 and row["plant"] == "pybullet" and row["duration_s"] == pytest.approx(1.0)
    assert all(np.array(controllers["pid"]["eta"]) > np.array(controllers["feedforward(ols)"]["eta"]))
    assert (run / "plots" / "tracking_errors.png").stat().st_size > 0
    series = sorted(p.name for p in (run / "closed_loop").iterdir())  # the scenario's series are kept too
    assert series == ["computed_torque_CAD_.npz", "feedforward_ols_.npz", "pid.npz"]
    with np.load(run / "closed_loop" / "pid.npz") as pid:
        assert pid["q"].shape == pid["q_ref"].shape == (pid["t"].size, 3)
    report = (run / "report.md").read_text()
    assert "## Closed loop" in report and "| feedforward(ols) |" in report and "tracking_errors.png" in report
    assert "tracks the validation trajectory for 1 s" in report
    result = load_run_result(run)
    assert [o.name for o in result.closed_loop] == list(controllers) and len(result.outcomes) == 2
    assert main(["report", str(run)]) == 0


@pytest.mark.parametrize(
    ("closed_loop", "message"),
    [
        ({"controllers": ["pid", "magic"]}, r"closed_loop.controllers\[1\]: unknown controller 'magic'"),
        ({"controllers": [{"name": "feedforward", "options": {"model": "wls"}}]},
         r"closed_loop.controllers\[0\].options.model: 'wls' is neither an estimator label \('ols', 'CAD'\) nor"),
        ({"controllers": [{"name": "pid", "options": {"kp": [1, 2]}}]},
         r"closed_loop.controllers\[0\]: controller 'pid': option 'kp' must be a scalar or have 3 values"),
        ({"controllers": ["pid"]}, r"closed_loop.model: none of the controllers takes a model"),
        ({"plant": "nowhere.json"}, r"closed_loop.plant: 'nowhere.json' is neither"),
        ({"reference": {"type": "fourier", "amplitude": 50}}, r"excitation 'fourier': unknown option\(s\) \['amplitude'\]"),
        ({"controllers": ["pid", "pid"]}, r"controllers appear twice: \['pid'\]"),
    ],
)  # fmt: skip
def test_closed_loop_section_is_checked_before_anything_is_simulated(tmp_path, monkeypatch, closed_loop, message):
    from robotid_sim.scenario import plan as runner

    def no_simulation(*args, **kwargs):
        raise AssertionError("simulated before the closed_loop section was checked")

    monkeypatch.setattr(runner, "simulate", no_simulation)
    with pytest.raises(ConfigError, match=message):
        rid.run_scenario(_scenario(tmp_path, **closed_loop), out_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# ------------------------------------------------------------------------------- command line
def test_cli_closed_loop_prints_the_eta_table_and_never_overwrites(three_axis, models, tmp_path, capsys):
    model = models["exact"].save(tmp_path / "ols.json")
    args = ["closed-loop", "--robot", "three_axis", "--duration", "0.5", "--model", str(model)]
    args += ["--controller", "pid", "--controller", 'soft=pid:{"kp": 20}']
    args += ["--controller", 'computed_torque:{"kp": 100, "kd": 20}', "--out", str(tmp_path)]
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "η joint1 [deg]" in out and "computed_torque(ols) │" in out and "run folder" in out
    assert main(args) == 0
    runs = sorted(p for p in tmp_path.glob("closed_loop-*") if p.is_dir())
    assert len(runs) == 2
    rows = json.loads((runs[0] / "metrics.json").read_text())["controllers"]
    assert [row["controller"] for row in rows] == ["pid", "soft", "computed_torque(ols)"]
    assert all(np.array(rows[1]["eta"]) > np.array(rows[0]["eta"]))  # a softer PID lags more
    assert (runs[0] / "report.md").exists() and (runs[0] / "plots" / "tracking_errors.png").exists()
    assert main(["report", str(runs[0])]) == 0
    assert "computed_torque(ols)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--controller", "nope"], "unknown controller 'nope'"),
        (["--controller", "pid:{bad"], "--controller pid is not valid JSON"),
        (["--controller", "=pid"], "--controller '=pid': write [LABEL=]NAME[:JSON]"),
        (["--controller", "pid", "--controller", 'pid:{"ki": 0}'], "controllers appear twice: ['pid']"),
        (["--controller", 'pid:{"kx": 1}'], "controller 'pid': unknown option(s) ['kx']"),
        (["--model", "missing.json"], "'missing.json' is neither an estimator label"),
        (["--plant", "missing.json"], "closed_loop.plant: 'missing.json' is neither"),
        (["--duration", "-1"], "--duration must be a finite number > 0"),
        (["--reference", "missing.yaml"], "--reference"),
    ],
)
def test_cli_closed_loop_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    code = main(["closed-loop", "--robot", "three_axis", *extra, "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in " ".join(err.split())
    assert "Traceback" not in err and not (tmp_path / "runs").exists()

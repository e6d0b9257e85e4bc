"""Controllers (SPEC §5, §10): the interface, the one tracking loop that takes any controller, and
the recorded data staying exact (and, for the default controller, unchanged bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim import plugins
from robotid_sim.control import PD, AccelerationController, ComputedTorquePD, Controller, Plant, Reference
from robotid_sim.errors import ConfigError, DataError
from robotid_sim.sim.pybullet_sim import PyBulletSimulator

NOISE = {"q": {"snr_db": 60}, "qd": {"snr_db": 40}, "tau": {"std": 0.05}}


def _track_before_controllers(sim, q_ref, qd_ref, qdd_ref, decimation=1, kp=400.0, kd=40.0):
    """``PyBulletSimulator.track`` as it was before controllers were pluggable, kept verbatim as
    the reference for the default controller."""
    S, n = q_ref.shape
    sim.reset(q_ref[0], qd_ref[0])
    kp = np.broadcast_to(np.asarray(kp, float), (n,))
    kd = np.broadcast_to(np.asarray(kd, float), (n,))
    N = (S + decimation - 1) // decimation
    rec_q, rec_qd, rec_qdd, rec_tau = (np.empty((N, n)) for _ in range(4))
    rec_t = np.empty(N)
    kp_l, kd_l = kp.tolist(), kd.tolist()
    qr, qdr, qddr = q_ref.tolist(), qd_ref.tolist(), qdd_ref.tolist()
    rng = range(n)
    k = 0
    for s in range(S):
        q, qd = sim._state_lists()
        a, b, c = qr[s], qdr[s], qddr[s]
        qdd_cmd = [c[i] + kd_l[i] * (b[i] - qd[i]) + kp_l[i] * (a[i] - q[i]) for i in rng]
        tau_rb = sim.step_acceleration(qdd_cmd, q, qd)
        if s % decimation == 0:
            rec_t[k] = s * sim.dt
            rec_q[k], rec_qd[k], rec_qdd[k], rec_tau[k] = q, qd, qdd_cmd, tau_rb
            k += 1
    sim.check_positions(rec_q)
    return {
        "t": rec_t,
        "q": rec_q,
        "qd": rec_qd,
        "qdd": rec_qdd,
        "tau": sim.motor_torque(rec_tau, rec_qd, rec_qdd),
        "tau_rigid": rec_tau,
    }


def _reference(robot, seconds=1.0, dt=1e-3):
    """A smooth multi-joint sine reference inside the limits, (S, n) each."""
    t = np.arange(int(round(seconds / dt))) * dt
    lo, hi = robot.position_limits
    lo, hi = np.where(np.isfinite(lo), lo, -3.0), np.where(np.isfinite(hi), hi, 3.0)
    mid, amp = (lo + hi) / 2, 0.2 * (hi - lo) / 2
    w = 0.5 * np.minimum(robot.velocity_limit / amp, np.sqrt(robot.acceleration_limit / amp))
    phase = np.arange(robot.n_dof)
    s, c = np.sin(w * t[:, None] + phase), np.cos(w * t[:, None] + phase)
    return mid + amp * s, amp * w * c, -amp * w**2 * s


def _assert_exact(robot, rec, dt=1e-3):
    """Recorded torque == the robot's inverse dynamics at the recorded states, and the recorded
    acceleration is the one Bullet realised (semi-implicit Euler, decimation 1)."""
    tau_model = robot.inverse_dynamics(rec["q"], rec["qd"], rec["qdd"])
    assert np.linalg.norm(rec["tau"] - tau_model) <= 1e-8 * np.linalg.norm(rec["tau"])
    realised = np.diff(rec["qd"], axis=0) / dt
    assert np.max(np.abs(realised - rec["qdd"][:-1])) < 1e-6 * max(1.0, np.abs(rec["qdd"]).max())


# ---------------------------------------------------------------------------- default controller
@pytest.mark.parametrize("name", ["planar3r", "prrrp"])
def test_default_controller_is_deterministic_and_the_noise_seed_changes_only_the_noise(name):
    """The same seed gives the same data bit for bit, another seed the same truth with other noise. (Hashes
    recorded on one machine were dropped: Bullet and BLAS round differently on other CPUs; that the default
    controller is the loop from before controllers is test_default_track_equals_the_loop_before_controllers.)"""
    first, again = (rid.simulate(name, "default", duration=2.0, noise=NOISE, seed=3) for _ in range(2))
    other = rid.simulate(name, "default", duration=2.0, noise=NOISE, seed=4)
    for key in ("t", "q", "qd", "qdd", "tau"):
        assert np.array_equal(getattr(first, key), getattr(again, key)), key
    for key in ("q", "qd", "qdd", "tau"):
        assert np.array_equal(getattr(first.truth, key), getattr(other.truth, key)), key
    assert not np.array_equal(first.tau, other.tau)
    assert first.metadata["controller"] == {"type": "computed_torque_true_model_pd", "kp": 400.0, "kd": 40.0}


@pytest.mark.parametrize("name", ["planar3r", "scara", "prrrp", "hyper9"])
def test_default_track_equals_the_loop_before_controllers(name, robots):
    robot = robots[name]
    q_ref, qd_ref, qdd_ref = _reference(robot, seconds=0.6)
    gains = {"kp": np.linspace(100.0, 500.0, robot.n_dof), "kd": 25.0}
    with PyBulletSimulator(robot) as sim:
        cases = [
            (
                sim.track(q_ref, qd_ref, qdd_ref, decimation=3),
                _track_before_controllers(sim, q_ref, qd_ref, qdd_ref, 3),
            ),
            (
                sim.track(q_ref, qd_ref, qdd_ref, decimation=2, controller=ComputedTorquePD(**gains)),
                _track_before_controllers(sim, q_ref, qd_ref, qdd_ref, 2, **gains),
            ),
        ]
    for new, old in cases:
        assert new.keys() == old.keys()
        for key in old:
            assert np.array_equal(new[key], old[key]), key


def test_simulate_gains_shortcut_is_the_default_controller(robots):
    robot = robots["planar3r"]
    by_gains = rid.simulate(robot, "default", duration=0.5, kp=100.0, kd=20.0)
    by_controller = rid.simulate(robot, "default", duration=0.5, controller=ComputedTorquePD(kp=100.0, kd=20.0))
    assert np.array_equal(by_gains.q, by_controller.q) and np.array_equal(by_gains.tau, by_controller.tau)
    assert by_gains.metadata["controller"] == {"type": "computed_torque_true_model_pd", "kp": 100.0, "kd": 20.0}
    with pytest.raises(ConfigError, match="kp and kd are the gains of the default controller"):
        rid.simulate(robot, "default", duration=0.5, kp=100.0, controller=PD())


# ---------------------------------------------------------------------------- torque controllers
def test_pd_controller_data_differ_from_the_default_and_are_exact(robots):
    robot = robots["planar3r"]  # vertical plane: PD needs gravity compensation to track
    default = rid.simulate(robot, "default", duration=2.0, rate_hz=1000)
    ds = rid.simulate(robot, "default", duration=2.0, rate_hz=1000, controller=PD(gravity_compensation=True))
    assert ds.metadata["controller"] == {"type": "pd", "kp": 80.0, "kd": 2.0, "gravity_compensation": True}
    assert not np.array_equal(ds.q, default.q) and not np.array_equal(ds.tau, default.tau)
    assert 1e-5 < ds.metadata["tracking_error_max"] < 0.05
    _assert_exact(robot, {"q": ds.q, "qd": ds.qd, "qdd": ds.qdd, "tau": ds.tau})
    plain = rid.simulate(robot, "default", duration=2.0, rate_hz=1000, controller=PD())
    assert plain.metadata["tracking_error_max"] > 5 * ds.metadata["tracking_error_max"]  # sags under gravity


def test_pd_torque_is_the_pd_law_plus_gravity(robots):
    robot = robots["planar3r"]
    rng = np.random.default_rng(1)
    q, qd, q_ref, qd_ref = (rng.normal(size=3) for _ in range(4))
    reference = Reference(q_ref, qd_ref, np.zeros(3))
    pd = PD(kp=[10.0, 20.0, 30.0], kd=2.0, gravity_compensation=True)
    pd.reset(Plant(robot, dt=1e-3))
    gravity = robot.inverse_dynamics(q[None], np.zeros((1, 3)), np.zeros((1, 3)))[0]
    expected = np.array([10.0, 20.0, 30.0]) * (q_ref - q) + 2.0 * (qd_ref - qd) + gravity
    assert np.allclose(pd(0.0, q, qd, reference), expected, rtol=1e-12, atol=1e-12)
    assert np.allclose(pd.plant.gravity_torque(q), gravity)


def test_an_identified_model_is_a_plant(robots):
    robot = robots["planar3r"]
    ds = rid.simulate(robot, {"type": "fourier", "harmonics": 5, "base_frequency": 0.2}, duration=5.0)
    plant = Plant(rid.identify(ds, robot, "ols"), dt=1e-3)
    rng = np.random.default_rng(2)
    q, qd, qdd = (rng.normal(size=3) for _ in range(3))
    truth = Plant(robot, dt=1e-3)
    assert plant.n_dof == 3
    assert np.allclose(plant.gravity_torque(q), truth.gravity_torque(q), rtol=1e-6, atol=1e-9)
    assert np.allclose(plant.inverse_dynamics(q, qd, qdd), truth.inverse_dynamics(q, qd, qdd), rtol=1e-6, atol=1e-9)
    pd = PD(gravity_compensation=True)
    pd.reset(plant)
    reference = Reference(q, qd, qdd)
    assert np.allclose(pd(0.0, q, qd, reference), truth.gravity_torque(q), rtol=1e-6, atol=1e-9)


class FeedforwardPD(Controller):
    """A third controller, written here: the plant model's torque at the reference + PD. It
    records what the loop gives it."""

    class Options(Controller.Options):
        kp: float = 80.0
        kd: float = 2.0

    def reset(self, plant):
        super().reset(plant)
        self.calls = []

    def __call__(self, t, q, qd, reference):
        self.calls.append((t, q.copy(), qd.copy(), reference))
        feedforward = self.plant.inverse_dynamics(reference.q, reference.qd, reference.qdd)
        return feedforward + self.kp * (reference.q - q) + self.kd * (reference.qd - qd)


def test_any_controller_drives_the_loop(robots):
    robot = robots["scara"]
    q_ref, qd_ref, qdd_ref = _reference(robot, seconds=0.5)
    controller = FeedforwardPD()
    with PyBulletSimulator(robot) as sim:
        rec = sim.track(q_ref, qd_ref, qdd_ref, controller=controller)
        pd = sim.track(q_ref, qd_ref, qdd_ref, controller=PD(gravity_compensation=True))
    assert controller.plant.model is robot and controller.plant.dt == 1e-3 and controller.plant.n_dof == 4
    assert len(controller.calls) == len(q_ref)
    t, q, qd, reference = controller.calls[7]
    assert t == 7 * 1e-3 and isinstance(reference, Reference)
    assert np.array_equal(reference.q, q_ref[7]) and np.array_equal(reference.qdd, qdd_ref[7])
    assert np.array_equal(q, rec["q"][7]) and np.array_equal(qd, rec["qd"][7])
    _assert_exact(robot, rec)
    # the feedforward of the true model tracks far better than PD alone
    assert np.abs(rec["q"] - q_ref).max() < 0.1 * np.abs(pd["q"] - q_ref).max()
    assert controller.describe() == {"type": "FeedforwardPD", "kp": 80.0, "kd": 2.0}


class NumpyComputedTorque(AccelerationController):
    """ComputedTorquePD's law written with numpy, through the default ``acceleration_lists``."""

    def __init__(self, kp: float = 400.0, kd: float = 40.0, model=None):
        self.kp = kp
        self.kd = kd
        self.model_option = model

    @property
    def model(self):
        return self.plant.model if self.model_option is None else self.model_option

    def acceleration(self, t, q, qd, reference):
        return reference.qdd + self.kd * (reference.qd - qd) + self.kp * (reference.q - q)


def test_acceleration_controller_on_the_true_model_is_realised_exactly(robots):
    robot = robots["prrrp"]
    q_ref, qd_ref, qdd_ref = _reference(robot, seconds=0.5)
    with PyBulletSimulator(robot) as sim:
        custom = sim.track(q_ref, qd_ref, qdd_ref, controller=NumpyComputedTorque())
        default = sim.track(q_ref, qd_ref, qdd_ref)
    for key in default:
        assert np.array_equal(custom[key], default[key]), key


def test_acceleration_controller_on_another_model_is_a_torque_controller(robots):
    """Computed torque on a wrong model (what an identified model is): the torque goes through
    step_torque, the arm no longer follows the commanded acceleration, the data stay exact."""
    robot = robots["planar3r"]
    wrong = robot.with_parameters(robot.true_parameters() * 1.2)
    q_ref, qd_ref, qdd_ref = _reference(robot, seconds=0.5)
    with PyBulletSimulator(robot) as sim:
        rec = sim.track(q_ref, qd_ref, qdd_ref, controller=NumpyComputedTorque(model=wrong))
        exact = sim.track(q_ref, qd_ref, qdd_ref)
    _assert_exact(robot, rec)
    assert not np.allclose(rec["q"], exact["q"], atol=1e-6)
    assert np.abs(rec["q"] - q_ref).max() < 0.05


# ---------------------------------------------------------------------------- bad controllers
class Bad(Controller):
    """Returns ``output(n)`` from step 5 on, a zero torque before."""

    def __init__(self, output=None):
        self.output = output

    def __call__(self, t, q, qd, reference):
        return self.output(len(q)) if t >= 5e-3 - 1e-12 else np.zeros(len(q))


class BadAcceleration(AccelerationController):
    def __init__(self, output=None):
        self.output = output

    def acceleration(self, t, q, qd, reference):
        return self.output(len(q)) if t >= 5e-3 - 1e-12 else reference.qdd


@pytest.mark.parametrize("kind", [Bad, BadAcceleration])
@pytest.mark.parametrize(
    ("output", "message"),
    [
        (lambda n: np.zeros(n + 1), r"of shape \(4,\) at step 5 \(t = 0\.005 s\); expected \(3,\)"),
        (lambda n: np.zeros((n, 1)), r"of shape \(3, 1\) at step 5"),
        (lambda n: np.full(n, np.nan), r"non-finite .* at step 5 \(t = 0\.005 s\)"),
        (lambda n: [0.0, np.inf, 0.0], r"non-finite .* at step 5"),
        (lambda n: None, r"at step 5"),
        (lambda n: "torque", r"not 3 numbers at step 5"),
    ],
)
def test_bad_controller_output_is_a_clear_error(kind, output, message, robots):
    robot = robots["planar3r"]
    q_ref, qd_ref, qdd_ref = _reference(robot, seconds=0.05)
    with PyBulletSimulator(robot) as sim, pytest.raises(DataError, match=rf"controller '{kind.__name__}'.*{message}"):
        sim.track(q_ref, qd_ref, qdd_ref, controller=kind(output))


def test_bad_gains_and_references_are_clear_errors(robots):
    robot = robots["planar3r"]
    q_ref, qd_ref, qdd_ref = _reference(robot, seconds=0.05)
    with PyBulletSimulator(robot) as sim:
        with pytest.raises(ConfigError, match=r"controller 'computed_torque_pd': option 'kp' .* 3 values"):
            sim.track(q_ref, qd_ref, qdd_ref, controller=ComputedTorquePD(kp=[1.0, 2.0]))
        with pytest.raises(ConfigError, match=r"controller 'pd': option 'kd' must be finite and >= 0"):
            sim.track(q_ref, qd_ref, qdd_ref, controller=PD(kd=-1.0))
        with pytest.raises(DataError, match=r"'qd_ref' must have shape \(S, 3\)"):
            sim.track(q_ref, qd_ref[:, :2], qdd_ref)
    with pytest.raises(ConfigError, match="plant model must be a Robot or an identified model"):
        Plant(object(), dt=1e-3)


# ---------------------------------------------------------------------------- options and plugins
def test_controller_options():
    assert ComputedTorquePD().get_params() == {"kp": 400.0, "kd": 40.0}
    assert PD.from_options(kp=5.0, gravity_compensation=True).get_params() == {
        "kp": 5.0,
        "kd": 2.0,
        "gravity_compensation": True,
    }
    with pytest.raises(ConfigError, match=r"controller 'pd': unknown option\(s\) \['ki'\]"):
        PD.from_options(ki=1.0)
    assert ComputedTorquePD(kp=np.array([1.0, 2.0]), kd=3).describe() == {
        "type": "computed_torque_true_model_pd",
        "kp": [1.0, 2.0],
        "kd": 3.0,
    }


@pytest.mark.parametrize("name", ["pid", "pd", "feedforward", "computed_torque", "computed_torque_pd"])
def test_a_builtin_controller_declares_its_options_and_refuses_others(name):
    cls = plugins.get_controller(name)
    defaults = {key: field.default for key, field in cls.Options.model_fields.items()}
    assert cls().get_params() == defaults
    assert cls.from_options(**defaults).get_params() == defaults
    with pytest.raises(ConfigError, match=rf"controller '{name}': unknown option\(s\) \['gain'\]; valid options: "):
        cls(gain=1.0)


def test_the_controller_interface_is_the_simulator_layers_and_control_exports_it():
    from robotid_sim.sim import tracking

    assert (Controller, Plant, Reference, ComputedTorquePD) == (
        tracking.Controller,
        tracking.Plant,
        tracking.Reference,
        tracking.ComputedTorquePD,
    )


def test_built_in_controllers_are_registered():
    assert plugins.get_controller("pd") is PD
    assert plugins.get_controller("computed_torque_pd") is ComputedTorquePD

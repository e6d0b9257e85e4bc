"""The estimator contract check, in the spirit of scikit-learn's ``check_estimator`` (SPEC §12).

Every estimator, built-in or from a plugin, should pass::

    from robotid_sim.testing import check_estimator
    check_estimator(MyEstimator)            # raises EstimatorCheckError naming the failed check

or, one pytest test per check::

    from robotid_sim.testing import parametrize_with_checks

    @parametrize_with_checks([MyEstimator])
    def test_my_estimator(estimator, check):
        check(estimator)

The checks (each a function ``check(estimator_class)``, listed by :func:`estimator_checks`):

``default_constructible``
    ``cls()`` works and is an :class:`~robotid_sim.identification.Estimator` with a ``name``, whose
    options are a nested ``Options`` class (an :class:`~robotid_sim.identification.EstimatorOptions`)
    and which writes no ``__init__`` (the base constructor validates and stores the options).
``options_round_trip``
    ``get_params()`` is JSON-able and ``cls.from_options(**params)`` gives the same params.
``unknown_option_is_a_clear_error``
    an unknown option raises :class:`~robotid_sim.errors.ConfigError` naming it.
``predictions_have_shape_n_by_dof``
    ``fit`` returns an :class:`~robotid_sim.identification.IdentifiedModel` whose
    ``predict_torque`` gives finite (N, n) torques, stamped with the estimator's name and options.
``fit_does_not_mutate_the_problem``
    the dataset arrays and the structure are unchanged by ``fit``.
``options_only_from_the_constructor``
    ``fit`` sets no attribute on the estimator but scikit-learn's fitted ones (a trailing ``_``,
    e.g. ``resolved_params_``) and reads no option from elsewhere: an estimator built from
    ``get_params()`` after a fit gives identical predictions.
``save_load_identical``
    ``model.save`` then :func:`~robotid_sim.identification.load_model`, also after the folder
    is moved, gives an equal model with identical predictions.
``recovers_truth_without_noise``
    on noise-free data the validation torque (a different trajectory) is predicted to 1e-6
    relative, and a linear model's base parameters match the truth to 1e-6; skipped for an
    estimator that declares ``biased = True``.

The data is exact: a smooth multi-sine trajectory of a bundled robot (default ``planar3r``)
with the torque of the true model, no PyBullet run, so the checks take about a second. An estimator that
``needs_closed_loop`` (it re-runs the loop the data was recorded in) is fitted on noise-free closed-loop data
instead (:func:`exact_closed_loop_dataset`: PyBullet in a PID loop, 1 s) and validated on the same multi-sine.
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.identification import (
    Estimator,
    EstimatorOptions,
    IdentificationProblem,
    IdentifiedModel,
    load_model,
)
from robotid_sim.identification.models import LinearParameterModel

#: relative tolerance of the noise-free truth check
TRUTH_TOLERANCE = 1e-6


class EstimatorCheckError(AssertionError):
    """An estimator broke the contract; the message names the estimator, the check and why."""


Check = Callable[[type], None]


# ------------------------------------------------------------------------------------- data
def exact_multisine(robot, seed: int, duration: float, rate_hz: float):
    """(t, q, qd, qdd): a sum of sines per joint inside 80 % of the position range, exact derivatives."""
    rng = np.random.default_rng(seed)
    n = robot.n_dof
    lo, hi = robot.position_limits
    lo = np.where(np.isfinite(lo), lo, -np.pi)
    hi = np.where(np.isfinite(hi), hi, np.pi)
    mid, half = (lo + hi) / 2, 0.4 * (hi - lo)
    t = np.arange(int(duration * rate_hz)) / rate_hz
    freqs = np.array([0.15, 0.35, 0.6, 0.9])
    amp = rng.uniform(-1, 1, size=(n, len(freqs)))
    amp *= half[:, None] / np.abs(amp).sum(axis=1, keepdims=True)
    amp = np.minimum(np.abs(amp), (robot.velocity_limit[:, None] / (2 * np.pi * freqs)) / len(freqs)) * np.sign(amp)
    phase = rng.uniform(0, 2 * np.pi, size=(n, len(freqs)))
    w = 2 * np.pi * freqs
    arg = w[None, None, :] * t[:, None, None] + phase[None]
    q = mid + np.sum(amp * np.sin(arg), axis=2)
    qd = np.sum(amp * w * np.cos(arg), axis=2)
    qdd = -np.sum(amp * w**2 * np.sin(arg), axis=2)
    return t, q, qd, qdd


@functools.lru_cache(maxsize=4)
def exact_datasets(robot_name: str):
    """(robot, identification dataset, validation dataset), noise-free, cached per robot."""
    from robotid_sim.robot import load_robot
    from robotid_sim.sim.dataset import Dataset, Signals

    robot = load_robot(robot_name)
    out = []
    for seed in (0, 1):
        t, q, qd, qdd = exact_multisine(robot, seed, 12.0, 50.0)
        tau = robot.inverse_dynamics(q, qd, qdd)
        out.append(
            Dataset(
                t,
                q,
                qd,
                qdd,
                tau,
                truth=Signals(q, qd, qdd, tau),
                joint_names=robot.joint_names,
                metadata={"source": "robotid_sim.testing (exact multi-sine)"},
            )
        )
    return robot, out[0], out[1]


#: (kp, kd, ki) of every joint's PID in the closed-loop check data (stable at 1 kHz), per robot; others get
#: :data:`DEFAULT_GAINS`
CLOSED_LOOP_GAINS = {"planar3r": (400.0, 4.0, 0.0)}
DEFAULT_GAINS = (400.0, 4.0, 0.0)


@functools.lru_cache(maxsize=2)
def exact_closed_loop_dataset(robot_name: str, duration: float = 1.0):
    """(robot, dataset): noise-free closed-loop data of a bundled robot, cached per robot and duration.

    BIRDy's loop on PyBullet (:func:`robotid_sim.sim.closed_loop_data.closed_loop_record`) with every joint's
    PID of :data:`CLOSED_LOOP_GAINS` at 1 kHz with one physics step per control step (a twentieth of the PyBullet
    steps of BIRDy's 5 kHz loop with four; tx40, whose wrist needs those, runs BIRDy's own loop), along one
    period of a 5-harmonic Fourier reference of ``duration`` seconds;
    :func:`~robotid_sim.sim.closed_loop_data.birdy_dataset` with the simulator's exact derivatives, 5 samples
    trimmed per end, no decimation. Its ``metadata['closed_loop']`` is what closed-loop estimators re-run.
    """
    from robotid_sim.robot import load_robot
    from robotid_sim.sim.closed_loop_data import TX40_ROBOTS, PIDLoop, birdy_dataset, closed_loop_record

    robot = load_robot(robot_name)
    n = robot.n_dof
    loop = None
    if robot_name not in TX40_ROBOTS:
        kp, kd, ki = CLOSED_LOOP_GAINS.get(robot_name, DEFAULT_GAINS)
        loop = PIDLoop(
            kp=np.full(n, kp), kd=np.full(n, kd), ki=np.full(n, ki), control_rate_hz=1000.0, physics_substeps=1
        )
    reference = {"type": "fourier", "harmonics": 5, "base_frequency": 1.0 / duration, "periods": 1, "seed": 0}
    record = closed_loop_record(robot, reference, loop, duration=duration)
    return robot, birdy_dataset(record, derivatives="exact", trim=5, decimation=1)


def check_datasets(cls, robot_name: str):
    """(robot, identification dataset, validation dataset) of the checks for estimator class ``cls``: the
    exact multi-sine pair, or for an estimator that ``needs_closed_loop`` the closed-loop data
    (:func:`exact_closed_loop_dataset`) with the multi-sine validation data."""
    robot, ds, ds_val = exact_datasets(robot_name)
    if getattr(cls, "needs_closed_loop", False):
        robot, ds = exact_closed_loop_dataset(robot_name)
    return robot, ds, ds_val


# ------------------------------------------------------------------------------------ helpers
def _fail(cls, check: str, why: str) -> EstimatorCheckError:
    return EstimatorCheckError(f"check_estimator({getattr(cls, '__name__', cls)}): '{check}' failed: {why}")


def _fit(cls, check: str, robot_name: str, estimator: Estimator | None = None):
    robot, ds, ds_val = check_datasets(cls, robot_name)
    est = estimator if estimator is not None else cls()
    problem = IdentificationProblem(robot.structure(), ds)
    try:
        model = est.fit(problem)
    except Exception as exc:
        raise _fail(cls, check, f"fit raised {type(exc).__name__}: {exc}") from exc
    return robot, problem, model, ds_val


def _predict(cls, check: str, model, ds) -> np.ndarray:
    try:
        return np.asarray(model.predict_torque(ds.q, ds.qd, ds.qdd))
    except Exception as exc:
        raise _fail(cls, check, f"predict_torque raised {type(exc).__name__}: {exc}") from exc


# ------------------------------------------------------------------------------------- checks
def check_default_constructible(cls, robot: str = "planar3r") -> None:
    name = "default_constructible"
    if not (isinstance(cls, type) and issubclass(cls, Estimator)):
        raise _fail(cls, name, "not a subclass of robotid_sim.identification.Estimator")
    if not isinstance(cls.name, str) or not cls.name:
        raise _fail(cls, name, "the class attribute 'name' (the registered name) is empty")
    if not (isinstance(cls.Options, type) and issubclass(cls.Options, EstimatorOptions)):
        raise _fail(cls, name, "the options must be a nested class 'Options' derived from EstimatorOptions")
    own_init = next((k for k in cls.__mro__ if "__init__" in vars(k)), Estimator)
    if own_init is not Estimator:
        raise _fail(
            cls,
            name,
            f"{own_init.__name__} defines __init__; declare the options in a nested 'Options' class instead "
            "(the base constructor validates and stores them)",
        )
    try:
        cls()
    except Exception as exc:
        raise _fail(
            cls, name, f"{cls.__name__}() raised {type(exc).__name__}: {exc}; every option needs a default"
        ) from exc


def check_options_round_trip(cls, robot: str = "planar3r") -> None:
    name = "options_round_trip"
    est = cls()
    try:
        params = est.get_params()
    except Exception as exc:
        raise _fail(
            cls,
            name,
            f"get_params() raised {type(exc).__name__}: {exc}; every field of 'Options' must be an attribute "
            "of the estimator",
        ) from exc
    try:
        json.dumps(params)
    except TypeError as exc:
        raise _fail(cls, name, f"get_params() is not JSON-able: {exc}") from exc
    try:
        again = cls.from_options(**params).get_params()
    except Exception as exc:
        raise _fail(cls, name, f"from_options(**get_params()) raised {type(exc).__name__}: {exc}") from exc
    if again != params:
        raise _fail(cls, name, f"from_options(**get_params()) gives {again}, not {params}")


def check_unknown_option_is_a_clear_error(cls, robot: str = "planar3r") -> None:
    name = "unknown_option_is_a_clear_error"
    bogus = "no_such_option_xyz"
    try:
        cls.from_options(**{bogus: 1})
    except ConfigError as exc:
        if bogus not in str(exc):
            raise _fail(cls, name, f"the ConfigError does not name the option: {exc}") from exc
        return
    except Exception as exc:
        raise _fail(cls, name, f"raised {type(exc).__name__}, not ConfigError: {exc}") from exc
    raise _fail(cls, name, f"from_options({bogus}=1) was accepted")


def check_predictions_have_shape_n_by_dof(cls, robot: str = "planar3r") -> None:
    name = "predictions_have_shape_n_by_dof"
    _, problem, model, ds_val = _fit(cls, name, robot)
    if not isinstance(model, IdentifiedModel):
        raise _fail(cls, name, f"fit returned {type(model).__name__}, not an IdentifiedModel")
    tau = _predict(cls, name, model, ds_val)
    expected = (ds_val.n_samples, problem.n_dof)
    if tau.shape != expected:
        raise _fail(cls, name, f"predict_torque returned shape {tau.shape}, expected (N, n) = {expected}")
    if not np.all(np.isfinite(tau)):
        raise _fail(cls, name, "predict_torque returned NaN or inf")
    if model.estimator != cls.name or model.options != cls().get_params():
        raise _fail(cls, name, "the model is not stamped with the estimator's name and options")


def check_fit_does_not_mutate_the_problem(cls, robot: str = "planar3r") -> None:
    name = "fit_does_not_mutate_the_problem"
    rob, ds, _ = check_datasets(cls, robot)
    ds = copy.deepcopy(ds)
    problem = IdentificationProblem(rob.structure(), ds)
    before = {k: np.array(getattr(problem.dataset, k)) for k in ("t", "q", "qd", "qdd", "tau")}
    sha, K = problem.structure.sha256, problem.base.K.copy()
    try:
        cls().fit(problem)
    except Exception as exc:
        raise _fail(cls, name, f"fit raised {type(exc).__name__}: {exc}") from exc
    changed = [k for k, v in before.items() if not np.array_equal(v, getattr(problem.dataset, k))]
    if changed:
        raise _fail(cls, name, f"fit modified the problem's data {changed}; work on copies")
    problem.structure.__dict__.pop("sha256", None)
    if problem.structure.sha256 != sha or not np.array_equal(problem.base.K, K):
        raise _fail(cls, name, "fit modified the problem's robot structure or base parameters")


def check_options_only_from_the_constructor(cls, robot: str = "planar3r") -> None:
    name = "options_only_from_the_constructor"
    est = cls()
    attributes = dict(vars(est))
    _, _, first, ds_val = _fit(cls, name, robot, est)
    after = {k: v for k, v in vars(est).items() if not k.endswith("_")}  # scikit-learn's fitted attributes
    if set(after) != set(attributes) or any(not _same(after[k], attributes[k]) for k in attributes):
        changed = sorted(
            k
            for k in set(after) | set(attributes)
            if k not in attributes or k not in after or not _same(after[k], attributes[k])
        )
        raise _fail(
            cls,
            name,
            f"fit changed the estimator's attributes {changed}; options come from the "
            "constructor and results go in the returned model",
        )
    _, _, second, _ = _fit(cls, name, robot, cls.from_options(**est.get_params()))
    if not np.array_equal(_predict(cls, name, first, ds_val), _predict(cls, name, second, ds_val)):
        raise _fail(
            cls,
            name,
            "two estimators with the same options give different models: fit depends on "
            "something other than its options and the problem (seed randomness with an option)",
        )


def check_save_load_identical(cls, robot: str = "planar3r") -> None:
    name = "save_load_identical"
    _, _, model, ds_val = _fit(cls, name, robot)
    expected = _predict(cls, name, model, ds_val)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            model.save(Path(tmp) / "run" / "models" / "model.json")
        except Exception as exc:
            raise _fail(cls, name, f"save raised {type(exc).__name__}: {exc}") from exc
        moved = Path(tmp) / "elsewhere"
        shutil.move(str(Path(tmp) / "run"), moved)
        try:
            loaded = load_model(moved / "models" / "model.json")
        except Exception as exc:
            raise _fail(cls, name, f"load_model after moving the folder raised {type(exc).__name__}: {exc}") from exc
    if type(loaded) is not type(model) or not loaded == model:
        raise _fail(cls, name, "the loaded model is not equal to the saved one")
    if not np.array_equal(_predict(cls, name, loaded, ds_val), expected):
        raise _fail(cls, name, "the loaded model's predictions differ from the saved model's")


def check_recovers_truth_without_noise(cls, robot: str = "planar3r") -> None:
    name = "recovers_truth_without_noise"
    if getattr(cls, "biased", False):
        return
    rob, _, model, ds_val = _fit(cls, name, robot)
    tau = _predict(cls, name, model, ds_val)
    error = np.linalg.norm(tau - ds_val.truth.tau) / np.linalg.norm(ds_val.truth.tau)
    if not error < TRUTH_TOLERANCE:
        raise _fail(
            cls,
            name,
            f"relative validation torque error {error:.3g} on noise-free data (tolerance "
            f"{TRUTH_TOLERANCE:g}); declare 'biased = True' if the method is biased by design",
        )
    if isinstance(model, LinearParameterModel):
        truth = rob.base_parameters().true_values()
        perr = np.linalg.norm(model.base_values() - truth) / np.linalg.norm(truth)
        if not perr < TRUTH_TOLERANCE:
            raise _fail(cls, name, f"relative base-parameter error {perr:.3g} on noise-free data")


def _same(a, b) -> bool:
    try:
        return bool(np.array_equal(a, b)) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else a == b
    except Exception:
        return a is b


CHECKS: tuple[Callable[..., None], ...] = (
    check_default_constructible,
    check_options_round_trip,
    check_unknown_option_is_a_clear_error,
    check_predictions_have_shape_n_by_dof,
    check_fit_does_not_mutate_the_problem,
    check_options_only_from_the_constructor,
    check_save_load_identical,
    check_recovers_truth_without_noise,
)


def estimator_checks(cls, robot: str = "planar3r") -> list[tuple[str, Check]]:
    """(check name, ``check(cls)``) for every check, bound to ``robot``; the first must pass first."""
    return [(c.__name__.removeprefix("check_"), functools.partial(c, robot=robot)) for c in CHECKS]


def check_estimator(cls, robot: str = "planar3r") -> None:
    """Run every check on the estimator class ``cls``; raise :class:`EstimatorCheckError` on the first failure.

    Args:
        cls: the estimator class (a subclass of :class:`~robotid_sim.identification.Estimator`).
        robot: the bundled robot whose exact data the checks use.
    """
    for _, check in estimator_checks(cls, robot):
        check(cls)


def parametrize_with_checks(classes, robot: str = "planar3r"):
    """A ``pytest.mark.parametrize`` over (estimator class, check) with readable ids ``ols-options_round_trip``."""
    import pytest

    params = [
        pytest.param(cls, check, id=f"{getattr(cls, 'name', cls.__name__)}-{label}")
        for cls in classes
        for label, check in estimator_checks(cls, robot)
    ]
    return pytest.mark.parametrize("estimator, check", params)

"""Identified model kinds: predictions, fast dynamics, self-contained saves, equality, no truth for estimators."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.dynamics.forward import forward_dynamics_from_inverse
from robotid_sim.identification import (
    BaseParameterModel,
    FeatureLibrary,
    FeatureLibraryModel,
    History,
    IdentificationProblem,
    MLPCorrection,
    ResidualModel,
    StandardParameterModel,
    load_model,
)
from robotid_sim.testing import exact_datasets


@pytest.fixture(scope="module")
def planar():
    robot, ds, ds_val = exact_datasets("planar3r")
    return robot, IdentificationProblem(robot, ds), ds_val


def _models(robot, problem):
    """One model of each built-in kind, all exact or close to the truth of ``robot``."""
    structure = robot.structure()
    truth = robot.base_parameters().true_values()
    base = BaseParameterModel.from_problem(
        problem,
        truth,
        np.diag(np.full(len(truth), 1e-6)),
        estimator="x",
        options={"a": 1},
        diagnostics={"iterations": 3},
        history=History(np.arange(3.0), np.tile(truth, (3, 1)), problem.base.names),
    )
    standard = StandardParameterModel(structure, robot.true_parameters())
    library = FeatureLibrary.parse(
        ["qdd1", "qdd2", "qdd3", "cos(q2)*qdd1", "sin(q2)*qd1*qd2", "sign(qd1)", "qd3^2", "1"], 3
    )
    coefficients = np.random.default_rng(0).normal(size=(3, len(library)))
    features = FeatureLibraryModel(library, coefficients, joint_names=robot.joint_names)
    rng = np.random.default_rng(1)
    correction = MLPCorrection(
        ("q", "qd"),
        (rng.normal(size=(8, 6)), rng.normal(size=(3, 8))),
        (rng.normal(size=8), rng.normal(size=3)),
        "tanh",
        np.zeros(6),
        np.ones(6),
        np.full(3, 0.1),
    )
    residual = ResidualModel(base, correction)
    return {"base_linear": base, "standard_linear": standard, "feature_library": features, "residual": residual}


@pytest.mark.parametrize("kind", ["base_linear", "standard_linear", "feature_library", "residual"])
def test_each_kind_round_trips_after_its_folder_is_moved(kind, planar, tmp_path):
    robot, problem, ds_val = planar
    model = _models(robot, problem)[kind]
    assert model.kind == kind
    path = model.save(tmp_path / "run" / "models" / "m.json")
    assert path.with_suffix(".npz").is_file()
    shutil.move(tmp_path / "run", tmp_path / "moved")
    loaded = load_model(tmp_path / "moved" / "models" / "m.json")
    assert type(loaded) is type(model) and loaded == model
    args = (ds_val.q, ds_val.qd, ds_val.qdd)
    assert np.array_equal(loaded.predict_torque(*args), model.predict_torque(*args))
    assert loaded.predict_torque(*args).shape == (ds_val.n_samples, 3)
    document = json.loads((tmp_path / "moved" / "models" / "m.json").read_text())
    assert document["kind"] == kind and "robotid_sim" not in json.dumps(document.get("arrays", {}))


def test_equality_is_by_value(planar):
    robot, problem, _ = planar
    a, b = _models(robot, problem)["base_linear"], _models(robot, problem)["base_linear"]
    assert a == b and a is not b
    assert a != a.with_values(a.values * 1.01)
    assert a != _models(robot, problem)["standard_linear"]
    with pytest.raises(TypeError):
        hash(a)


def test_linear_models_predict_the_truth_and_map_to_base_values(planar):
    robot, problem, ds_val = planar
    models = _models(robot, problem)
    truth = robot.base_parameters().true_values()
    for kind in ("base_linear", "standard_linear"):
        m = models[kind]
        assert np.allclose(m.predict_torque(ds_val.q, ds_val.qd, ds_val.qdd), ds_val.truth.tau, rtol=0, atol=1e-9)
        assert np.allclose(m.base_values(), truth, rtol=0, atol=1e-10)


@pytest.mark.parametrize("kind", ["base_linear", "standard_linear", "feature_library", "residual"])
def test_forward_dynamics_equals_the_n_plus_one_call_construction(kind, planar):
    robot, problem, ds_val = planar
    model = _models(robot, problem)[kind]
    q, qd, tau = ds_val.q[:200], ds_val.qd[:200], ds_val.tau[:200]
    reference = forward_dynamics_from_inverse(model.predict_torque, q, qd, tau)
    assert np.allclose(model.forward_dynamics(q, qd, tau), reference, rtol=1e-10, atol=1e-10)
    assert np.allclose(model.predict_torque(q, qd, model.forward_dynamics(q, qd, tau)), tau, atol=1e-8)


def test_fast_forward_dynamics_on_hyper9_matches_the_generic_path(robots):
    robot = robots["hyper9"]
    base = robot.base_parameters()
    model = BaseParameterModel(robot.structure(), base.independent, base.true_values() * 1.1)
    q, qd, qdd = robot.random_states(np.random.default_rng(3), 20)
    tau = robot.inverse_dynamics(q, qd, qdd)
    reference = forward_dynamics_from_inverse(model.predict_torque, q, qd, tau)
    assert np.allclose(model.forward_dynamics(q, qd, tau), reference, rtol=1e-10, atol=1e-10)
    assert np.allclose(model.forward_dynamics(q[0], qd[0], tau[0]), reference[:1], rtol=1e-10, atol=1e-10)


def test_a_changed_robot_is_refused_naming_the_difference(planar, tmp_path):
    robot, problem, _ = planar
    path = _models(robot, problem)["base_linear"].save(tmp_path / "m.json")
    assert load_model(path, robot="planar3r").estimator == "x"  # same robot: accepted
    urdf = (rid.bundled_robots()["planar3r"] / "robot.urdf").read_text()
    joint2 = urdf.index('<joint name="joint2"')
    start = urdf.index('xyz="', joint2) + len('xyz="')
    end = urdf.index('"', start)
    edited = urdf[:start] + "0.45 0 0" + urdf[end:]
    (tmp_path / "edited.urdf").write_text(edited)
    shutil.copy(rid.bundled_robots()["planar3r"] / "robot.yaml", tmp_path / "edited.yaml")
    with pytest.raises(
        rid.ModelError,
        match=r"joints\.joint2\.origin_translation: \[.*\] in the model, "
        r"\[0\.45, 0\.0, 0\.0\] in the robot",
    ):
        load_model(path, robot=tmp_path / "edited.urdf")


def test_tampered_or_mismatched_files_are_refused(planar, tmp_path):
    robot, problem, _ = planar
    models = _models(robot, problem)
    a = models["base_linear"].save(tmp_path / "a.json")
    models["standard_linear"].save(tmp_path / "b.json")
    shutil.copy(tmp_path / "b.npz", tmp_path / "a.npz")
    with pytest.raises(rid.DataError, match="does not match the SHA-256"):
        load_model(a)
    (tmp_path / "a.npz").unlink()
    with pytest.raises(rid.DataError, match="array file .* is missing"):
        load_model(a)
    doc = json.loads((tmp_path / "b.json").read_text())
    doc["arrays"]["file"] = "../../etc/passwd.npz"
    (tmp_path / "c.json").write_text(json.dumps(doc))
    with pytest.raises(rid.ConfigError, match="plain .npz file name beside the model"):
        load_model(tmp_path / "c.json")
    doc = json.loads((tmp_path / "b.json").read_text())
    doc["kind"] = "nonexistent"
    (tmp_path / "d.json").write_text(json.dumps(doc))
    with pytest.raises(rid.ConfigError, match="unknown model kind 'nonexistent'"):
        load_model(tmp_path / "d.json")


def test_feature_library_is_parsed_never_evaluated():
    lib = FeatureLibrary.parse(["sin(q1)*qdd2", "qd1^2", "1"], 2)
    assert lib.names == ["sin(q1)*qdd2", "qd1^2", "1"]
    for bad in ["__import__('os')", "q3", "log(q1)", "q1**2"]:
        with pytest.raises(rid.ConfigError, match="feature"):
            FeatureLibrary.parse([bad], 2)
    model = FeatureLibraryModel(lib, np.array([[2.0, 0.0, -1.0], [0.0, 0.5, 0.0]]))
    assert model.equations() == ["tau1 = 2*sin(q1)*qdd2 - 1", "tau2 = 0.5*qd1^2"]
    q = np.array([[0.3, 0.1]])
    assert np.allclose(model.predict_torque(q, [[1.0, 0.0]], [[0.0, 2.0]]), [[2 * np.sin(0.3) * 2 - 1, 0.5]])


def test_the_feature_matrix_is_each_features_product_of_factors_one_sample_or_a_block_at_a_time(monkeypatch):
    """FeatureLibrary.evaluate takes the products a block of features at a time (products of different lengths, a
    factor shared by features, the constant 1): the same matrix as each feature's own product, in a block of any
    size and for one sample at a time (a model in a control loop)."""
    from robotid_sim.identification import features as features_module

    texts = ["1", "sin(q1)*qdd2", "sin(q1)^2*qd2*exp(-(qd1/0.1)^2)", "qd1", "fwd(qd2)*abs(q2)", "sin(q1)"]
    library = FeatureLibrary.parse(texts, 2)
    rng = np.random.default_rng(3)
    q, qd, qdd = rng.normal(size=(3, 7, 2))
    signals = {"q": q, "qd": qd, "qdd": qdd}
    expected = np.column_stack([np.prod([f.evaluate(signals) for f in ft.factors] or [np.ones(7)], axis=0)
                                for ft in library.features])  # fmt: skip
    assert np.array_equal(library.evaluate(q, qd, qdd), expected)
    rows = [library.evaluate(q[k : k + 1], qd[k : k + 1], qdd[k : k + 1]) for k in range(7)]
    assert np.array_equal(np.vstack(rows), expected)
    monkeypatch.setattr(features_module, "_PRODUCT_BLOCK", 10)  # blocks of one feature for 7 samples
    assert np.array_equal(library.evaluate(q, qd, qdd), expected)


def test_a_history_goes_to_the_npz_and_the_json_stays_small(planar, tmp_path):
    robot, problem, _ = planar
    truth = robot.base_parameters().true_values()
    K = 12_000  # a 60 s EKF at 200 Hz
    history = History(
        np.arange(K) / 200.0,
        truth + np.random.default_rng(0).normal(size=(K, len(truth))),
        problem.base.names,
        unit="s",
    )
    model = BaseParameterModel.from_problem(problem, truth, history=history)
    path = model.save(tmp_path / "ekf.json")
    assert path.stat().st_size < 20_000
    loaded = load_model(path)
    assert np.array_equal(loaded.history.values, history.values) and loaded.history.unit == "s"


def test_an_estimator_cannot_reach_the_truth(robots):
    """Walk everything reachable from the problem an estimator gets: no true parameter value is there."""
    robot = robots["planar3r"]
    theta = robot.true_parameters() * 1.2345  # distinctive values, still physically consistent
    marked = robot.with_parameters(theta)
    ds = rid.simulate(marked, {"type": "fourier", "harmonics": 3, "base_frequency": 0.2, "seed": 2}, duration=2.0)
    problem = IdentificationProblem(marked, ds)
    assert not hasattr(problem, "robot") and not hasattr(problem, "true_base_values")
    assert problem.dataset.truth is None and ds.truth is not None
    secret = set(np.round(theta[np.abs(theta) > 1e-9], 12)) | set(np.round(marked.base_parameters().true_values(), 12))
    seen, stack, found = set(), [problem], []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, str | bytes | type | int | bool | type(None)):
            continue
        seen.add(id(obj))
        if isinstance(obj, float | np.floating | np.ndarray):
            values = np.round(np.atleast_1d(np.asarray(obj, float)).ravel(), 12)
            found += [v for v in values if v in secret]
            continue
        if isinstance(obj, dict):
            stack += list(obj.values()) + list(obj.keys())
        elif isinstance(obj, list | tuple | set):
            stack += list(obj)
        elif hasattr(obj, "__dict__"):
            stack += list(vars(obj).values())
    assert found == []
    with pytest.raises(rid.ModelError, match="holds no true values"):
        problem.base.true_values()


def test_a_plugin_model_kind_loads_in_a_fresh_process(tmp_path, monkeypatch):
    """A model kind registered by an installed plugin is found by load_model in a new interpreter."""
    pkg = tmp_path / "site" / "rid_kind_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import numpy as np\n"
        "from robotid_sim.hookspecs import hookimpl\n"
        "from robotid_sim.identification import IdentifiedModel\n\n"
        "class Gravityless(IdentifiedModel):\n"
        "    kind = 'gravityless'\n"
        "    def __init__(self, inertia, joint_names=('a', 'b')):\n"
        "        self.inertia = np.asarray(inertia, float)\n"
        "        self._init_common(joint_names)\n"
        "    def predict_torque(self, q, qd, qdd):\n"
        "        return np.asarray(qdd, float) * self.inertia\n"
        "    def _state(self):\n"
        "        return {'note': 'tau = I qdd'}, {'inertia': self.inertia}\n"
        "    @classmethod\n"
        "    def _from_state(cls, data, arrays):\n"
        "        return cls(arrays['inertia'], data['joint_names'])\n\n"
        "@hookimpl\n"
        "def register_model_kinds(register):\n"
        "    register('gravityless', Gravityless)\n"
    )
    dist = tmp_path / "site" / "rid_kind_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rid-kind-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[robotid_sim]\nkind_plugin = rid_kind_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    from robotid_sim import plugins

    plugins.reset_plugin_manager()
    try:
        model = plugins.get_model_kind("gravityless")([2.0, 3.0], ["j1", "j2"])
        model.estimator = "manual"
        path = model.save(tmp_path / "g.json")
    finally:
        plugins.reset_plugin_manager()
    code = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[2]);"
        "from robotid_sim import load_model; m = load_model(sys.argv[1]);"
        "print(type(m).__name__, m.estimator, m.predict_torque(np.zeros((1, 2)), np.zeros((1, 2)), [[1.0, 1.0]]).tolist())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "site")], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "Gravityless manual [[2.0, 3.0]]"


def test_the_problem_carries_the_excitation_segments(robots):
    robot = robots["planar3r"]
    exc = {
        "type": "sequence",
        "parts": [
            {"type": "hold", "pose": [0.0, 0.0, 0.0], "duration": 0.5, "label": "static"},
            {
                "type": "single_joint_sine",
                "hold": [0.0, 0.0, 0.0],
                "joint": 2,
                "amplitude": 0.3,
                "frequency": 1.0,
                "cycles": 1,
            },
        ],
    }
    ds = rid.simulate(robot, exc)
    segments = IdentificationProblem(robot, ds).segments
    assert [s.label for s in segments][0] == "static" and segments[0].end == pytest.approx(0.5)
    assert segments[-1].joint == 2

"""BIRDy's Monte Carlo protocol as a sweep (issue 30, points 4–5): closed-loop data, initial estimates drawn
around the truth, BIRDy's figures of merit (d_beta, d_tau, d_q, divergence) and the bundled birdy_tx40 sweep;
bad fields are one line and exit code 2 before any work; the task hashes of every other sweep are unchanged."""

from __future__ import annotations

import argparse
import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from robotid_sim.cli import add_sweep_parser, run_sweep_command
from robotid_sim.errors import ConfigError
from robotid_sim.identification.lmi import standard_consistency
from robotid_sim.report.sweep import birdy_text
from robotid_sim.robot import load_robot
from robotid_sim.sim.closed_loop_data import NOISE_PRESETS
from robotid_sim.sweep import load_sweep_config, parse_sweep_config, protocol
from robotid_sim.sweep.merit import (
    position_error,
    protocol_rows,
    reference_errors,
    torque_error,
)
from robotid_sim.sweep.protocol import draw_initial, is_diverged, symmetric_relative_error
from robotid_sim.sweep.runner import build_cells, check_sweep
from robotid_sim.sweep.tasks import run_cell

#: a closed-loop sweep small enough to run in a test: three_axis under its own PID for 0.5 s at a 1 kHz loop,
#: one preset, two initial estimates × one noise realisation, ols on both of BIRDy's data sets
TINY = {
    "name": "tiny_birdy",
    "robots": ["three_axis"],
    "excitations": {"f": {"type": "fourier", "harmonics": 2, "base_frequency": 2.0, "seed": 1, "margin": 0.3}},
    "data": {
        "closed_loop": {
            "duration": 0.5,
            "sample_rate_hz": 1000,
            "controller": {"kp": [400, 300, 100], "kd": [20, 15, 5], "ki": [0, 0, 0], "control_rate_hz": 1000},
            "trim": 5,
            "cutoff_hz": 100,
        }
    },
    "noise": ["standardNoise"],
    "initial_estimates": {"count": 2, "relative_std": 0.15, "seed": 4},
    "repetitions": 1,
    "estimators": ["ols", {"name": "ols", "label": "ols_f", "filtered": True}],
}


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers())
    return parser.parse_args(["sweep", *argv])


def test_bundled_birdy_tx40_sweep_is_birdys_protocol():
    config = load_sweep_config("birdy_tx40")
    assert config.robots == ["tx40"] and config.data is not None
    assert set(config.noise.values()) == set(NOISE_PRESETS)  # BIRDy's six, by name (test_birdy_data.py)
    assert config.initial_estimates.relative_std == 0.15 and config.data.closed_loop.duration == 10
    labels = {e.display for e in config.estimators}
    assert {"ols", "ols_f", "wls_f", "irls_f", "idim_tls_f", "idim_ml", "idim_iv", "didim", "pc_idim_iv"} <= labels
    regularised = {e.options.get("regularization") for e in config.estimators if e.name == "lmi_wls"}
    assert regularised == {"euclidean", "log_det", "constant_pullback"}
    assert all(e.filtered == e.display.endswith("_f") for e in config.estimators)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"noise": ["veryHighNoise"]}, "noise preset 'veryHighNoise': with data.closed_loop give a BIRDy preset name"),
        ({"initial_estimates": {"count": 2, "relative_std": 0}}, "relative_std"),
        ({"initial_estimates": {"count": 0}}, "count"),
        ({"data": None}, "noise preset 'standardNoise' names a BIRDy preset, which needs closed-loop data"),
        (
            {"data": None, "noise": {"tau": {"tau": {"std": 0.1}}}},
            "estimator 'ols_f': 'filtered: true' selects BIRDy's prefiltered closed-loop data",
        ),
        ({"validation": {"trajectory_horizon": 0.2}}, "'validation.trajectory_horizon' does not apply"),
        ({"data": {"closed_loop": {"duration": 1, "trim": 1}}}, "trim must be at least 2"),
        ({"data": {"closed_loop": {"sample_rate_hz": 100, "cutoff_hz": 50}}}, "below the Nyquist frequency 50"),
    ],
)
def test_bad_protocol_fields_are_one_line(change, message):
    with pytest.raises(ConfigError) as info:
        parse_sweep_config({**TINY, **change})
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"noise": ["noSuchPreset"]}, "BIRDy preset name (oldNoise, lowPositionNoise"),
        (  # an estimator that re-simulates the closed loop, given open-loop data
            {
                "data": None,
                "noise": {"tau": {"tau": {"std": 0.1}}},
                "robots": ["three_axis"],
                "estimators": ["didim"],
            },
            "estimator 'didim' needs closed-loop data",
        ),
        ({"data": {"closed_loop": {**TINY["data"]["closed_loop"], "controller": None}}}, "has no default PID gains"),
        (
            {"data": {"closed_loop": {**TINY["data"]["closed_loop"], "sample_rate_hz": 300}}},
            "must divide the control rate",
        ),
    ],
)
def test_cli_refuses_a_bad_protocol_with_exit_code_2_before_any_work(tmp_path, capsys, change, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**TINY, **change}))
    assert run_sweep_command(_parse([str(path), "--out", str(tmp_path / "out"), "--no-progress"])) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_initial_estimates_are_consistent_and_reproducible_by_seed(monkeypatch):
    robot = load_robot("tx40")
    structure, truth = robot.structure(), robot.true_parameters()
    draws = [draw_initial(structure, truth, 0.15, 7, i) for i in range(3)]
    assert all(standard_consistency(structure, d).consistent for d in draws)
    np.testing.assert_array_equal(draws[1], draw_initial(structure, truth, 0.15, 7, 1))  # same seed, same index
    assert not np.array_equal(draws[0], draws[1]) and not np.array_equal(
        draws[0], draw_initial(structure, truth, 0.15, 8, 0)
    )
    ratio = np.divide(draws[0], truth, out=np.ones_like(truth), where=truth != 0)
    assert np.all(draws[0][truth == 0] == 0) and 0.02 < np.std(ratio[truth != 0]) < 0.3
    # 'RefSd' by hand: the first draw of the generator seeded (seed, index), kept when it is consistent
    z = np.random.default_rng([7, 2]).standard_normal(truth.shape)
    if standard_consistency(structure, truth * (1 + 0.15 * z)).consistent:
        np.testing.assert_allclose(draws[2], truth * (1 + 0.15 * z))
    monkeypatch.setattr(protocol, "MAX_DRAWS", 2 * protocol.DRAW_BATCH)
    with pytest.raises(ConfigError, match="no physically consistent draw"):
        draw_initial(structure, -truth, 0.15, 0, 0)  # negative masses: never consistent


def test_d_beta_d_tau_d_q_and_divergence_by_hand():
    # d_beta: 100 · 2/3 · (0/2 + 1/3 + 0) with the both-zero term counting 0
    assert symmetric_relative_error([1.0, 2.0, 0.0], [1.0, 1.0, 0.0]) == pytest.approx(100 * 2 / 3 * (1 / 3))
    truth, initial = np.array([1.0, 0.0]), np.array([1.0, 1.0])  # initial error 1
    assert is_diverged([1.0, 51.0], truth, initial) and not is_diverged([1.0, 49.0], truth, initial)
    assert is_diverged([np.nan, 0.0], truth) and not is_diverged([1e6, 0.0], truth)  # no initial: non-finite only
    # d_tau: samples τ = (3, 4) and (1, 0); W β = (3, 4) and (0, 0): 100 · mean(0/5, 1/1) = 50
    W = np.array([[[3.0], [4.0]], [[0.0], [0.0]]])
    assert torque_error(W, np.array([[3.0, 4.0], [1.0, 0.0]]), np.array([1.0])) == pytest.approx(50.0)
    assert position_error(np.array([[3.0, 4.0], [0.0, 2.0]]), np.array([[3.0, 4.0], [0.0, 1.0]])) == pytest.approx(25)


def _record(estimator, noise, values, diverged=False, **fields):
    return {
        "robot": "r",
        "excitation": "e",
        "noise": noise,
        "estimator": estimator,
        "status": "ok",
        "diverged": diverged,
        "base_names": ["a", "b"],
        "base_true": [1.0, 2.0],
        "base_values": values,
        "d_beta": symmetric_relative_error(values, [1.0, 2.0]),
        "fit_time_s": 0.5,
        "iterations": fields.get("iterations"),
        "model_evaluations": fields.get("model_evaluations"),
        "physically_consistent": fields.get("consistent", True),
    }


def test_figures_per_method_and_preset_leave_diverged_runs_out():
    records = [
        _record("m", "p", [1.0, 2.0], iterations=4, model_evaluations=10),
        _record("m", "p", [3.0, 2.0], iterations=6, model_evaluations=20, consistent=False),
        _record("m", "p", [1e9, 2.0], diverged=True, iterations=99),
        {**_record("m", "p", [1.0, 2.0]), "status": "failed"},
    ]
    (row,) = protocol_rows(records, None, {}, {})
    assert (row["runs"], row["failed"], row["diverged"]) == (4, 1, 1)
    assert row["divergence_rate"] == pytest.approx(1 / 3)
    assert row["d_beta_mean"] == pytest.approx(np.mean([0.0, 100 * 2 / 2 * (2 / 4)]))  # (0 + 50) / 2
    assert (row["iterations"], row["model_evaluations"], row["consistent"]) == (5.0, 15.0, 0.5)
    assert row["d_tau"] is None and row["d_q"] is None  # open loop: no closed-loop reference
    long = {**row, "estimator": "pc_wls_constant_pullback", "noise": "highPositionTorqueNoise", "d_q": math.inf}
    long |= {"iterations": 9900.0, "model_evaluations": 2613600.0, "d_tau": 1234.5}  # a filter's counts
    text = birdy_text([row, long])
    assert max(len(line) for line in text.splitlines()) <= 80
    assert all(figure in text for figure in ("inf", "9.9e+03", "2.61e+06", "1.23e+03"))


def test_existing_sweeps_keep_their_task_hashes():
    # computed with the code before BIRDy's protocol was added (issue 30): its fields are hashed only when given
    ids = [e["task_id"] for c in build_cells(load_sweep_config("small"), Path(".")) for e in c["estimators"]]
    assert ids[:3] == ["3dac00bc8e561cae4f426c88", "d885b29797204be54c8438dc", "ac5ecc3419a594678c148f34"]
    assert hashlib.sha256("".join(ids).encode()).hexdigest()[:16] == "caf873b4fe2e904f"


def test_more_initial_estimates_reuse_the_results_of_the_first_ones():
    def ids(count):
        config = parse_sweep_config({**TINY, "initial_estimates": {**TINY["initial_estimates"], "count": count}})
        (cell,) = build_cells(config, Path("."))
        return [(e["label"], e["initial"]["index"], e["task_id"]) for e in cell["estimators"]]

    two, three = ids(2), ids(3)
    assert set(two) < set(three) and len(three) == 6 and len({t for *_, t in three}) == 6


@pytest.fixture(scope="module")
def tiny_cell():
    config = parse_sweep_config(TINY)
    check_sweep(config, Path("."))
    (cell,) = build_cells(config, Path("."))
    return config, cell, run_cell(cell)


def test_a_closed_loop_cell_runs_each_estimator_from_each_initial_estimate(tiny_cell):
    config, cell, records = tiny_cell
    assert [(r["estimator"], r["initial"]) for r in records] == [("ols", 0), ("ols", 1), ("ols_f", 0), ("ols_f", 1)]
    assert len({e["task_id"] for e in cell["estimators"]}) == 4 and {r["status"] for r in records} == {"ok"}
    robot = load_robot("three_axis")
    base = robot.base_parameters()
    for r in records:
        assert r["d_beta"] == pytest.approx(symmetric_relative_error(r["base_values"], r["base_true"]))
        theta0 = draw_initial(robot.structure(), robot.true_parameters(), 0.15, 4, r["initial"])
        assert r["initial_error"] == pytest.approx(np.linalg.norm(base.K @ theta0 - base.true_values()))
        assert r["iterations"] is None and isinstance(r["physically_consistent"], bool)
    ols = [r for r in records if r["estimator"] == "ols"]
    ols_f = [r for r in records if r["estimator"] == "ols_f"]
    assert ols[0]["base_values"] == ols[1]["base_values"]  # a one-step estimator ignores θ₀: fitted once
    assert ols[0]["base_values"] != ols_f[0]["base_values"]  # the filtered data set is another one


def test_the_truth_scores_zero_on_the_noise_free_closed_loop_reference(tiny_cell):
    from robotid_sim.sweep.merit import closed_loop_reference

    config, cell, _ = tiny_cell
    robot = load_robot("three_axis")
    reference = closed_loop_reference(robot, cell["excitation"], cell["data"])
    truth = np.asarray(robot.base_parameters().true_values(), float)
    rows = [{"robot": "three_axis", "excitation": "f", "noise": n, "estimator": "m", "d_tau": None} for n in "ab"]
    means = {("three_axis", "f", "a", "m"): (reference["names"], truth)}
    means[("three_axis", "f", "b", "m")] = (reference["names"], truth * 1.5)
    reference_errors(rows, means, robot, reference)
    assert rows[0]["d_tau"] < 1e-6 and rows[0]["d_q"] == pytest.approx(0.0, abs=1e-9)
    assert rows[1]["d_tau"] > 1.0 and (rows[1]["d_q"] > 0 or math.isinf(rows[1]["d_q"]))

"""Issue 8: no user error ends in a traceback; data and robot must match.

Every bad input gets one line ``error: ...`` naming the problem (and the fix), exit code 2, no
traceback and no output file. Each CLI case below was a bug report; the unit tests below them pin
the checks of the dataset loader, the identification problem, the model loader and the
excitation/noise configs.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.io
from helpers import run_cli

import robotid_sim as rid
from robotid_sim import cli
from robotid_sim.errors import ConfigError, DataError, ModelError
from robotid_sim.excitation import excitation_from_config
from robotid_sim.identification import BaseParameterModel, IdentificationProblem, load_model
from robotid_sim.identification import model as model_module
from robotid_sim.identification.problem import check_data_matches_robot
from robotid_sim.sim.dataset import Dataset, Signals, load_dataset, load_dataset_for_robot

ROOT = Path(__file__).parents[1]


# ------------------------------------------------------------------------------------ fixtures
def _smooth_dataset(n_dof: int = 3, n: int = 60, names=None, metadata=None, truth: bool = False) -> Dataset:
    t = np.arange(n) * 0.01
    k = np.arange(1, n_dof + 1)
    q = np.sin(np.outer(t, k))
    qd = np.cos(np.outer(t, k)) * k
    qdd = -np.sin(np.outer(t, k)) * k**2
    tau = 2.0 * q + 0.1 * k
    return Dataset(
        t,
        q,
        qd,
        qdd,
        tau,
        truth=Signals(q, qd, qdd, tau) if truth else None,
        joint_names=names,
        metadata=metadata or {},
    )


def _write_npz_raw(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, blob in members.items():
            archive.writestr(name, blob)
    return path


def _npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A folder with every bad input file the CLI cases use, and a short three_axis recording."""
    root = tmp_path_factory.mktemp("user_errors")
    three = rid.simulate("three_axis", duration=0.3, rate_hz=100)
    three.save(root / "three_axis.npz")
    three.save(root / "three_axis.csv")
    (root / "bad.yaml").write_text("tau: {std: [0.1\n")
    (root / "empty.yaml").write_text("")
    (root / "list.yaml").write_text("- 1\n- 2\n")
    (root / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (root / "noise_unknown_key.yaml").write_text("tau: {sdt: 0.1}\n")
    (root / "noise_std_length.yaml").write_text("tau: {std: [0.1, 0.2]}\n")
    (root / "noise_bool.yaml").write_text("tau: {std: true}\n")
    (root / "exc_ten.yaml").write_text("type: polynomial\nrandom_waypoints: ten\n")
    (root / "layout_bad.yaml").write_text("units: {q: gradians}\n")
    (root / "exc_seed.yaml").write_text("type: polynomial\nrandom_waypoints: 3\nseed: -5\n")
    (root / "exc_type.yaml").write_text("type: chirp\n")
    (root / "binary.csv").write_bytes(bytes(range(256)) * 4)
    header = "t,q_joint1,q_joint2,q_joint3,tau_joint1,tau_joint2,tau_joint3"
    (root / "latin1.csv").write_bytes(f"{header}\n0,1,1,1,2,2,2\n0.01,1,1,1,2,2,2\n# caf\xe9\n".encode("latin-1"))
    (root / "garbage.npz").write_bytes(b"this is not a zip archive" * 10)
    (root / "garbage.mat").write_bytes(b"\x00\x01 not a MATLAB file" * 20)
    np.savez(root / "empty.npz")
    scipy.io.savemat(root / "empty.mat", {})
    t = np.arange(20) * 0.01
    np.savez(root / "complex.npz", t=t, q=np.ones((20, 3)) + 1j, tau=np.ones((20, 3)))
    np.savez(root / "boolean.npz", t=t, q=np.ones((20, 3), bool), tau=np.ones((20, 3)))
    header, *rows = (root / "three_axis.csv").read_text().splitlines()
    (root / "renamed.csv").write_text("\n".join([header.replace("_joint", "_axis"), *rows]) + "\n")
    (root / "afile").write_text("a file, not a folder\n")
    (root / "taken.npz").write_bytes(b"already here")
    (root / "taken.json").write_text("{}\n")
    (root / "hopfield_c.yaml").write_text(
        "name: wrong_c\nrobot: planar3r\nsimulation: {duration: 1.0, rate_hz: 100}\n"
        "estimators:\n  - {name: hopfield, options: {c: [1.0, 2.0]}}\n"
    )
    run = root / "run_bad"
    run.mkdir()
    (run / "metrics.json").write_text('[{"estimator": "ols", ')
    return root


SIM = ["simulate", "--robot", "planar3r", "--duration", "0.2", "--rate", "100"]
IDENT = ["identify", "--robot", "three_axis", "--estimator", "ols"]

# (id, arguments, pattern the error line must match)
CLI_CASES = [
    ("rate_zero", [*SIM[:-2], "--rate", "0", "--out", "o.npz"], r"--rate must be a finite number > 0 Hz, got 0"),
    ("rate_nan", [*SIM[:-2], "--rate", "nan", "--out", "o.npz"], r"--rate must be a finite number > 0"),
    ("rate_not_divisor", [*SIM[:-2], "--rate", "300", "--out", "o.npz"], r"must divide the physics rate 1000 Hz"),
    ("duration_negative", [*SIM[:3], "--duration", "-1", "--out", "o.npz"], r"--duration must be a finite number > 0"),
    ("seed_negative", [*SIM, "--seed", "-5", "--out", "o.npz"], r"--seed must be a whole number >= 0, got -5"),
    ("noise_missing", [*SIM, "--noise", "missing.yaml", "--out", "o.npz"], r"--noise file not found: missing.yaml"),
    ("noise_bad_yaml", [*SIM, "--noise", "bad.yaml", "--out", "o.npz"], r"--noise file bad.yaml is not valid YAML"),
    ("noise_empty", [*SIM, "--noise", "empty.yaml", "--out", "o.npz"], r"empty.yaml is empty.*'\{\}' for no noise"),
    ("noise_binary", [*SIM, "--noise", "binary.yaml", "--out", "o.npz"], r"binary.yaml is not a YAML text file"),
    ("noise_not_mapping", [*SIM, "--noise", "list.yaml", "--out", "o.npz"], r"list.yaml must hold a mapping"),
    (
        "noise_unknown_key",
        [*SIM, "--noise", "noise_unknown_key.yaml", "--out", "o.npz"],
        r"'noise.tau': unknown key\(s\) \['sdt'\]; valid keys: \['snr_db', 'std'\]",
    ),
    (
        "noise_std_wrong_length",
        [*SIM, "--noise", "noise_std_length.yaml", "--out", "o.npz"],
        r"'std' has 2 values but the robot has 3 joints",
    ),
    (
        "noise_boolean",
        [*SIM, "--noise", "noise_bool.yaml", "--out", "o.npz"],
        r"'noise.tau'.*option 'std' must be a number .*got True",
    ),
    (
        "excitation_random_waypoints_ten",
        [*SIM, "--excitation", "exc_ten.yaml", "--out", "o.npz"],
        r"'random_waypoints' must be a whole number >= 2, got 'ten'",
    ),
    (
        "excitation_seed_negative",
        [*SIM, "--excitation", "exc_seed.yaml", "--out", "o.npz"],
        r"'seed' must be a whole number >= 0, got -5",
    ),
    ("excitation_missing", [*SIM, "--excitation", "nope.yaml", "--out", "o.npz"], r"--excitation file not found"),
    (
        "excitation_empty",
        [*SIM, "--excitation", "empty.yaml", "--out", "o.npz"],
        r"--excitation file empty.yaml is empty",
    ),
    ("excitation_unknown_type", [*SIM, "--excitation", "exc_type.yaml", "--out", "o.npz"], r"unknown excitation type"),
    ("out_no_folder", [*SIM, "--out", "nowhere/o.npz"], r"folder 'nowhere' does not exist"),
    ("out_parent_is_a_file", [*SIM, "--out", "afile/o.npz"], r"'afile' is not a folder"),
    ("out_unknown_suffix", [*SIM, "--out", "o.txt"], r"has '.txt'; the suffix picks the format"),
    ("out_exists", [*SIM, "--out", "taken.npz"], r"'taken.npz' already exists; refusing to overwrite it"),
    ("unknown_robot", ["simulate", "--robot", "r2d2", "--out", "o.npz"], r"unknown robot 'r2d2'"),
    (
        "data_of_another_robot",
        ["identify", "--data", "three_axis.npz", "--robot", "planar3r", "--out", "m.json"],
        r"recorded on robot 'three_axis' \(joint1, joint2, joint3\) but is being identified with robot 'planar3r'",
    ),
    (
        "csv_of_another_robot",
        ["identify", "--data", "three_axis.csv", "--robot", "planar3r"],
        r"recorded on robot 'three_axis'.*robot 'planar3r'",
    ),
    ("options_bad_json", [*IDENT, "--data", "three_axis.npz", "--options", "{bad"], r"--options is not valid JSON"),
    (
        "options_not_object",
        [*IDENT, "--data", "three_axis.npz", "--options", "[8]"],
        r"--options must be a JSON object",
    ),
    (
        "option_wrong_type",
        ["identify", "--robot", "three_axis", "--estimator", "irls", "--data", "three_axis.npz"]
        + ["--options", '{"threshold": "eight"}'],
        r"estimator 'irls': option 'threshold'",
    ),
    (
        "irls_zero_iterations",  # returned OLS labelled irls
        ["identify", "--robot", "three_axis", "--estimator", "irls", "--data", "three_axis.npz"]
        + ["--options", '{"max_iterations": 0}'],
        r"option 'max_iterations': Input should be greater than or equal to 1",
    ),
    (
        "unknown_estimator",
        ["identify", "--robot", "three_axis", "--data", "three_axis.npz", "--estimator", "magic"],
        r"unknown estimator 'magic'",
    ),
    ("data_missing", [*IDENT, "--data", "nothing.npz"], r"--data 'nothing.npz' does not exist"),
    ("validate_missing", [*IDENT, "--data", "three_axis.npz", "--validate", "no.npz"], r"--validate 'no.npz' does not"),
    ("lock_joint_malformed", [*IDENT, "--data", "three_axis.npz", "--lock-joint", "joint1"], r"--lock-joint 'joint1'"),
    ("lock_joint_unknown", [*IDENT, "--data", "three_axis.npz", "--lock-joint", "elbow=0.1"], r"elbow"),
    (
        "options_for_two_estimators",
        [*IDENT, "--estimator", "wls", "--data", "three_axis.npz", "--options", '{"a": 1}'],
        r"--options applies to one estimator",
    ),
    ("deadband_negative", [*IDENT, "--data", "three_axis.npz", "--deadband", "-1"], r"velocity_deadband"),
    ("layout_bad_unit", [*IDENT, "--data", "three_axis.npz", "--layout", "layout_bad.yaml"], r"gradians"),
    ("data_binary_csv", [*IDENT, "--data", "binary.csv"], r"'binary.csv' is not a CSV text file"),
    ("data_latin1_csv", [*IDENT, "--data", "latin1.csv"], r"'latin1.csv' is not UTF-8 text"),
    ("data_renamed_csv_columns", [*IDENT, "--data", "renamed.csv"], r"has joint columns for axis1, axis2, axis3"),
    ("data_garbage_npz", [*IDENT, "--data", "garbage.npz"], r"garbage.npz' is not an .npz file"),
    ("data_garbage_mat", [*IDENT, "--data", "garbage.mat"], r"cannot read 'garbage.mat' as .mat"),
    ("data_empty_npz", [*IDENT, "--data", "empty.npz"], r"'empty.npz' holds none of the dataset arrays"),
    ("data_empty_mat", [*IDENT, "--data", "empty.mat"], r"'empty.mat' holds none of the dataset arrays"),
    ("data_complex", [*IDENT, "--data", "complex.npz"], r"'q' .*must hold real numbers .* complex values"),
    ("data_boolean", [*IDENT, "--data", "boolean.npz"], r"'q' .*must hold real numbers .* boolean values"),
    ("model_out_exists", [*IDENT, "--data", "three_axis.npz", "--out", "taken.json"], r"'taken.json' already exists"),
    ("model_out_suffix", [*IDENT, "--data", "three_axis.npz", "--out", "m.txt"], r"--out 'm.txt' has '.txt'"),
    ("model_out_no_folder", [*IDENT, "--data", "three_axis.npz", "--out", "no/m.json"], r"folder 'no' does not exist"),
    # an option of the wrong length for the robot: refused before the simulation (Estimator.check_structure)
    ("estimator_option_length", ["run", "hopfield_c.yaml"], r"hopfield': option 'c' must be one positive number or 18"),
    ("report_missing_folder", ["report", "no_run"], r"'no_run' does not exist; give a run folder"),
    ("report_on_a_file", ["report", "afile"], r"'afile' is a file, not a run folder"),
    # a damaged metrics.json in a complete run folder: test_run_safety.py
    (
        "report_incomplete_folder",
        ["report", "run_bad"],
        r"run_bad is not a complete run folder \(missing \['scenario.yaml'",
    ),
]
if Path("/proc/self").is_dir():  # a folder nobody can write in, even root
    CLI_CASES += [
        ("out_unwritable", [*SIM, "--out", "/proc/o.npz"], r"cannot write in folder '/proc'"),
        ("model_out_unwritable", [*IDENT, "--data", "three_axis.npz", "--out", "/proc/m.json"], r"cannot write in"),
    ]


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


#: the cases also run as a real process (one per command and kind of input): exit status 2 from the interpreter
IN_A_PROCESS = ("rate_nan", "data_of_another_robot", "options_bad_json", "estimator_option_length", "report_on_a_file")


def _check_one_error_line(work: Path, before: set[str], code, out: str, err: str, pattern: str) -> None:
    import re

    assert code == 2, (code, err)
    assert "Traceback" not in err and "Traceback" not in out
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert re.search(pattern, errors[0]), errors[0]
    assert "bug" not in errors[0]
    assert _listing(work) == before  # nothing written, not even a temporary file
    assert not Path("/proc/o.npz").exists()


@pytest.mark.parametrize(("args", "pattern"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_user_error_gives_one_line_and_exit_code_2(work, args, pattern, monkeypatch, capsys):
    """Every case through the CLI's ``main`` in this process (a process per case costs about 1 s of imports)."""
    before = _listing(work)
    monkeypatch.chdir(work)
    try:
        code = cli.main(list(args))
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    captured = capsys.readouterr()
    _check_one_error_line(work, before, code, captured.out, captured.err, pattern)


@pytest.mark.parametrize(
    ("args", "pattern"),
    [c[1:] for c in CLI_CASES if c[0] in IN_A_PROCESS],
    ids=[c[0] for c in CLI_CASES if c[0] in IN_A_PROCESS],
)
def test_user_error_in_a_real_process_exits_with_status_2(work, args, pattern):
    before = _listing(work)
    result = run_cli(args, cwd=work, env_extra={"PYTHONPATH": str(ROOT)}, timeout=120)
    _check_one_error_line(work, before, result.returncode, result.stdout, result.stderr, pattern)


def test_an_unexpected_exception_is_one_line_naming_a_bug_and_debug_shows_the_traceback(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("something internal broke")

    monkeypatch.setattr(cli, "cmd_plugins", boom)
    assert cli.main(["plugins"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().count("\n") == 0 and "bug" in err and "--debug" in err and "something internal broke" in err
    assert cli.main(["plugins", "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: something internal broke" in err


def test_debug_shows_the_traceback_of_a_user_error_too(capsys):
    assert cli.main(["--debug", "identify", "--data", "x.npz", "--robot", "planar3r", "--options", "{bad"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "error: --options is not valid JSON" in err


def test_verbose_turns_pybullet_output_on(monkeypatch):
    from robotid_sim.sim import pybullet_sim

    calls = []
    monkeypatch.setattr(pybullet_sim, "set_verbose", calls.append, raising=False)
    assert cli.main(["--verbose", "plugins"]) == 0
    assert cli.main(["plugins", "-v"]) == 0
    assert calls == [True, True]


@pytest.mark.parametrize(
    ("robot", "estimator", "pattern"),
    [
        ("planar3r", {"name": "hopfield", "options": {"c": [1.0, 2.0]}}, r"'hopfield': option 'c' .* or 18"),
        ("planar3r", {"name": "ekf", "options": {"initial_parameters": [0.1] * 3}}, r"'initial_parameters' .* or 18"),
        ("planar3r", {"name": "two_loop", "options": {"alpha0": [1.0, 1.0]}}, r"'alpha0' has 2 values for 3 joints"),
        (
            "planar3r",
            {"name": "semiparametric", "options": {"rigid_body": {"name": "two_loop", "options": {"alpha0": [1, 1]}}}},
            r"'alpha0' has 2 values for 3 joints",
        ),
        (
            "hyper9",
            {"name": "semiparametric", "options": {"hidden": [4096, 4096], "per_joint": True}},
            r"stored weights",
        ),
        ("prrrp", {"name": "auto_features"}, r"joint\(s\) .*prismatic.* are not revolute"),
    ],
    ids=[
        "hopfield_c",
        "ekf_initial_parameters",
        "two_loop_alpha0",
        "semiparametric_rigid_body",
        "network",
        "prismatic",
    ],
)
def test_options_that_do_not_fit_the_robot_are_refused_before_anything_is_simulated(
    robot, estimator, pattern, monkeypatch
):
    from robotid_sim.scenario import plan as runner
    from robotid_sim.scenario.schema import Scenario

    def never(*_, **__):
        raise AssertionError("simulated before the options were checked")

    monkeypatch.setattr(runner, "simulate", never)
    scenario = Scenario.model_validate(
        {
            "name": "wrong_options",
            "robot": robot,
            "simulation": {"duration": 1.0, "rate_hz": 100},
            "estimators": [estimator],
        }
    )
    with pytest.raises(ConfigError, match=pattern):
        runner.prepare_run(scenario)


def test_an_explicit_empty_mapping_means_no_noise(work, tmp_path):
    (tmp_path / "none.yaml").write_text("{}\n")
    args = [*SIM, "--noise", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "d.npz")]
    result = run_cli(args, cwd=work, env_extra={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert result.returncode == 0, result.stderr
    ds = load_dataset(tmp_path / "d.npz")
    assert ds.metadata["noise"] == {"models": []}
    np.testing.assert_array_equal(ds.tau, ds.truth.tau)


# ------------------------------------------------------------------------- data and robot match
def test_three_axis_data_identified_as_planar3r_is_refused_naming_both(work):
    """Acceptance point of issue 8: same joint count and joint names, another robot."""
    ds = load_dataset(work / "three_axis.npz")
    with pytest.raises(DataError) as info:
        rid.identify(ds, "planar3r", estimator="ols")
    message = str(info.value)
    assert "recorded on robot 'three_axis' (joint1, joint2, joint3)" in message
    assert "identified with robot 'planar3r' (joint1, joint2, joint3)" in message
    assert "identify it with robot 'three_axis'" in message


def test_data_with_other_joint_names_is_refused(robots):
    ds = _smooth_dataset(names=["a", "b", "c"])
    with pytest.raises(DataError, match=r"recorded on joints a, b, c but robot 'planar3r' has joints joint1"):
        IdentificationProblem(robots["planar3r"], ds)


def test_data_with_joints_in_another_order_is_refused(robots):
    ds = _smooth_dataset(names=["joint2", "joint1", "joint3"])
    with pytest.raises(DataError, match=r"joints are in another order \(joint2, joint1, joint3\)"):
        IdentificationProblem(robots["planar3r"], ds)


def test_generic_joint_names_and_unnamed_robots_are_accepted(robots):
    arm6 = robots["arm6"].structure()  # joints j1 ... j6
    check_data_matches_robot(_smooth_dataset(n_dof=6), arm6)  # default names joint1 ... joint6
    check_data_matches_robot(_smooth_dataset(n_dof=6, names=[f"j{i}" for i in range(1, 7)]), arm6)
    check_data_matches_robot(_smooth_dataset(n_dof=6, metadata={"source": "a real-robot log"}), arm6)
    check_data_matches_robot(SimpleNamespace(q=np.zeros((5, 6)), qd=None, qdd=None, tau=None), arm6)
    with pytest.raises(DataError, match="has 3 joints but robot 'arm6' has 6"):
        check_data_matches_robot(_smooth_dataset(n_dof=3), arm6)


def test_csv_columns_are_matched_by_name_not_by_position(tmp_path, robots):
    ds = _smooth_dataset(names=["joint1", "joint2", "joint3"], metadata={"robot": "planar3r"})
    ds.save(tmp_path / "log.csv")
    header, *rows = (tmp_path / "log.csv").read_text().splitlines()
    columns = header.split(",")
    order = [0, 2, 1, 3, *range(4, len(columns))]  # q_joint2 before q_joint1, data moved along
    table = [r.split(",") for r in rows]
    (tmp_path / "reordered.csv").write_text(
        "\n".join(",".join(row[i] for i in order) for row in [columns, *table]) + "\n"
    )
    (tmp_path / "reordered.json").write_text((tmp_path / "log.json").read_text())
    loaded = load_dataset_for_robot(tmp_path / "reordered.csv", robots["planar3r"])
    np.testing.assert_array_equal(loaded.q, ds.q)
    np.testing.assert_array_equal(loaded.tau, ds.tau)
    assert loaded.joint_names == ["joint1", "joint2", "joint3"]
    IdentificationProblem(robots["planar3r"], loaded)  # accepted: same robot, same joints
    # read without the robot, the file order is kept and the problem refuses the order
    with pytest.raises(DataError, match="another order"):
        IdentificationProblem(robots["planar3r"], load_dataset(tmp_path / "reordered.csv"))


def test_csv_with_generic_columns_loads_for_a_robot_with_named_joints(tmp_path, robots):
    _smooth_dataset(n_dof=6).save(tmp_path / "log.csv")
    loaded = load_dataset_for_robot(tmp_path / "log.csv", robots["arm6"])
    assert loaded.joint_names == [f"joint{i}" for i in range(1, 7)]
    check_data_matches_robot(loaded, robots["arm6"].structure())


def test_csv_with_renamed_columns_names_both_lists(tmp_path, robots):
    _smooth_dataset(names=["x", "y", "z"]).save(tmp_path / "log.csv")
    with pytest.raises(DataError, match=r"joint columns for x, y, z but robot 'planar3r' has joints joint1"):
        load_dataset_for_robot(tmp_path / "log.csv", robots["planar3r"])


# ------------------------------------------------------------------------------------- datasets
@pytest.mark.parametrize(
    ("value", "what"),
    [(np.ones((10, 2)) + 1j, "complex"), (np.ones((10, 2), bool), "boolean"), (np.full((10, 2), "1.0"), "text")],
)
def test_dataset_refuses_signals_that_are_not_real_numbers(value, what):
    t = np.arange(10) * 0.1
    with pytest.raises(DataError, match=rf"'q' must hold real numbers \(N, n\), got {what} values"):
        Dataset(t, value, np.zeros((10, 2)), np.zeros((10, 2)), np.zeros((10, 2)))
    with pytest.raises(DataError, match=rf"'t' must hold real numbers \(N,\), got {what} values"):
        Dataset(value[:, 0], np.zeros((10, 2)), np.zeros((10, 2)), np.zeros((10, 2)), np.zeros((10, 2)))


def test_npz_reads_only_the_dataset_arrays(tmp_path):
    """An unused member is never read: here one that could only be unpickled."""
    ds = _smooth_dataset()
    ds.save(tmp_path / "d.npz")
    with zipfile.ZipFile(tmp_path / "d.npz", "a") as archive:
        archive.writestr("extra.npy", _npy(np.array([{"x": 1}], dtype=object), allow_pickle=True))
    assert np.array_equal(load_dataset(tmp_path / "d.npz").q, ds.q)


def test_npz_with_a_damaged_or_pickled_signal_names_it(tmp_path):
    t = np.arange(10) * 0.1
    _write_npz_raw(
        tmp_path / "p.npz",
        {"t.npy": _npy(t), "q.npy": _npy(np.array([None] * 10, dtype=object), True), "tau.npy": _npy(np.ones((10, 1)))},
    )
    with pytest.raises(DataError, match=r"array 'q' cannot be read without unpickling"):
        load_dataset(tmp_path / "p.npz")


def test_file_errors_name_the_file(tmp_path):
    np.savez(tmp_path / "short.npz", t=np.arange(5.0), q=np.zeros((4, 1)), tau=np.zeros((5, 1)))
    with pytest.raises(DataError, match=r"'.*short.npz': 'q' must have shape"):
        load_dataset(tmp_path / "short.npz")
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(DataError, match="is a folder, not a file"):
        load_dataset(tmp_path / "folder.csv")
    with pytest.raises(DataError, match="'joint_names' must be a list of strings"):
        load_dataset(tmp_path / "short.npz", joint_names="joint1")


def test_mat_reads_only_the_dataset_variables(tmp_path):
    t = np.arange(20) * 0.01
    scipy.io.savemat(tmp_path / "log.mat", {"t": t, "q": np.sin(t)[:, None], "tau": t[:, None], "notes": "x" * 50})
    assert load_dataset(tmp_path / "log.mat").n_dof == 1


# --------------------------------------------------------------------------------------- models
@pytest.fixture(scope="module")
def saved_model(tmp_path_factory, robots):
    structure = robots["planar3r"].structure()
    base = structure.base_parameters()
    values = np.linspace(0.5, 1.5, base.count)
    model = BaseParameterModel(structure, base.independent, values, np.eye(base.count) * 1e-4, estimator="ols")
    folder = tmp_path_factory.mktemp("model")
    return model.save(folder / "m.json")


def _edited(source: Path, tmp_path: Path, edit_json=None, edit_arrays=None) -> Path:
    data = json.loads(source.read_text())
    with np.load(source.with_suffix(".npz")) as z:
        arrays = {k: z[k] for k in z.files}
    if edit_json:
        edit_json(data)
    if edit_arrays:
        edit_arrays(arrays)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    blob = buffer.getvalue()
    (tmp_path / "e.npz").write_bytes(blob)
    data["arrays"].update(file="e.npz", sha256=hashlib.sha256(blob).hexdigest(), names=sorted(arrays))
    (tmp_path / "e.json").write_text(json.dumps(data))
    return tmp_path / "e.json"


def _set(key, value):
    return lambda d: d.__setitem__(key, value)


MODEL_CASES = [
    ("columns_out_of_range", _set("columns", [100, 101]), None, r"field 'columns' must be strictly increasing"),
    ("columns_not_integers", lambda d: d.__setitem__("columns", [c + 0.5 for c in d["columns"]]), None, r"'columns'"),
    ("columns_shifted", lambda d: d.__setitem__("columns", [c - 1 for c in d["columns"]]), None, r"'parameters'"),
    ("columns_missing", lambda d: d.pop("columns"), None, r"missing field 'columns'"),
    ("robot_missing", lambda d: d.pop("robot"), None, r"missing field 'robot'"),
    ("joint_names_missing", lambda d: d.pop("joint_names"), None, r"missing field 'joint_names'"),
    ("joint_names_short", _set("joint_names", ["joint1"]), None, r"'joint_names' lists 1 joints"),
    ("joint_names_other", _set("joint_names", ["a", "b", "c"]), None, r"differs from the joints of the embedded robot"),
    ("options_not_object", _set("options", [1]), None, r"field 'options' must be a JSON object"),
    ("values_inf", None, lambda a: a["values"].__setitem__(0, np.inf), r"array 'values' contains NaN or inf"),
    ("values_complex", None, lambda a: a.__setitem__("values", a["values"] + 1j), r"'values' must hold real"),
    ("values_boolean", None, lambda a: a.__setitem__("values", a["values"] > 1), r"'values' must hold real"),
    ("values_missing", None, lambda a: a.pop("values"), r"array 'values' is missing"),
    ("covariance_shape", None, lambda a: a.__setitem__("covariance", np.eye(2)), r"'covariance' must have shape"),
    ("covariance_nan", None, lambda a: a["covariance"].__setitem__((0, 0), np.nan), r"'covariance' contains NaN"),
]


@pytest.mark.parametrize(
    ("edit_json", "edit_arrays", "pattern"), [c[1:] for c in MODEL_CASES], ids=[c[0] for c in MODEL_CASES]
)
def test_load_model_names_the_file_and_the_field(saved_model, tmp_path, edit_json, edit_arrays, pattern):
    path = _edited(saved_model, tmp_path, edit_json, edit_arrays)
    with pytest.raises((ModelError, DataError, ConfigError), match=pattern) as info:
        load_model(path)
    assert str(path) in str(info.value)


def test_an_unedited_model_still_loads(saved_model, tmp_path):
    model = load_model(_edited(saved_model, tmp_path))
    assert model.joint_names == ["joint1", "joint2", "joint3"] and model.covariance is not None


def test_load_model_does_not_follow_an_array_file_link_out_of_its_folder(saved_model, tmp_path):
    outside, folder = tmp_path / "outside", tmp_path / "model"
    outside.mkdir()
    folder.mkdir()
    shutil.copy(saved_model.with_suffix(".npz"), outside / "m.npz")
    shutil.copy(saved_model, folder / "m.json")
    (folder / "m.npz").symlink_to(outside / "m.npz")
    with pytest.raises(DataError, match="array file 'm.npz' points outside"):
        load_model(folder / "m.json")


def test_load_model_refuses_an_oversized_array_file_before_reading_it(saved_model, tmp_path, monkeypatch):
    monkeypatch.setattr(model_module, "MAX_MODEL_ARRAY_BYTES", 100)
    with pytest.raises(DataError, match=r"more than a model's array file may be"):
        load_model(saved_model)


def test_load_model_refuses_a_binary_file(tmp_path):
    (tmp_path / "m.json").write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_model(tmp_path / "m.json")


# --------------------------------------------------------------------------- excitation configs
@pytest.mark.parametrize(
    ("config", "pattern"),
    [
        ({"type": "polynomial", "random_waypoints": "ten"}, r"'random_waypoints' must be a whole number >= 2"),
        ({"type": "polynomial", "random_waypoints": 2.5}, r"'random_waypoints' must be a whole number"),
        ({"type": "polynomial", "seed": -5}, r"'seed' must be a whole number >= 0, got -5"),
        ({"type": "polynomial", "margin": "wide"}, r"'margin' must be a number >= 0"),
        ({"type": "polynomial", "back_and_forth": "yes"}, r"'back_and_forth' must be true or false"),
        ({"type": "polynomial", "waypoints": [[0, 0], [1, 1]]}, r"'waypoints' must be a list of poses"),
        ({"type": "polynomial", "q_start": [0, 0, 0], "q_end": 5}, r"'q_end' must have shape \(3,\)"),
        ({"type": "fourier", "harmonics": "five"}, r"'harmonics' must be a whole number >= 1"),
        ({"type": "fourier", "seed": -5}, r"'seed' must be a whole number >= 0"),
        ({"type": "fourier", "base_frequency": "fast"}, r"'base_frequency' must be a number > 0"),
        ({"type": "fourier", "optimize": {"maxiter": "many"}}, r"'maxiter' must be a whole number >= 1"),
        ({"type": "stepwise", "n_poses": -1}, r"'n_poses' must be a whole number >= 1"),
        ({"type": "stepwise", "seed": -5}, r"'seed' must be a whole number >= 0"),
        ({"type": "sequential_sine", "cycles": "x"}, r"'cycles' must be a whole number >= 0"),
        ({"type": "hold", "pose": "home"}, r"'pose' must be a number or a list of numbers"),
        ({"type": "hold", "pose": [0, 0, 0], "duration": "long"}, r"'duration' must be a number >= 0"),
        ({"type": "sequence", "parts": "x"}, r"'parts' must be a non-empty list"),
        # absurd sizes: a numpy allocation traceback and a hang before the limits
        ({"type": "fourier", "harmonics": 1e8}, r"'harmonics' must be between 1 and 100, got 100000000.0"),
        (
            {"type": "polynomial", "random_waypoints": 10**8},
            r"'random_waypoints' must be between 2 and 1,000, got 100000000",
        ),
        (
            {"type": "sequence", "parts": [{"type": "hold", "pose": "x"}]},
            r"parts\[0\]: excitation 'hold': option 'pose'",
        ),
    ],
)
def test_excitation_option_of_the_wrong_type_names_the_field(robots, config, pattern):
    with pytest.raises(ConfigError, match=pattern):
        excitation_from_config(config, robots["planar3r"])

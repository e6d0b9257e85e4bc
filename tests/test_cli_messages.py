"""Issue 27, point 13 (messages that mislead): argparse errors, the CLI dead-band, output folders that cannot be
written, plugin names and a model saved under a known suffix.

Each case was a bug report: argparse printed 5-8 usage lines and ``robotid-sim identify: error: ...``; ``--deadband``
offered "a list of 3" and a NaN one an unreadable union error; ``--out /proc/x`` said "0 B free"; ``plugin new
class`` suggested 'class'; ``model.save("m.npz")`` wrote ``m.npz.json`` and ``m.npz.npz``.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import TINY_SCENARIO, cli_process, run_cli

from robotid_sim import cli
from robotid_sim.errors import ConfigError
from robotid_sim.identification import BaseParameterModel, load_model
from robotid_sim.plugin_kit import new_plugin, plugin_names
from robotid_sim.run_folder import output_root
from robotid_sim.scenario import parse_scenario, prepare_run

ROOT = Path(__file__).parents[1]
#: a folder nobody can create anything in, even root
UNWRITABLE = Path("/proc/robotid_sim_test")
needs_proc = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _cli_error(argv: list[str], folder: Path) -> str:
    """``robotid-sim ARGV`` in ``folder``, in a process: exit 2, one line ``error: ...`` (returned), no usage lines
    or traceback, nothing written."""
    before = _listing(folder)
    result = cli_process(argv, folder)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "usage:" not in result.stderr and "Traceback" not in result.stderr
    assert _listing(folder) == before
    return lines[0]


# ------------------------------------------------------------------------------------ argparse errors
ARGPARSE_CASES = [
    (["identify"], r"required: --data, --robot; see 'robotid-sim identify --help'"),
    (["identify", "--data", "x.npz", "--robot", "p", "--lowpass", "abc"], r"--lowpass: expected a number, got 'abc'"),
    (["rl-demo", "--timesteps", "1e15"], r"--timesteps: expected a whole number, got '1e15'; see 'robotid-sim rl-demo"),
    (["run", "--nope"], r"unrecognized arguments: --nope; see 'robotid-sim run --help'"),
    (["plugin", "new", "x", "--nope"], r"unrecognized arguments: --nope; see 'robotid-sim plugin new --help'"),
    (
        ["plugin", "new", "x", "--kind", "robot"],
        r"--kind: invalid choice: 'robot'.*see 'robotid-sim plugin new --help'",
    ),
    (["sweep", "--workers", "two"], r"--workers: expected a whole number, got 'two'; see 'robotid-sim sweep --help'"),
    (["bogus"], r"invalid choice: 'bogus'.*see 'robotid-sim --help'"),
    ([], r"required: a command \(run, simulate, .*sweep\); see 'robotid-sim --help'"),
    (["plugin"], r"required: a command \(new\); see 'robotid-sim plugin --help'"),
]


@pytest.mark.parametrize(("argv", "pattern"), ARGPARSE_CASES, ids=[" ".join(c[0]) or "nothing" for c in ARGPARSE_CASES])
def test_an_argparse_error_is_one_line_naming_the_flag_and_the_help(argv, pattern, tmp_path):
    line = _cli_error(argv, tmp_path)
    assert re.search(pattern, line), line


def test_an_argparse_error_in_a_real_process_is_one_line_with_status_2(tmp_path):
    before = _listing(tmp_path)
    result = run_cli(["simulate", "--robot", "planar3r"], cwd=tmp_path, env_extra={"PYTHONPATH": str(ROOT)})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: the following arguments are required: --out; see 'robotid-sim simulate --help'"
    )
    assert result.stdout == "" and _listing(tmp_path) == before


def test_help_still_prints_the_usage_and_exits_0(tmp_path):
    result = cli_process(["identify", "--help"], tmp_path)
    assert result.returncode == 0
    out = result.stdout
    assert out.startswith("usage: robotid-sim identify") and "--deadband" in out


# ------------------------------------------------------------------------------------ the dead-band
@pytest.mark.parametrize("value", ["nan", "-1", "inf", "abc", "0.1,0.2,0.3"])
def test_a_bad_cli_deadband_names_one_number_not_a_list(value, tmp_path):
    argv = ["identify", "--data", "x.npz", "--robot", "planar3r", f"--deadband={value}"]
    line = _cli_error(argv, tmp_path)
    assert "argument --deadband: expected one finite number >= 0" in line and f"got '{value}'" in line
    assert "a list of" not in line and "list[float]" not in line


@pytest.mark.parametrize(("value", "message"), [(float("nan"), "must be finite"), (-1.0, "must not be negative")])
def test_a_bad_scenario_deadband_is_one_readable_message(value, message):
    scenario = {"name": "t", "robot": "planar3r", "estimators": ["ols"]}
    with pytest.raises(ConfigError) as info:
        parse_scenario({**scenario, "identification": {"velocity_deadband": [0.1, value, 0.1]}}, "t")
    text = str(info.value)
    assert message in text and "list[float]" not in text and "valid list" not in text


def test_a_scenario_deadband_of_the_wrong_length_is_refused_before_simulating():
    scenario = {"name": "t", "robot": "planar3r", "estimators": ["ols"], "simulation": {"duration": 1.0}}
    scenario["identification"] = {"velocity_deadband": [0.1, 0.1]}
    with pytest.raises(ConfigError, match="velocity_deadband has 2 values but the robot has 3 joints"):
        prepare_run(parse_scenario(scenario, "t"))


# ------------------------------------------------------------------------------------ output folders
@needs_proc
@pytest.mark.parametrize("command", [["run", "tiny.yaml"], ["closed-loop", "--robot", "planar3r"]])
def test_an_output_folder_that_cannot_be_created_is_named_not_reported_as_a_full_disk(command, tmp_path):
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY_SCENARIO))
    line = _cli_error([*command, "--out", str(UNWRITABLE)], tmp_path)
    assert f"output folder '{UNWRITABLE}' cannot be created: cannot write in folder '/proc'" in line
    assert "free" not in line.replace("choose a writable folder", "")


@needs_proc
def test_plugin_new_into_a_folder_that_cannot_be_created_names_it(tmp_path):
    assert "cannot write in folder '/proc'" in _cli_error(
        ["plugin", "new", "my_ridge", "--out", str(UNWRITABLE / "sub")], tmp_path
    )


def test_output_root_under_a_file_names_the_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        output_root(tmp_path / "afile" / "runs")
    assert _listing(tmp_path) == {"afile"}


# ------------------------------------------------------------------------------------ plugin names
@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("class", "my_class"), ("Class", "my_class"), ("default", "my_default"), ("yes", "my_yes"), ("None", "none")],
)
def test_a_keyword_or_reserved_plugin_name_gets_a_valid_suggestion(name, suggestion, tmp_path):
    with pytest.raises(ConfigError, match=f"e.g. '{suggestion}'"):
        new_plugin(name, out=tmp_path)
    plugin_names(suggestion)  # the suggestion itself is accepted
    assert list(tmp_path.iterdir()) == []


def test_a_taken_plugin_name_gets_a_free_suggestion(tmp_path):
    with pytest.raises(ConfigError, match=r"'ols' is already registered.*e.g. 'my_ols'"):
        new_plugin("ols", out=tmp_path)


# ------------------------------------------------------------------------------------ model files
@pytest.fixture(scope="module")
def model(robots):
    structure = robots["planar3r"].structure()
    base = structure.base_parameters()
    return BaseParameterModel(structure, base.independent, np.linspace(0.5, 1.5, base.count), estimator="ols")


@pytest.mark.parametrize("name", ["m.npz", "m.json", "m"])
def test_a_model_saved_under_a_known_suffix_writes_name_json_and_name_npz(model, tmp_path, name):
    written = model.save(tmp_path / name)
    assert written == tmp_path / "m.json"
    assert _listing(tmp_path) == {"m.json", "m.npz"}
    assert load_model(tmp_path / name) == model


def test_identify_out_with_the_npz_name_is_understood():
    assert cli._model_output("m.npz") == Path("m.json")
    with pytest.raises(ConfigError, match=r"--out 'm.txt' has '.txt'.*give NAME, NAME.json or NAME.npz"):
        cli._model_output("m.txt")


@pytest.mark.parametrize(
    ("code", "fix"),
    [(errno.ENOSPC, "free some space"), (errno.EROFS, "read-only"), (errno.EACCES, "a folder you may write in")],
)
def test_an_os_error_names_the_file_and_the_fix(code, fix):
    message = cli._user_error_message(OSError(code, os.strerror(code), "runs/x/metrics.json"))
    assert message.startswith(f"cannot access 'runs/x/metrics.json': {os.strerror(code)}; ") and fix in message


def test_a_plugin_package_that_fails_to_write_leaves_no_folder_behind(tmp_path, monkeypatch):
    def full_disk(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError):
        new_plugin("my_ridge", out=tmp_path / "a" / "b", check_installed=False)
    assert list(tmp_path.iterdir()) == []

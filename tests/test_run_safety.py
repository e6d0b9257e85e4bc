"""Issue 8: nothing escapes or floods the run folder; resource limits; no leftovers; checks before work.

Each test is the regression test of a user's bug report: a label or name used as a path, ``report``
following names read from ``metrics.json`` or crashing on a corrupt one, unbounded durations and rates,
a YAML alias bomb, ``.partial-*`` folders left by SIGTERM or OOM, a wrong-length noise option caught only
after the identification simulation, and a required scenario ``name``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from helpers import TINY_SCENARIO, cli_process, run_cli

import robotid_sim as rid
from robotid_sim import run_folder
from robotid_sim.cli import main
from robotid_sim.errors import ConfigError
from robotid_sim.identification.problem import STACKED_REGRESSOR_COPIES
from robotid_sim.scenario import budget as budget_module
from robotid_sim.scenario import plan as runner
from robotid_sim.scenario.budget import RunBudget, estimate_run
from robotid_sim.scenario.schema import Scenario, load_scenario, parse_scenario
from robotid_sim.sim import cost as cost_module
from robotid_sim.sim.cost import simulation_cost
from robotid_sim.studies import run as study_run

TINY = TINY_SCENARIO


def _scenario(folder: Path, file_name: str = "scenario.yaml", **changes) -> Path:
    data = {**TINY, **changes}
    data = {k: v for k, v in data.items() if v is not None}
    path = folder / file_name
    path.write_text(yaml.safe_dump(data))
    return path


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def _alias_bomb() -> str:
    """About 500 bytes of YAML whose aliases expand to 9**9 (~390 million) nodes."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def _runs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.exists() else []


def _partials(root: Path) -> list[Path]:
    return sorted(root.glob(".partial-*")) if root.exists() else []


# --------------------------------------------------------------------------------------------------
# nothing leaves the run folder


@pytest.mark.parametrize(
    ("changes", "named", "process"),
    [
        ({"estimators": [{"name": "ols", "label": "../../../x"}]}, "estimator label '../../../x'", run_cli),
        ({"estimators": [{"name": "ols", "label": "ABSOLUTE"}]}, "estimator label 'ABSOLUTE'", cli_process),
        ({"name": "../x"}, "scenario name '../x'", cli_process),
    ],
    ids=["relative-label", "absolute-label", "dotdot-name"],
)
def test_a_label_or_name_that_is_a_path_is_refused_before_any_work(tmp_path, changes, named, process):
    """One case in a fresh interpreter, the others in a process forked from the test's (``helpers.cli_process``)."""
    work = tmp_path / "work"
    work.mkdir()
    elsewhere = tmp_path / "elsewhere" / "model"
    if "ABSOLUTE" in named:
        changes = {"estimators": [{"name": "ols", "label": str(elsewhere)}]}
        named = f"estimator label '{elsewhere}'"
    path = _scenario(work, **changes)
    before = _files(tmp_path)
    result = process(["run", str(path), "--out", "runs"], cwd=work, timeout=120, columns=400)
    assert result.returncode == 2, result.stderr
    lines = _error_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert named in lines[0] and "cannot be used as a file name" in lines[0]
    assert "Traceback" not in result.stderr
    assert _files(tmp_path) == before  # no run folder, no model anywhere, no folder created elsewhere
    assert not elsewhere.parent.exists()


def test_names_are_checked_in_python_too_and_labels_may_not_differ_only_in_case():
    with pytest.raises(ConfigError, match="estimator label 'a/b' cannot be used as a file name"):
        parse_scenario({**TINY, "estimators": [{"name": "ols", "label": "a/b"}]})
    with pytest.raises(ConfigError, match="estimator name '../ols' cannot be used"):
        parse_scenario({**TINY, "estimators": ["../ols"]})
    with pytest.raises(ConfigError, match=r"estimators appear twice: \['OLS', 'ols'\]"):
        parse_scenario({**TINY, "estimators": ["ols", {"name": "wls", "label": "OLS"}]})
    with pytest.raises(ConfigError, match="scenario name '.hidden'"):
        parse_scenario({**TINY, "name": ".hidden"})
    # a label that is a safe name is fine, even with dots
    assert (
        parse_scenario({**TINY, "estimators": [{"name": "ols", "label": "ols.v2"}]}).estimators[0].display == "ols.v2"
    )


@pytest.fixture(scope="module")
def finished_run(tiny_run) -> Path:
    return tiny_run  # the run of TINY (conftest.py)


@pytest.fixture()
def run_copy(finished_run, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy


def _report(run: Path, capsys) -> tuple[int, list[str]]:
    code = main(["report", str(run)])
    return code, _error_lines(capsys.readouterr().err)


def test_report_refuses_an_estimator_name_from_metrics_json_that_leaves_the_folder(run_copy, tmp_path, capsys):
    # a valid model planted where '../x' would lead: the old report read it
    shutil.copy(run_copy / "models" / "ols.json", tmp_path / "x.json")
    shutil.copy(run_copy / "models" / "ols.npz", tmp_path / "ols.npz")
    metrics = json.loads((run_copy / "metrics.json").read_text())
    metrics["estimators"][0]["estimator"] = "../x"
    (run_copy / "metrics.json").write_text(json.dumps(metrics))
    code, lines = _report(run_copy, capsys)
    assert code == 2
    assert len(lines) == 1 and "estimator name '../x' cannot be used as a file name" in lines[0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"estimator": "ols", "torque_rms', "metrics.json is damaged (not valid JSON"),
        ('{"estimator": "ols"}', "expected a mapping with metrics_version 2"),
        ('{"metrics_version": 2, "estimators": 5}', "'estimators' is not a list of rows"),
        ('[["ols"]]', "row 0 is not a mapping with an 'estimator'"),
        ('[{"estimator": 3}]', "estimator name 3 cannot be used as a file name"),
        ('[{"estimator": "ols", "rsd": ["a"]}]', "'rsd': expected a number or a list of numbers"),
        ('[{"estimator": "ols"}, {"estimator": "OLS"}]', "estimator 'OLS' appears twice"),
        ("[" * 100_000, "nested too deeply"),
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
    ],
    ids=[
        "truncated",
        "no-version",
        "section-not-a-list",
        "row-not-a-mapping",
        "name-not-a-string",
        "bad-value",
        "twice",
        "deep",
        "binary",
    ],
)
def test_report_on_a_corrupt_metrics_json_is_one_line_and_exit_2(run_copy, capsys, content, message):
    target = run_copy / "metrics.json"
    target.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, lines = _report(run_copy, capsys)
    assert code == 2
    assert len(lines) == 1 and message in lines[0], lines


def test_report_does_not_follow_a_link_out_of_the_run_folder(run_copy, tmp_path, capsys):
    outside = tmp_path / "outside.json"
    outside.write_text((run_copy / "truth.json").read_text())
    (run_copy / "truth.json").unlink()
    (run_copy / "truth.json").symlink_to(outside)
    code, lines = _report(run_copy, capsys)
    assert code == 2 and len(lines) == 1 and "points outside" in lines[0]


def test_report_on_a_corrupt_truth_or_scenario_file_is_one_line(run_copy, capsys):
    (run_copy / "truth.json").write_text('{"base_parameters": 5}')
    code, lines = _report(run_copy, capsys)
    assert code == 2 and len(lines) == 1 and "truth.json is malformed" in lines[0]
    shutil.copy(run_copy / "metrics.json", run_copy / "truth.json")
    (run_copy / "scenario.yaml").write_text(_alias_bomb())
    code, lines = _report(run_copy, capsys)
    assert code == 2 and len(lines) == 1 and "aliases expand to" in lines[0]


def test_every_file_of_a_run_folder_has_the_mode_open_gives(finished_run, tmp_path):
    """Models and datasets were written through mkstemp (0600) while the rest got 0666 less the umask."""
    probe = tmp_path / "probe"
    probe.write_text("x")
    expected = probe.stat().st_mode & 0o777
    modes = {p.relative_to(finished_run): p.stat().st_mode & 0o777 for p in finished_run.rglob("*") if p.is_file()}
    assert any(str(p).startswith("models") for p in modes) and any(str(p).startswith("data") for p in modes)
    assert {p: m for p, m in modes.items() if m != expected} == {}


def test_the_report_of_a_sound_run_folder_still_works(finished_run, capsys):
    assert main(["report", str(finished_run)]) == 0
    captured = capsys.readouterr()
    assert "ols" in captured.out and _error_lines(captured.err) == []


# --------------------------------------------------------------------------------------------------
# resource limits


def test_a_duration_of_1e5_s_is_refused_fast_with_its_memory_estimate(tmp_path, capsys, monkeypatch):
    """The reporter's machine: the run grew to 23 GB and was OOM-killed (memory limit pinned to 16 GiB)."""
    monkeypatch.setattr(budget_module, "memory_limit_bytes", lambda: 16 * 1024**3)
    path = _scenario(tmp_path, simulation={"rate_hz": 200, "duration": 1e5})
    start = time.perf_counter()
    code = main(["run", str(path), "--out", str(tmp_path / "runs")])
    elapsed = time.perf_counter() - start
    lines = _error_lines(capsys.readouterr().err)
    assert code == 2
    assert len(lines) == 1
    assert "this run would need about" in lines[0] and "GB of memory (limit 17.2 GB" in lines[0]
    assert "shorten simulation.duration" in lines[0]
    assert "allow_large" not in lines[0]  # more than the whole RAM: allow_large would not help
    assert not (tmp_path / "runs").exists()
    assert elapsed < 60  # generous: refused from arithmetic, nothing simulated


@pytest.mark.parametrize(
    ("simulation", "process"),
    [({"duration": 1e9}, run_cli), ({"rate_hz": 1e12, "dt": 1e-12}, cli_process), ({"dt": 1e-12}, cli_process)],
    ids=["duration-1e9", "rate-1e12", "dt-1e-12"],
)
def test_absurd_durations_and_rates_are_refused_without_a_traceback(tmp_path, simulation, process):
    """One case in a fresh interpreter, the others in a process forked from the test's (``helpers.cli_process``)."""
    path = _scenario(tmp_path, simulation={"rate_hz": 100, "duration": 3.0, **simulation})
    result = process(["run", str(path), "--out", "runs"], cwd=tmp_path, timeout=60, columns=400)
    assert result.returncode == 2, result.stderr
    lines = _error_lines(result.stderr)
    assert len(lines) == 1 and "this run would need about" in lines[0] and "of memory" in lines[0]
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_non_finite_numbers_are_refused_by_the_schema(tmp_path):
    path = tmp_path / "inf.yaml"
    path.write_text(yaml.safe_dump(TINY).replace("duration: 3.0", "duration: .inf"))
    with pytest.raises(ConfigError, match="field 'simulation.duration': Input should be a finite number"):
        load_scenario(path)


def test_the_budget_formula_and_its_limits():
    cost = simulation_cost(5, 10.0, 1e-3, 200.0)
    assert (cost.steps, cost.samples) == (10_000, 2_000)
    assert cost.working_bytes == 10_000 * 5 * 8 * cost_module.SIMULATION_VALUES_PER_STEP
    assert cost.data_bytes == 2_000 * 5 * 8 * cost_module.RECORDED_ARRAYS
    assert cost.seconds == pytest.approx(10_000 * cost_module.SECONDS_PER_STEP)
    run = estimate_run(cost, simulation_cost(5, 5.0, 1e-3, 200.0), n_base=9)
    assert isinstance(run, RunBudget) and run.memory_bytes < 100e6
    run.check()  # a small run passes
    with pytest.raises(ConfigError, match="must divide the physics rate"):
        simulation_cost(5, 1.0, 1e-3, 300.0)
    with pytest.raises(ConfigError, match="duration must be a finite number > 0"):
        simulation_cost(5, float("inf"), 1e-3, 100.0)
    huge = estimate_run(simulation_cost(5, 1e6, 1e-3, 100.0), cost, n_base=9)  # 1e9 steps: 1 TB, 11 h
    with pytest.raises(ConfigError, match=r"memory \(limit 1 GB, half.*and about 11.1 h of simulation \(limit 2 h\)"):
        huge.check(memory_limit=1e9)
    huge.check(allow_large=True, memory_limit=1e13)  # allow_large: no time limit
    with pytest.raises(ConfigError, match=r"limit 1 GB, this machine's RAM\)") as info:
        huge.check(allow_large=True, memory_limit=1e9)
    assert "allow_large" not in str(info.value)


def test_allow_large_is_suggested_only_when_the_run_fits_in_the_whole_ram(monkeypatch):
    monkeypatch.setattr(budget_module, "memory_limit_bytes", lambda: 1e9)
    cost = simulation_cost(5, 10.0, 1e-3, 200.0)
    run = estimate_run(cost, cost, n_base=9)
    for memory, suggested in ((1.5e9, True), (2.5e9, False)):
        with pytest.raises(ConfigError, match="of memory") as info:
            dataclasses.replace(run, memory_bytes=memory).check()
        assert ("simulation.allow_large: true" in str(info.value)) is suggested


def test_allow_large_lets_a_long_run_through_the_checks(monkeypatch):
    monkeypatch.setattr(budget_module, "memory_limit_bytes", lambda: 1024**4)  # 2 TiB with allow_large
    long = {**TINY, "simulation": {"rate_hz": 100, "duration": 1e6}}
    with pytest.raises(ConfigError, match="of simulation"):
        runner.prepare_run(parse_scenario(long))
    plan = runner.prepare_run(parse_scenario({**long, "simulation": {**long["simulation"], "allow_large": True}}))
    assert plan.duration == 1e6 and plan.budget.seconds > 7200


def test_a_run_whose_data_would_not_fit_on_the_disk_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(study_run.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9, 1000))
    with pytest.raises(ConfigError, match=r"data files would take about .* but only 1 kB are free"):
        rid.run_scenario(_scenario(tmp_path), out_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_a_yaml_alias_bomb_is_refused_fast(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb() + "name: bomb\nrobot: prrrp\nestimators: [ols]\n")
    assert path.stat().st_size < 1000
    result = run_cli(["run", str(path), "--out", "runs"], cwd=tmp_path, timeout=60, columns=400)
    assert result.returncode == 2
    lines = _error_lines(result.stderr)
    assert len(lines) == 1 and "its aliases expand to" in lines[0]
    assert not (tmp_path / "runs").exists()


def test_a_binary_scenario_file_is_refused(tmp_path, capsys):
    path = tmp_path / "scenario.yaml"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe" * 10)
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 2
    assert "is not a YAML text file" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# everything checked before the first simulation


@pytest.fixture()
def no_simulation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("simulate() was called: the scenario should have been refused before")

    monkeypatch.setattr(runner, "simulate", refuse)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"noise": {"tau": {"std": [0.1, 0.2, 0.3]}}}, "'std' has 3 values but the robot has 5 joints"),
        (
            {"validation": {"excitation": {"type": "polynomial", "random_waypoints": 0, "seed": 1}}},
            "random_waypoints",
        ),
        ({"excitation": {"type": "polynomial", "random_waypoints": 6, "durations": "auto"}}, "validation.excitation"),
        (
            {"preprocessing": {"lowpass_hz": 80}},
            "must be below the Nyquist frequency fs/2 = 50 Hz of the data (100 Hz)",
        ),
        ({"preprocessing": {"period_average": 3}}, "period_average needs a periodic (fourier) excitation"),
        (
            {
                "excitation": {"type": "fourier", "harmonics": 3, "base_frequency": 0.5, "periods": 2, "seed": 0},
                "simulation": {"rate_hz": 100},
                "preprocessing": {"period_average": 3},
            },
            "period_average = 3 but the data holds 2.00 periods",
        ),
        ({"simulation": {"rate_hz": 300}}, "must divide the physics rate"),
        ({"estimators": [{"name": "irls", "options": {"nonsense": 1}}]}, "nonsense"),
    ],
    ids=["noise-std", "validation-excitation", "no-seed", "lowpass", "period-kind", "periods", "rate", "option"],
)
def test_a_scenario_that_cannot_run_is_refused_before_the_first_simulation(tmp_path, no_simulation, changes, message):
    with pytest.raises(rid.RobotIdError) as info:
        rid.run_scenario(_scenario(tmp_path, **changes), out_dir=tmp_path / "runs")
    assert message in str(info.value)
    assert not (tmp_path / "runs").exists()


def test_an_output_folder_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "runs").write_text("not a folder")
    assert main(["run", str(_scenario(tmp_path)), "--out", str(tmp_path / "runs")]) == 2
    assert "is not a folder" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# leftovers


def test_sigterm_removes_the_partial_folder_and_the_next_run_works(tmp_path):
    # about 4 s of simulation: long enough to be interrupted in the middle
    path = _scenario(tmp_path, simulation={"rate_hz": 100, "duration": 150.0})
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "robotid_sim.cli", "run", str(path), "--out", "runs"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _partials(tmp_path / "runs"):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no .partial-* folder appeared"
            time.sleep(0.05)
        time.sleep(0.5)  # into the simulation
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "removed its partial folder" in err
    assert _partials(tmp_path / "runs") == [] and _runs(tmp_path / "runs") == []
    short = _scenario(tmp_path, file_name="short.yaml")
    assert main(["run", str(short), "--out", str(tmp_path / "runs")]) == 0  # in this process: the next run works
    assert len(_runs(tmp_path / "runs")) == 1 and _partials(tmp_path / "runs") == []


def test_sigterm_handler_is_installed_in_the_main_thread_only_and_restored():
    outer = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # whatever the test runner set, put back below
    try:
        with run_folder.sigterm_raises_system_exit():
            handler = signal.getsignal(signal.SIGTERM)
            assert callable(handler)
            with pytest.raises(SystemExit) as info:
                handler(signal.SIGTERM, None)
            assert info.value.code == 143
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # a second SIGTERM cannot cut the clean-up
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        seen = []

        def in_thread():
            with run_folder.sigterm_raises_system_exit():
                seen.append(signal.getsignal(signal.SIGTERM))

        thread = threading.Thread(target=in_thread)
        thread.start()
        thread.join()
        assert seen == [signal.SIG_DFL]
        # an application's own handler is left as it is
        signal.signal(signal.SIGTERM, lambda *_: None)
        own = signal.getsignal(signal.SIGTERM)
        with run_folder.sigterm_raises_system_exit():
            assert signal.getsignal(signal.SIGTERM) is own
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, outer)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _partial(root: Path, name: str, owner: dict | None) -> Path:
    folder = root / f".partial-{name}"
    (folder / "data").mkdir(parents=True)
    (folder / "scenario.yaml").write_text("name: x\n")
    if owner is not None:
        (folder / ".owner").write_text(json.dumps(owner))
    return folder


def test_the_next_run_removes_stale_partial_folders_and_runs_under_the_file_stem(tmp_path, caplog):
    root = tmp_path / "runs"
    host = socket.gethostname()
    dead = _partial(root, "killed-20200101-000000", {"pid": _dead_pid(), "host": host})
    live = _partial(root, "running-20200101-000000", {"pid": os.getpid(), "host": host})
    remote = _partial(root, "remote-20200101-000000", {"pid": _dead_pid(), "host": host + "-elsewhere"})
    path = _scenario(tmp_path, file_name="my_study.yaml", name=None)
    with caplog.at_level("WARNING", logger="robotid_sim.run_folder"):
        run = rid.run_scenario(path, out_dir=root)
    assert not dead.exists()
    assert live.exists() and remote.exists()  # a concurrent run, another machine's run
    messages = [r.getMessage() for r in caplog.records]
    assert any(str(dead) in m and "no longer running" in m for m in messages), messages
    assert run.name.startswith("my_study-") and run.parent == root
    assert not (run / ".owner").exists()
    assert load_scenario(path).name == "my_study"


def test_stale_partial_rules_for_missing_owners_reused_pids_and_zombies(tmp_path):
    root = tmp_path / "runs"
    fresh = _partial(root, "fresh-20200101-000000", None)
    old = _partial(root, "old-20200101-000000", None)
    week_ago = time.time() - 7 * 86400
    os.utime(old, (week_ago, week_ago))
    reused = None
    if run_folder.process_start(os.getpid()) is not None:  # Linux: the start time tells a reused pid apart
        reused = _partial(
            root, "reused-20200101-000000", {"pid": os.getpid(), "start": 1, "host": socket.gethostname()}
        )
    garbage = _partial(root, "garbage-20200101-000000", None)
    (garbage / ".owner").write_text("{not json")
    killed = subprocess.Popen([sys.executable, "-c", "pass"])  # exits, not reaped yet: a zombie
    zombie = None
    try:
        deadline = time.monotonic() + 30
        while (run_folder.process_stat(killed.pid) or ("?",))[0] not in ("Z", "?") and time.monotonic() < deadline:
            time.sleep(0.02)
        if (run_folder.process_stat(killed.pid) or ("?",))[0] == "Z":
            zombie = _partial(root, "zombie-20200101-000000", {"pid": killed.pid, "host": socket.gethostname()})
        removed = run_folder.remove_stale_partials(root)
    finally:
        killed.wait()
    if zombie is not None:  # killed by OOM, its parent not yet told: dead all the same
        assert not zombie.exists() and zombie in removed
    assert fresh.exists() and garbage.exists()  # no owner record, but touched recently
    assert not old.exists() and old in removed
    if reused is not None:
        assert not reused.exists() and reused in removed
    assert run_folder.remove_stale_partials(tmp_path / "missing") == []


def test_a_partial_folder_records_its_owner(tmp_path):
    partial, final = run_folder.new_run_dir(tmp_path, "x")
    owner = json.loads((partial / ".owner").read_text())
    assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
    assert partial.name == f".partial-{final.name}" and not final.exists()
    assert run_folder.remove_stale_partials(tmp_path) == []  # this process is alive


# --------------------------------------------------------------------------------------------------
# scenario name


def test_the_scenario_name_defaults_to_the_file_stem(tmp_path):
    path = _scenario(tmp_path, file_name="lab_arm.v2.yaml", name=None)
    assert load_scenario(path).name == "lab_arm.v2"
    bad = _scenario(tmp_path, file_name="my study.yaml", name=None)
    with pytest.raises(ConfigError, match=r"scenario name 'my study' cannot be used.*add a 'name' field"):
        load_scenario(bad)
    named = _scenario(tmp_path, file_name="other.yaml", name="given")
    assert load_scenario(named).name == "given"
    assert Scenario(robot="prrrp", estimators=["ols"]).name == "scenario"  # built in Python


def test_a_run_whose_estimators_stream_the_regressor_budgets_no_stacked_copy(monkeypatch):
    """ols, wls and irls never stack the base regressor (issue 10): a long hyper9 identification that
    would not fit with a stacked regressor is accepted; one estimator that stacks it makes the budget count it."""
    from robotid_sim.identification import Estimator

    cost = simulation_cost(9, 100.0, 1e-3, 1000.0)
    formed, streamed = estimate_run(cost, cost, 91), estimate_run(cost, cost, 91, forms_regressor=False)
    stacked = cost.samples * 9 * 8 * (STACKED_REGRESSOR_COPIES * 91 + budget_module.REGRESSOR_WORK_VALUES)
    assert formed.peak_phase == "identifying" and formed.memory_bytes > stacked
    assert streamed.peak_phase != "identifying" and streamed.memory_bytes < formed.memory_bytes / 10
    monkeypatch.setattr(budget_module, "memory_limit_bytes", lambda: 2e9)
    long = {**TINY, "robot": "hyper9", "excitation": "default", "estimators": ["ols", "wls", "irls"]}
    long["simulation"] = {"rate_hz": 1000, "duration": 150.0}
    plan = runner.prepare_run(parse_scenario(long))  # 150,000 samples: 4.4 GB stacked, 0.2 GB streamed
    assert plan.budget.memory_bytes < 1e9

    class Stacking(Estimator):
        name = "stacking"

        def _fit(self, problem):
            raise AssertionError("not run")

    registered = runner.get_estimator
    monkeypatch.setattr(runner, "get_estimator", lambda name: Stacking if name == "stacking" else registered(name))
    with pytest.raises(ConfigError, match="of memory"):
        runner.prepare_run(parse_scenario({**long, "estimators": ["ols", "stacking"]}))

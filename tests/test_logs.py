"""Real-robot logs (issue 9): foreign layouts load into a Dataset, several recordings stack as experiments."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.io

import robotid_sim as rid
from robotid_sim.errors import ConfigError, DataError
from robotid_sim.identification import IdentificationProblem
from robotid_sim.signal.preprocess import preprocess as split_preprocess
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.logs import (
    STACK_GAP_PERIODS,
    LogSource,
    experiments,
    load_log,
    load_logs,
    parse_log_source,
    per_experiment,
    stack_experiments,
)

preprocess = functools.partial(split_preprocess, per_experiment=per_experiment, experiments=experiments)

UNIX0 = 1_700_000_000.0
FOREIGN_KEYS = {"t": "times", "q": "positions", "qd": "velocities", "tau": "torques"}


@pytest.fixture(scope="module")
def planar_a(robots) -> Dataset:
    return rid.simulate(robots["planar3r"], {"type": "polynomial", "random_waypoints": 4, "seed": 1}, duration=2.0)


@pytest.fixture(scope="module")
def planar_b(robots) -> Dataset:
    return rid.simulate(robots["planar3r"], {"type": "polynomial", "random_waypoints": 4, "seed": 2}, duration=1.5)


@pytest.fixture(scope="module")
def prrrp_ds(robots) -> Dataset:
    return rid.simulate(robots["prrrp"], "default", duration=2.0)


def _foreign(ds: Dataset, robot, order: list[int]):
    """The signals as another tool writes them: degrees on revolute joints, columns in ``order``, a finger last."""
    scale = np.where(np.array(robot.joint_kinds) == "prismatic", 1.0, 180.0 / np.pi)
    finger = np.linspace(0.0, 0.01, ds.n_samples)[:, None]

    def columns(x, unit_scale=True):
        return np.hstack([(x * scale if unit_scale else x)[:, order], finger])

    names = [robot.joint_names[i] for i in order] + ["finger"]
    return columns(ds.q), columns(ds.qd), columns(ds.tau, unit_scale=False), names


def _write_foreign_npz(path, ds, robot, order):
    q, qd, tau, names = _foreign(ds, robot, order)
    np.savez(path, positions=q, velocities=qd, torques=tau, times=UNIX0 + ds.t)
    return {"path": str(path), "keys": FOREIGN_KEYS, "units": {"t": "unix", "q": "deg"}, "joint_names": names}


def _assert_signals(out: Dataset, ds: Dataset, atol: float = 1e-9, t_atol: float = 1e-9) -> None:
    np.testing.assert_allclose(out.t, ds.t, rtol=0, atol=t_atol)
    for name in ("q", "qd", "tau"):
        np.testing.assert_allclose(getattr(out, name), getattr(ds, name), rtol=0, atol=atol, err_msg=name)


def test_foreign_npz_in_degrees_unix_time_reordered_with_a_finger(tmp_path, robots, prrrp_ds):
    robot = robots["prrrp"]
    src = _write_foreign_npz(tmp_path / "rec.npz", prrrp_ds, robot, [2, 4, 0, 3, 1])
    out = load_log(src, robot)
    # unix seconds in float64 carry ~2.4e-7 s of rounding, so t is compared at 1e-6
    _assert_signals(out, prrrp_ds, t_atol=1e-6)
    prismatic = np.array(robot.joint_kinds) == "prismatic"
    assert prismatic.any() and (~prismatic).any()
    raw = np.load(tmp_path / "rec.npz")["positions"]
    assert np.array_equal(out.q[:, 0], raw[:, 2]) and np.array_equal(out.q[:, 4], raw[:, 1])  # m: untouched by deg
    assert out.t[0] == 0.0
    assert out.truth is None and out.joint_names == robot.joint_names
    meta = out.metadata
    assert "robot" not in meta  # a real log carries no robot name
    assert meta["t0_unix"] == pytest.approx(UNIX0)
    assert meta["ignored_joints"] == ["finger"]
    assert meta["units"]["q"] == "deg" and meta["units"]["qd"] == "deg/s"
    assert meta["joint_columns"]["joint1"] == "array 'positions' column 2"
    assert set(meta["derived_signals"]) == {"qdd"}
    assert meta["experiments"] == [{"name": "rec", "start": 0, "stop": prrrp_ds.n_samples, "file": "rec.npz"}]
    problem = rid.IdentificationProblem(robot, out)  # accepted for the robot it was loaded for
    assert problem.n_samples == prrrp_ds.n_samples


def test_foreign_csv_with_prefixes_ms_clock_mm_and_a_text_column(tmp_path, robots, prrrp_ds):
    robot = robots["prrrp"]
    order = [4, 3, 2, 1, 0]
    q, qd, tau, names = _foreign(prrrp_ds, robot, order)
    mm = np.where(np.array(robot.joint_kinds)[order] == "prismatic", 1000.0, 1.0)
    q[:, :5] *= mm
    qd[:, :5] *= mm
    header = ["stamp", "mode"] + [f"{p}{n}" for p in ("pos_", "vel_", "eff_") for n in names]
    rows = np.column_stack([5000.0 + 1000.0 * prrrp_ds.t, np.zeros(prrrp_ds.n_samples), q, qd, tau])
    lines = [",".join(header)] + [",".join([f"{r[0]:.17g}", "run"] + [f"{v:.17g}" for v in r[2:]]) for r in rows]
    path = tmp_path / "rec.csv"
    path.write_text("\n".join(lines) + "\n")
    src = {
        "path": "rec.csv",
        "keys": {"t": "stamp", "q": "pos_", "qd": "vel_", "tau": "eff_"},
        "units": {"t": "ms", "q": "deg", "length": "mm"},
    }
    out = load_log(src, robot, base_dir=tmp_path)
    _assert_signals(out, prrrp_ds)
    assert out.metadata["t_offset_s"] == pytest.approx(5.0)
    assert "mode" in out.metadata["ignored_columns"]
    assert out.metadata["joint_columns"]["joint5"] == "column 'pos_joint5'"


@pytest.mark.parametrize("first", [0, 1])
def test_csv_index_columns_are_the_robots_joints_in_order(tmp_path, robots, planar_a, first):
    header = ["t"] + [f"{p}{first + j}" for p in ("pos", "tau") for j in range(3)]
    data = np.column_stack([planar_a.t, planar_a.q, planar_a.tau])
    np.savetxt(tmp_path / "idx.csv", data, fmt="%.17g", delimiter=",", header=",".join(header), comments="")
    out = load_log({"path": str(tmp_path / "idx.csv"), "keys": {"q": "pos", "tau": "tau"}}, robots["planar3r"])
    np.testing.assert_allclose(out.q, planar_a.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.tau, planar_a.tau, rtol=0, atol=1e-12)


def test_foreign_mat_with_transposed_arrays(tmp_path, robots, prrrp_ds):
    robot = robots["prrrp"]
    q, qd, tau, names = _foreign(prrrp_ds, robot, [1, 0, 2, 4, 3])
    scipy.io.savemat(
        tmp_path / "rec.mat",
        {
            "times": (UNIX0 * 1000.0 + 1000.0 * prrrp_ds.t)[None, :],
            "positions": q.T,
            "velocities": qd.T,
            "torques": tau.T,
            "joint_names": np.array(names, dtype=object),
        },
    )
    src = {"path": str(tmp_path / "rec.mat"), "keys": FOREIGN_KEYS, "units": {"t": "unix_ms", "q": "deg"}}
    out = load_log(src, robot)  # joint names from the file's own 'joint_names' cell array
    _assert_signals(out, prrrp_ds, t_atol=1e-6)
    assert out.metadata["t0_unix"] == pytest.approx(UNIX0)


def test_trim_and_decimate(tmp_path, robots, planar_a):
    np.savez(tmp_path / "p.npz", t=planar_a.t + 3.0, q=planar_a.q, qd=planar_a.qd, tau=planar_a.tau)
    robot = robots["planar3r"]
    trimmed = load_log({"path": str(tmp_path / "p.npz"), "trim": [0.5, 1.5]}, robot)
    kept = (planar_a.t >= 0.5 - 1e-9) & (planar_a.t <= 1.5 + 1e-9)
    assert trimmed.n_samples == kept.sum() == 201
    assert trimmed.t[0] == 0.0
    np.testing.assert_allclose(trimmed.t, planar_a.t[kept] - 0.5, atol=1e-12)
    np.testing.assert_array_equal(trimmed.q, planar_a.q[kept])
    assert trimmed.metadata["trim"]["samples"] == [100, 301]
    assert trimmed.metadata["t_offset_s"] == pytest.approx(3.5)

    decimated = load_log({"path": str(tmp_path / "p.npz"), "decimate": 4}, robot)
    assert decimated.n_samples == 100
    np.testing.assert_allclose(decimated.t, planar_a.t[::4], atol=1e-12)
    # a slow signal keeps its value at the kept samples: the anti-aliasing filter is zero-phase
    np.testing.assert_allclose(decimated.q, planar_a.q[::4], rtol=0, atol=1e-3)
    np.testing.assert_allclose(decimated.qd, planar_a.qd[::4], rtol=0, atol=1e-2 * np.abs(planar_a.qd).max())
    assert decimated.metadata["decimation"]["factor"] == 4
    assert decimated.metadata["rate_hz"] == pytest.approx(50.0)


def test_velocity_and_acceleration_are_derived_when_absent(tmp_path, robots, planar_a):
    np.savez(tmp_path / "p.npz", t=planar_a.t, q=planar_a.q, tau=planar_a.tau)
    out = load_log(tmp_path / "p.npz", robots["planar3r"])
    qd = np.gradient(planar_a.q, planar_a.t, axis=0, edge_order=2)
    np.testing.assert_allclose(out.qd, qd, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.qdd, np.gradient(qd, planar_a.t, axis=0, edge_order=2), rtol=0, atol=1e-9)
    assert set(out.metadata["derived_signals"]) == {"qd", "qdd"}
    # and they are close to the simulated ones (second-order differences of a smooth motion at 200 Hz)
    np.testing.assert_allclose(out.qd, planar_a.qd, rtol=0, atol=1e-3 * np.abs(planar_a.qd).max())
    np.testing.assert_allclose(out.qdd[5:-5], planar_a.qdd[5:-5], rtol=0, atol=1e-3 * np.abs(planar_a.qdd).max())


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".mat"])
def test_our_own_file_loads_and_keeps_the_robot_it_names(tmp_path, robots, planar_a, suffix):
    """The native layout is a LogSource's default: load_log reads what Dataset.save wrote, bit for bit."""
    path = str(planar_a.save(tmp_path / f"sim{suffix}"))
    out = load_log(path, robots["planar3r"])
    _assert_signals(out, planar_a, atol=0.0, t_atol=0.0)
    np.testing.assert_array_equal(out.qdd, planar_a.qdd)
    assert out.metadata["robot"] == "planar3r" and "derived_signals" not in out.metadata
    with pytest.raises(DataError, match="recorded on robot 'planar3r'"):
        rid.IdentificationProblem(robots["three_axis"], load_log(path, robots["three_axis"]))


def _naive_join(a: Dataset, b: Dataset) -> Dataset:
    """Two recordings glued end to end as if they were one: times continue, no gap."""
    t = np.concatenate([a.t, b.t - b.t[0] + a.t[-1] + a.dt])
    return Dataset(t, *(np.concatenate([getattr(a, s), getattr(b, s)]) for s in ("q", "qd", "qdd", "tau")))


def test_two_files_and_one_file_with_a_gap_are_the_same_experiments(tmp_path, robots, planar_a, planar_b):
    robot = robots["planar3r"]
    for name, ds in (("a", planar_a), ("b", planar_b)):
        np.savez(tmp_path / f"{name}.npz", t=ds.t, q=ds.q, qd=ds.qd, qdd=ds.qdd, tau=ds.tau)
    stacked = load_logs(["a.npz", "b.npz"], robot, base_dir=tmp_path)
    n_a = planar_a.n_samples
    assert experiments(stacked) == [("a", slice(0, n_a)), ("b", slice(n_a, stacked.n_samples))]
    gap = stacked.t[n_a] - stacked.t[n_a - 1]
    assert gap == pytest.approx(STACK_GAP_PERIODS * planar_a.dt)
    assert stacked.metadata["experiments"][1]["file"] == "b.npz"
    assert stacked.metadata["experiments"][1]["t_shift"] == pytest.approx(stacked.t[n_a])
    assert "robot" not in stacked.metadata and stacked.metadata["source"] == "recorded log"

    # one file holding both recordings, separated by a pause: split at the time gap
    np.savez(tmp_path / "both.npz", t=stacked.t, q=stacked.q, qd=stacked.qd, qdd=stacked.qdd, tau=stacked.tau)
    one = load_log(tmp_path / "both.npz", robot)
    assert [s for _, s in experiments(one)] == [s for _, s in experiments(stacked)]
    assert [name for name, _ in experiments(one)] == ["both_1", "both_2"]
    plain = Dataset(stacked.t, stacked.q, stacked.qd, stacked.qdd, stacked.tau)  # no metadata: split at the gap
    assert [s for _, s in experiments(plain)] == [s for _, s in experiments(stacked)]

    for kwargs in ({"differentiate": True}, {"lowpass_hz": 20.0, "differentiate": True}, {"lowpass_hz": 20.0}):
        x, notes = preprocess(stacked, **kwargs)
        y, _ = preprocess(one, **kwargs)
        for name in ("t", "q", "qd", "qdd", "tau"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), (kwargs, name)
        assert any("within each of the 2 experiments" in note for note in notes)
        assert x.metadata["experiments"] == stacked.metadata["experiments"]

    # the same as differentiating each recording alone
    x, _ = preprocess(stacked, differentiate=True)
    alone, _ = preprocess(Dataset(planar_b.t, planar_b.q, planar_b.qd, planar_b.qdd, planar_b.tau), differentiate=True)
    np.testing.assert_allclose(x.qdd[n_a:], alone.qdd, rtol=1e-9, atol=1e-9)

    # glued without a gap, the differences run across the join: wrong there, equal away from it
    naive, _ = preprocess(_naive_join(planar_a, planar_b), differentiate=True)
    assert experiments(_naive_join(planar_a, planar_b)) == [("all", slice(0, stacked.n_samples))]
    join = slice(n_a - 2, n_a + 2)
    assert np.abs(naive.qd[join] - x.qd[join]).max() > 1.0
    np.testing.assert_allclose(naive.qdd[: n_a - 3], x.qdd[: n_a - 3], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(naive.qdd[n_a + 3 :], x.qdd[n_a + 3 :], rtol=1e-9, atol=1e-9)


def test_stack_experiments_keeps_truth_segments_and_per_recording_metadata(planar_a, planar_b):
    stacked = stack_experiments([planar_a, planar_b], names=["first", "second"])
    assert [name for name, _ in experiments(stacked)] == ["first", "second"]
    assert stacked.truth is not None
    np.testing.assert_array_equal(stacked.truth.tau[planar_a.n_samples :], planar_b.truth.tau)
    assert stacked.metadata["robot"] == "planar3r"
    assert "excitation" not in stacked.metadata  # different excitations: kept per experiment
    entries = stacked.metadata["experiments"]
    assert entries[1]["metadata"]["excitation"] == planar_b.metadata["excitation"]
    assert entries[0]["metadata"]["duration_s"] == 2.0 and entries[1]["metadata"]["duration_s"] == 1.5
    segments = stacked.metadata["segments"]
    assert all(s["end"] <= planar_a.t[-1] + planar_a.dt + 1e-12 for s in segments[:1])
    assert segments[-1]["start"] >= stacked.t[planar_a.n_samples] - 1e-12
    assert np.all(np.diff(stacked.t) > 0)
    # stacked again: experiments are kept and renamed from the names given
    again = stack_experiments([stacked, planar_b], names=["ab", "b"])
    assert [name for name, _ in experiments(again)] == ["ab_1", "ab_2", "b"]
    untruthful = Dataset(planar_b.t, planar_b.q, planar_b.qd, planar_b.qdd, planar_b.tau, metadata={})
    assert stack_experiments([planar_a, untruthful]).truth is None


def test_per_experiment_updates_the_ranges_when_the_length_changes(planar_a, planar_b):
    stacked = stack_experiments([planar_a, planar_b], names=["a", "b"])
    out = per_experiment(stacked, lambda d: d.slice(0, 100))
    assert experiments(out) == [("a", slice(0, 100)), ("b", slice(100, 200))]
    np.testing.assert_array_equal(out.q[100:], planar_b.q[:100])
    assert out.metadata["experiments"][1]["t_shift"] == stacked.metadata["experiments"][1]["t_shift"]
    # a record of one experiment without metadata is passed whole
    assert per_experiment(planar_a, lambda d: d) is planar_a


def test_experiments_metadata_is_checked(planar_a):
    assert experiments(planar_a) == [("all", slice(0, planar_a.n_samples))]
    stacked = stack_experiments([planar_a, planar_a], names=["a", "b"])
    cut = Dataset(*(getattr(stacked, k)[:100] for k in ("t", "q", "qd", "qdd", "tau")), metadata=stacked.metadata)
    with pytest.raises(DataError, match=r"covers samples 0:800 but the dataset has 100 \(its arrays were cut"):
        experiments(cut)
    bad = Dataset(
        *(getattr(planar_a, s) for s in ("t", "q", "qd", "qdd", "tau")),
        metadata={"experiments": [{"name": "../x", "start": 0, "stop": 400}]},
    )
    with pytest.raises(DataError, match="experiment name '../x'"):
        experiments(bad)


def test_a_slice_or_subset_of_stacked_recordings_keeps_its_experiments(planar_a, planar_b, robots):
    """Regression: Dataset.slice copied metadata['experiments'] unchanged, so a slice of stacked recordings could not
    be identified ("covers samples 0:700 but the dataset has 80")."""
    stacked = stack_experiments([planar_a, planar_b], names=["a", "b"])
    n_a = planar_a.n_samples
    across = stacked.slice(n_a - 50, n_a + 30)
    assert experiments(across) == [("a", slice(0, 50)), ("b", slice(50, 80))]
    assert across.metadata["experiments"][1]["t_shift"] == stacked.metadata["experiments"][1]["t_shift"]
    assert [name for name, _ in IdentificationProblem(robots["planar3r"], across).experiments] == ["a", "b"]
    assert experiments(stacked.slice(n_a + 10, None)) == [("b", slice(0, stacked.n_samples - n_a - 10))]
    every_other = stacked.subset(np.arange(0, stacked.n_samples, 2))
    assert experiments(every_other) == [
        ("a", slice(0, (n_a + 1) // 2)),
        ("b", slice((n_a + 1) // 2, every_other.n_samples)),
    ]


def test_a_slice_keeps_only_the_segments_it_overlaps_clipped_to_its_span(robots):
    ds = rid.simulate(robots["planar3r"], {"type": "sequential_sine", "amplitudes": 0.3, "dwell": 0.2}, rate_hz=100)
    joints = [s for s in ds.metadata["segments"] if s["label"] == "joint"]
    middle = joints[1]["start"] + 0.5 * (joints[1]["end"] - joints[1]["start"])
    head = ds.subset(ds.t < middle)
    kept = [s for s in head.metadata["segments"] if s["label"] == "joint"]
    assert [s["joint"] for s in kept] == [joints[0]["joint"], joints[1]["joint"]]
    assert kept[1]["end"] == pytest.approx(head.t[-1] + head.dt)
    assert all(s["end"] <= head.t[-1] + head.dt + 1e-12 for s in head.metadata["segments"])
    assert ds.slice().metadata == ds.metadata


def test_stacking_recordings_of_other_joints_or_robots_is_refused(planar_a):
    renamed = Dataset(planar_a.t, planar_a.q, planar_a.qd, planar_a.qdd, planar_a.tau, joint_names=["a", "b", "c"])
    with pytest.raises(DataError, match=r"joints \[a, b, c\] onto recordings with joints \[joint1, joint2, joint3\]"):
        stack_experiments([planar_a, renamed])
    other = Dataset(planar_a.t, planar_a.q, planar_a.qd, planar_a.qdd, planar_a.tau, metadata={"robot": "three_axis"})
    with pytest.raises(DataError, match=r"different robots \(planar3r, three_axis\)"):
        stack_experiments([planar_a, other])
    with pytest.raises(DataError, match="appears twice"):
        stack_experiments([planar_a, planar_a], names=["x", "x"])


def test_load_logs_names_files_of_the_same_stem_apart(tmp_path, robots, planar_a):
    for folder in ("day1", "day2"):
        (tmp_path / folder).mkdir()
        np.savez(tmp_path / folder / "run.npz", t=planar_a.t, q=planar_a.q, tau=planar_a.tau)
    ds = load_logs(["day1/run.npz", "day2/run.npz"], robots["planar3r"], base_dir=tmp_path)
    assert [name for name, _ in experiments(ds)] == ["run", "run-2"]
    with pytest.raises(ConfigError, match="given to two log files"):
        load_logs([{"path": p, "name": "r"} for p in ("day1/run.npz", "day2/run.npz")], robots["planar3r"], tmp_path)
    odd = tmp_path / "my log (1).npz"
    np.savez(odd, t=planar_a.t, q=planar_a.q, tau=planar_a.tau)
    assert experiments(load_log(odd, robots["planar3r"]))[0][0] == "my_log__1_"


def test_log_source_is_the_yaml_form():
    src = parse_log_source({"path": "x.csv", "units": {"q": "deg"}, "trim": [1.0, None], "decimate": 2})
    assert src.file_units()["qdd"] == "deg/s^2" and src.file_keys("csv")["q"] == "q_"
    assert LogSource.model_validate(src.model_dump(mode="json")) == src
    assert LogSource.model_json_schema()["properties"]["units"]["description"].startswith("units in the file")
    with pytest.raises(ConfigError, match="unknown field 'colour'"):
        parse_log_source({"path": "x.csv", "colour": "red"})
    with pytest.raises(ConfigError, match=r"trim \[2.0, 1.0\]: the end must come after the start"):
        parse_log_source({"path": "x.csv", "trim": [2.0, 1.0]})


def test_lazy_export():
    import robotid_sim.sim as sim
    from robotid_sim.sim import logs

    assert sim.load_logs is logs.load_logs and sim.LogSource is logs.LogSource


# -- bad inputs: one clear line naming the problem ---------------------------------------------


def _good_npz(tmp_path, ds, robot, **arrays):
    q, qd, tau, names = _foreign(ds, robot, [0, 1, 2])
    content = {"positions": q[:, :3], "velocities": qd[:, :3], "torques": tau[:, :3], "times": UNIX0 + ds.t, **arrays}
    np.savez(tmp_path / "log.npz", **content)
    return {"path": str(tmp_path / "log.npz"), "keys": dict(FOREIGN_KEYS), "units": {"t": "unix", "q": "deg"}}


def _with_nan(ds):
    q = np.degrees(ds.q)
    q[7, 1] = np.nan
    return {"positions": q}


BAD = {
    "missing key": (
        lambda src: {**src, "keys": {**src["keys"], "q": "pos"}},
        {},
        DataError,
        r"log\.npz' has no array 'pos' .*its arrays are: positions, velocities, torques, times; set keys\.q",
    ),
    "missing optional key named": (
        lambda src: {**src, "keys": {**src["keys"], "qdd": "accelerations"}},
        {},
        DataError,
        r"no array 'accelerations' \(the joint acceleration, keys\.qdd\)",
    ),
    "unknown unit": (
        lambda src: {**src, "units": {"q": "grad"}},
        {},
        ConfigError,
        r"units\.q 'grad' is not accepted; accepted: rad, deg",
    ),
    "unknown unit field": (
        lambda src: {**src, "units": {"angle": "deg"}},
        {},
        ConfigError,
        r"unknown unit field 'angle'",
    ),
    "deg on tau": (
        lambda src: {**src, "units": {"tau": "deg"}},
        {},
        ConfigError,
        r"units\.tau 'deg' is not accepted: torques must be SI .*accepted: N\*m",
    ),
    "unknown signal": (
        lambda src: {**src, "keys": {"pos": "positions"}},
        {},
        ConfigError,
        r"unknown signal 'pos'",
    ),
    "nan": (
        lambda src: src,
        "nan",
        DataError,
        r"array 'positions' column 1 of '.*log\.npz' has nan at sample 7 \(joint 'joint2'\)",
    ),
    "non-monotonic t": (
        lambda src: src,
        "backwards",
        DataError,
        r"array 'times' of '.*log\.npz' must be strictly increasing; sample 5 has",
    ),
    "wrong joint count": (
        lambda src: src,
        "four",
        DataError,
        r"log\.npz' has 4 joint columns in 'positions' but robot 'planar3r' has 3 joints .*give 'joint_names'",
    ),
    "unknown joint name": (
        lambda src: {**src, "joint_names": ["joint1", "jointX", "joint3"]},
        {},
        DataError,
        r"'joint_names' \(joint1, jointX, joint3\) does not name joint\(s\) joint2 of robot 'planar3r'",
    ),
    "joint_names count": (
        lambda src: {**src, "joint_names": ["joint1", "joint2"]},
        {},
        DataError,
        r"'joint_names' has 2 names but 'positions' in '.*log\.npz' has 3 columns",
    ),
    "unsafe name": (
        lambda src: {**src, "name": "../x"},
        {},
        ConfigError,
        r"experiment name '\.\./x' cannot be used as a file name",
    ),
    "trim keeps nothing": (
        lambda src: {**src, "trim": [5.0, None]},
        {},
        DataError,
        r"trim \[5\.0, null\] keeps 0 sample\(s\) of '.*log\.npz'",
    ),
    "missing file": (
        lambda src: {**src, "path": src["path"] + ".missing.npz"},
        {},
        DataError,
        r"cannot load log '.*log\.npz\.missing\.npz': no such file",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_npz_inputs_are_one_clear_error(tmp_path, robots, planar_a, case):
    change, arrays, error, message = BAD[case]
    robot = robots["planar3r"]
    if arrays == "nan":
        arrays = _with_nan(planar_a)
    elif arrays == "backwards":
        times = UNIX0 + planar_a.t
        times[5] = times[4]
        arrays = {"times": times}
    elif arrays == "four":
        arrays = {"positions": np.hstack([np.degrees(planar_a.q), np.zeros((planar_a.n_samples, 1))])}
        arrays["velocities"] = arrays["positions"]
        arrays["torques"] = np.hstack([planar_a.tau, np.zeros((planar_a.n_samples, 1))])
    src = change(_good_npz(tmp_path, planar_a, robot, **arrays))
    with pytest.raises(error, match=message) as info:
        load_log(src, robot)
    assert "\n" not in str(info.value)


def test_a_text_file_named_npz_is_named(tmp_path, robots):
    path = tmp_path / "notes.npz"
    path.write_text("t,q_joint1\n0,1\n")
    with pytest.raises(DataError, match=r"'.*notes\.npz' is not an \.npz file .*set 'format'"):
        load_log(path, robots["planar3r"])
    garbage = tmp_path / "garbage.mat"
    garbage.write_text("hello\n")
    with pytest.raises(DataError, match=r"cannot read '.*garbage\.mat' as \.mat .*is it a MATLAB file"):
        load_log(garbage, robots["planar3r"])
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\x00\x01\x02")
    with pytest.raises(DataError, match=r"binary\.csv' is not a CSV text file"):
        load_log(binary, robots["planar3r"])
    with pytest.raises(DataError, match=r"cannot tell the format of '.*log\.txt' .*set 'format'"):
        (tmp_path / "log.txt").write_text("t\n")
        load_log(tmp_path / "log.txt", robots["planar3r"])


def test_bad_csv_cells_name_column_and_line(tmp_path, robots, planar_a):
    header = "t,q_joint1,q_joint2,q_joint3,tau_joint1,tau_joint2,tau_joint3"
    rows = np.column_stack([planar_a.t, planar_a.q, planar_a.tau])
    body = [",".join(f"{v:.17g}" for v in r) for r in rows]
    path = tmp_path / "log.csv"
    robot = robots["planar3r"]
    bad = list(body)
    bad[6] = bad[6].replace(bad[6].split(",")[2], "nan", 1)
    path.write_text(header + "\n" + "\n".join(bad) + "\n")
    with pytest.raises(DataError, match=r"column 'q_joint2' of '.*log\.csv' has nan at sample 6 \(line 8\)"):
        load_log(path, robot)
    bad[6] = body[6].replace(body[6].split(",")[5], "oops", 1)
    path.write_text(header + "\n" + "\n".join(bad) + "\n")
    with pytest.raises(
        DataError, match=r"column 'tau_joint2' of '.*log\.csv' has the non-number 'oops' at sample 6 \(line 8\)"
    ):
        load_log(path, robot)
    path.write_text(header.replace("q_joint", "pos_joint") + "\n" + "\n".join(body) + "\n")
    with pytest.raises(DataError, match=r"no joint position column 'q_<joint>' .*its columns are: t, pos_joint1"):
        load_log(path, robot)
    path.write_text(header.replace(",tau_joint3", "") + "\n" + "\n".join(b.rsplit(",", 1)[0] for b in body) + "\n")
    with pytest.raises(DataError, match=r"has no column 'tau_joint3' for joint 'joint3'"):
        load_log(path, robot)

"""Dataset (SPEC §5): validation, selection, lossless NPZ / CSV / MAT files, CSV diagnostics."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from robotid_sim.errors import DataError
from robotid_sim.sim.dataset import Dataset, Signals, load_dataset

SIGNALS = ("q", "qd", "qdd", "tau")
FORMATS = (".npz", ".csv", ".mat")


def _dataset(rng, n_samples: int = 200, joints=("joint1", "joint2"), truth: bool = True):
    n = len(joints)
    t = np.arange(n_samples) * 1e-3
    clean = {name: rng.standard_normal((n_samples, n)) for name in SIGNALS}
    measured = {name: value + 0.01 * rng.standard_normal(value.shape) for name, value in clean.items()}
    return Dataset(
        t,
        **measured,
        truth=Signals(**clean) if truth else None,
        joint_names=list(joints),
        metadata={
            "robot": "planar3r",
            "seed": np.int64(7),
            "rate_hz": 1000.0,
            "noise": {"q": {"snr_db": 60}},
            "excitation": "fourier, 5 harmonics",
        },
    )


def _assert_same(a: Dataset, b: Dataset) -> None:
    for name in ("t",) + SIGNALS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.truth is None) == (b.truth is None)
    if a.truth is not None:
        for name in SIGNALS:
            assert np.array_equal(getattr(a.truth, name), getattr(b.truth, name)), name
    assert a.joint_names == b.joint_names
    assert a.metadata == b.metadata


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.write_text(",".join(header) + "\n" + "\n".join(",".join(r) for r in rows) + "\n")
    return path


def _csv_rows(n_rows: int = 10) -> tuple[list[str], list[list[str]]]:
    header = ["t", "q_joint1", "q_joint2", "tau_joint1", "tau_joint2"]
    rows = [[repr(0.01 * i), repr(float(np.sin(0.01 * i))), repr(0.5 * i), "1.0", "2.0"] for i in range(n_rows)]
    return header, rows


# -- construction -------------------------------------------------------------------------------


def test_dataset_reports_its_shape(rng):
    ds = _dataset(rng, n_samples=50, joints=("a", "b", "c"))
    assert (ds.n_samples, ds.n_dof) == (50, 3)
    assert ds.dt == pytest.approx(1e-3)
    assert ds.metadata["seed"] == 7 and isinstance(ds.metadata["seed"], int)


def test_dataset_rejects_a_signal_of_the_wrong_shape_naming_it(rng):
    ds = _dataset(rng)
    with pytest.raises(DataError, match=r"'qdd' must have shape \(200, 2\)"):
        Dataset(ds.t, ds.q, ds.qd, ds.qdd[:, :1], ds.tau)


def test_dataset_rejects_nan_naming_field_sample_and_joint(rng):
    ds = _dataset(rng)
    tau = ds.tau.copy()
    tau[12, 1] = np.nan
    with pytest.raises(DataError, match=r"'tau' contains NaN or inf \(first at sample 12, joint 1"):
        Dataset(ds.t, ds.q, ds.qd, ds.qdd, tau)


def test_dataset_rejects_time_that_does_not_increase(rng):
    ds = _dataset(rng)
    t = ds.t.copy()
    t[5] = t[4]
    with pytest.raises(DataError, match="'t' must be strictly increasing; sample 5"):
        Dataset(t, ds.q, ds.qd, ds.qdd, ds.tau)


def test_dataset_rejects_a_truth_of_another_length(rng):
    ds = _dataset(rng)
    with pytest.raises(DataError, match="'truth.q' must have shape"):
        Dataset(ds.t[:-1], ds.q[:-1], ds.qd[:-1], ds.qdd[:-1], ds.tau[:-1], truth=ds.truth)


def test_dataset_rejects_metadata_that_is_not_json_able(rng):
    ds = _dataset(rng)
    with pytest.raises(DataError, match="JSON"):
        Dataset(ds.t, ds.q, ds.qd, ds.qdd, ds.tau, metadata={"when": object()})


def test_dataset_rejects_joint_names_with_commas(rng):
    ds = _dataset(rng)
    with pytest.raises(DataError, match="must not contain commas"):
        Dataset(ds.t, ds.q, ds.qd, ds.qdd, ds.tau, joint_names=["a,b", "c"])


# -- selection ----------------------------------------------------------------------------------


def test_slice_keeps_truth_names_and_metadata(rng):
    ds = _dataset(rng)
    part = ds.slice(10, 20)
    assert part.n_samples == 10
    np.testing.assert_array_equal(part.truth.tau, ds.truth.tau[10:20])
    np.testing.assert_array_equal(part.t, ds.t[10:20])
    assert part.joint_names == ds.joint_names and part.metadata == ds.metadata


def test_subset_takes_a_boolean_mask(rng):
    ds = _dataset(rng)
    mask = ds.t > 0.05
    part = ds.subset(mask)
    np.testing.assert_array_equal(part.q, ds.q[mask])
    with pytest.raises(DataError, match=r"boolean mask must have shape \(200,\)"):
        ds.subset(mask[:-1])


# -- files --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", FORMATS)
def test_round_trip_is_lossless(tmp_path, rng, suffix):
    ds = _dataset(rng)
    loaded = load_dataset(ds.save(tmp_path / f"run{suffix}"))
    _assert_same(ds, loaded)


@pytest.mark.parametrize("suffix", FORMATS)
def test_round_trip_without_truth_keeps_truth_none(tmp_path, rng, suffix):
    ds = _dataset(rng, truth=False)
    _assert_same(ds, load_dataset(ds.save(tmp_path / f"log{suffix}")))


_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.tuples(st.integers(2, 12), st.integers(1, 4)),
    data=st.data(),
    suffix=st.sampled_from(FORMATS),
)
def test_round_trip_of_arbitrary_floats_is_bit_exact(shape, data, suffix):
    n_samples, n = shape
    steps = data.draw(arrays(float, n_samples, elements=st.floats(1e-9, 1e3)))
    t = np.cumsum(steps)
    signals = {name: data.draw(arrays(float, shape, elements=_floats)) for name in SIGNALS}
    ds = Dataset(t, **signals, joint_names=[f"j{i}" for i in range(n)], metadata={"x": data.draw(_floats)})
    with tempfile.TemporaryDirectory() as folder:
        loaded = load_dataset(ds.save(Path(folder) / f"d{suffix}"))
    _assert_same(ds, loaded)


def test_npz_and_csv_write_a_json_sidecar_with_the_metadata(tmp_path, rng):
    ds = _dataset(rng)
    ds.save(tmp_path / "run.npz")
    ds.save(tmp_path / "run.csv")  # same metadata: the shared sidecar is accepted
    assert json.loads((tmp_path / "run.json").read_text()) == ds.metadata


def test_a_lone_npz_keeps_its_metadata(tmp_path, rng):
    ds = _dataset(rng)
    ds.save(tmp_path / "run.npz")
    (tmp_path / "run.json").unlink()
    assert load_dataset(tmp_path / "run.npz").metadata == ds.metadata


def test_save_refuses_to_overwrite_an_existing_file(tmp_path, rng):
    ds = _dataset(rng)
    path = ds.save(tmp_path / "run.mat")
    before = path.read_bytes()
    with pytest.raises(DataError, match="already exists; refusing to overwrite"):
        _dataset(rng).save(path)
    assert path.read_bytes() == before


def test_save_with_overwrite_replaces_the_file(tmp_path, rng):
    path = _dataset(rng).save(tmp_path / "run.npz")
    other = _dataset(rng)
    other.save(path, overwrite=True)
    _assert_same(other, load_dataset(path))


def test_save_leaves_no_temporary_files(tmp_path, rng):
    ds = _dataset(rng)
    for suffix in FORMATS:
        ds.save(tmp_path / f"run{suffix}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.csv", "run.json", "run.mat", "run.npz"]


def test_unknown_suffix_is_refused(tmp_path, rng):
    with pytest.raises(DataError, match=r"unknown suffix '.txt'; use one of .npz, .csv, .mat"):
        _dataset(rng).save(tmp_path / "run.txt")


def test_csv_header_names_every_column(tmp_path, rng):
    path = _dataset(rng, joints=("shoulder", "elbow")).save(tmp_path / "run.csv")
    header = path.read_text().splitlines()[0].split(",")
    assert header[:9] == [
        "t",
        "q_shoulder",
        "q_elbow",
        "qd_shoulder",
        "qd_elbow",
        "qdd_shoulder",
        "qdd_elbow",
        "tau_shoulder",
        "tau_elbow",
    ]
    assert header[9:11] == ["true_q_shoulder", "true_q_elbow"]
    assert len(header) == 17


def test_csv_with_a_missing_column_names_it(tmp_path):
    header, rows = _csv_rows()
    del header[4]
    rows = [r[:4] for r in rows]
    path = _write_csv(tmp_path / "log.csv", header, rows)
    with pytest.raises(
        DataError,
        match=r"missing column 'tau_joint2'.*expected header "
        r"t,q_joint1,q_joint2,tau_joint1,tau_joint2",
    ):
        load_dataset(path)


def test_csv_with_nan_names_column_and_row(tmp_path):
    header, rows = _csv_rows()
    rows[6][3] = "nan"
    path = _write_csv(tmp_path / "log.csv", header, rows)
    with pytest.raises(DataError, match=r"column 'tau_joint1' .* has nan at sample 6 \(line 8\)"):
        load_dataset(path)


def test_csv_with_an_empty_cell_names_column_and_line(tmp_path):
    header, rows = _csv_rows()
    rows[2][1] = ""
    path = _write_csv(tmp_path / "log.csv", header, rows)
    with pytest.raises(DataError, match=r"column 'q_joint1' .* empty value at sample 2 \(line 4\)"):
        load_dataset(path)


def test_csv_with_non_monotonic_time_names_the_row(tmp_path):
    header, rows = _csv_rows()
    rows[4][0], rows[5][0] = rows[5][0], rows[4][0]
    path = _write_csv(tmp_path / "log.csv", header, rows)
    with pytest.raises(
        DataError,
        match=r"'t' of .* must be strictly increasing; sample 5 "
        r"\(line 7\)",
    ):
        load_dataset(path)


def test_csv_without_velocity_columns_derives_them_and_says_so(tmp_path):
    dt = 1e-3
    t = np.arange(0.0, 1.0, dt)
    header = ["t", "q_a", "tau_a", "current_a"]
    rows = [[repr(float(x)), repr(float(np.sin(x))), "0.5", "0.1"] for x in t]
    loaded = load_dataset(_write_csv(tmp_path / "robot_log.csv", header, rows))
    np.testing.assert_allclose(loaded.qd[:, 0], np.cos(t), atol=1e-5)
    np.testing.assert_allclose(loaded.qdd[1:-1, 0], -np.sin(t[1:-1]), atol=1e-3)
    assert set(loaded.metadata["derived_signals"]) == {"qd", "qdd"}
    assert loaded.metadata["ignored_columns"] == ["current_a"]
    assert loaded.truth is None and loaded.joint_names == ["a"]


def test_csv_loads_with_the_joint_names_given(tmp_path):
    header, rows = _csv_rows()
    path = _write_csv(tmp_path / "log.csv", header, rows)
    with pytest.raises(DataError, match="missing column 'q_wrist'"):
        load_dataset(path, joint_names=["joint1", "wrist"])
    assert load_dataset(path, joint_names=["joint2"]).n_dof == 1


def test_mat_file_recorded_elsewhere_loads_with_signals_per_row(tmp_path):
    t = np.arange(50) * 0.01
    q = np.vstack([np.sin(t), np.cos(t)])  # MATLAB habit: one row per joint, 2 x N
    scipy.io.savemat(tmp_path / "log.mat", {"t": t[None, :], "q": q, "tau": 2 * q})
    loaded = load_dataset(tmp_path / "log.mat", joint_names=["a", "b"])
    np.testing.assert_array_equal(loaded.q, q.T)
    assert loaded.joint_names == ["a", "b"] and "derived_signals" in loaded.metadata


def test_npz_without_tau_names_the_missing_array(tmp_path):
    np.savez(tmp_path / "bad.npz", t=np.arange(5.0), q=np.zeros((5, 1)))
    with pytest.raises(DataError, match="missing array 'tau'"):
        load_dataset(tmp_path / "bad.npz")


def test_npz_recorded_elsewhere_with_signals_per_row_loads_like_a_mat(tmp_path):
    t = np.arange(50) * 0.01
    q = np.vstack([np.sin(t), np.cos(t)])  # one row per joint, 2 x N: the reader orients every format alike
    np.savez(tmp_path / "log.npz", t=t[:, None], q=q, tau=2 * q)
    loaded = load_dataset(tmp_path / "log.npz")
    np.testing.assert_array_equal(loaded.q, q.T)
    np.testing.assert_array_equal(loaded.t, t)


def test_csv_text_in_an_ignored_column_is_not_parsed(tmp_path):
    header, rows = _csv_rows()
    path = _write_csv(tmp_path / "log.csv", [*header, "mode"], [[*r, "run"] for r in rows])
    loaded = load_dataset(path)
    assert loaded.metadata["ignored_columns"] == ["mode"]
    np.testing.assert_array_equal(loaded.tau[:, 1], 2.0)

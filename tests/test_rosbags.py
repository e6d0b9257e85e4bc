"""ROS bags in (issue 29, deliver 1): sensor_msgs/JointState topics of rosbag2 (SQLite, MCAP) and ROS 1 bags load as
a Dataset. Every bag is written here with rosbags' own writers: no binary fixtures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag1 import Writer as Ros1Writer
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Ros2Writer
from rosbags.typesys import Stores, get_typestore

import robotid_sim as rid
from robotid_sim.errors import ConfigError, DataError
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.logs import load_log
from tests.helpers import cli_process

JOINT_STATE = "sensor_msgs/msg/JointState"
T0_NS = 1_700_000_000 * 10**9
#: bag kind (rosbag2 storage plugin, or ROS 1) -> the typestore its messages are serialized with
KINDS = {"sqlite3": Stores.ROS2_HUMBLE, "mcap": Stores.ROS2_HUMBLE, "ros1": Stores.ROS1_NOETIC}


@pytest.fixture(scope="module")
def planar(robots) -> Dataset:
    return rid.simulate(robots["planar3r"], {"type": "polynomial", "random_waypoints": 4, "seed": 1}, duration=0.5)


def _stamps(ds: Dataset) -> np.ndarray:
    return T0_NS + np.round(ds.t * 1e9).astype(np.int64)


def _messages(ds: Dataset, order=(0, 1, 2), fields=("position", "velocity", "effort"), stamps=None, extra=False):
    """One JointState per sample: the joints in ``order`` (a gripper last with ``extra``), only ``fields`` filled."""
    signals = {"position": ds.q, "velocity": ds.qd, "effort": ds.tau}
    names = [ds.joint_names[j] for j in order] + (["gripper"] if extra else [])
    rows = []
    for k, stamp in enumerate(_stamps(ds) if stamps is None else stamps):
        values = {f: np.r_[signals[f][k, list(order)], [0.01] if extra else []] for f in fields}
        rows.append((int(stamp), names, values))
    return rows


def _write_bag(path: Path, kind: str, topics: dict[str, list], other_topic: bool = False) -> Path:
    """A bag of ``kind`` (sqlite3, mcap, ros1) at ``path`` holding ``topics`` (topic -> rows of :func:`_messages`),
    received 1 ms apart, and with ``other_topic`` a std_msgs/String topic '/status'."""
    store = get_typestore(KINDS[kind])
    message, header, time = (
        store.types[name] for name in (JOINT_STATE, "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    if kind == "ros1":
        writer, serialize, seq = Ros1Writer(path), store.serialize_ros1, {"seq": 0}
    else:
        plugin = StoragePlugin.SQLITE3 if kind == "sqlite3" else StoragePlugin.MCAP
        writer, serialize, seq = Ros2Writer(path, version=9, storage_plugin=plugin), store.serialize_cdr, {}
    empty = np.zeros(0)
    with writer:
        for topic, rows in topics.items():
            connection = writer.add_connection(topic, JOINT_STATE, typestore=store)
            for k, (stamp, names, values) in enumerate(rows):
                msg = message(
                    header=header(stamp=time(sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id="", **seq),
                    name=names,
                    **{f: np.asarray(values.get(f, empty), dtype=float) for f in ("position", "velocity", "effort")},
                )
                writer.write(connection, T0_NS + 10**6 * (k + 1), serialize(msg, JOINT_STATE))
        if other_topic:
            text = store.types["std_msgs/msg/String"]
            connection = writer.add_connection("/status", text.__msgtype__, typestore=store)
            writer.write(connection, T0_NS, serialize(text(data="ok"), text.__msgtype__))
    return path


def _assert_equal(out: Dataset, ds: Dataset) -> None:
    np.testing.assert_allclose(out.t, ds.t, rtol=0, atol=1e-12)  # stamps in whole ns
    for name in ("q", "qd", "tau"):
        np.testing.assert_array_equal(getattr(out, name), getattr(ds, name), err_msg=name)  # float64: exact


# -------------------------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize(
    ("kind", "read"),
    [("sqlite3", "run"), ("sqlite3", "run/run.db3"), ("mcap", "run"), ("mcap", "run/run.mcap"), ("ros1", "run.bag")],
)
def test_a_dataset_round_trips_through_each_bag_format_exactly(tmp_path, robots, planar, kind, read):
    _write_bag(tmp_path / ("run.bag" if kind == "ros1" else "run"), kind, {"/joint_states": _messages(planar)}, True)
    out = load_log({"path": read}, robots["planar3r"], base_dir=tmp_path)
    _assert_equal(out, planar)
    assert out.metadata["format"] == "rosbag"
    assert out.metadata["file_metadata"]["rosbag"] == {
        "topics": {"q": "/joint_states", "qd": "/joint_states", "tau": "/joint_states"},
        "clock": "header stamps",
        "t0_ns": T0_NS,
    }
    assert list(out.metadata["derived_signals"]) == ["qdd"]  # a JointState has no acceleration


def test_joints_in_another_order_and_a_gripper_are_matched_by_name_per_message(tmp_path, robots, planar):
    rows = _messages(planar, order=(2, 0, 1), extra=True)
    rows[10:20] = _messages(planar, order=(1, 2, 0))[10:20]  # messages naming their joints in another order
    _write_bag(tmp_path / "run.bag", "ros1", {"/joint_states": rows})
    out = load_log(tmp_path / "run.bag", robots["planar3r"])
    _assert_equal(out, planar)
    assert out.metadata["ignored_joints"] == ["gripper"]


def test_signs_negate_the_joints_the_log_counts_the_other_way(tmp_path, robots, planar):
    flipped = Dataset(planar.t, *(x * [1.0, -1.0, 1.0] for x in (planar.q, planar.qd, planar.qdd, planar.tau)))
    _write_bag(tmp_path / "run", "mcap", {"/joint_states": _messages(flipped)})
    out = load_log({"path": "run", "signs": {"joint2": -1}}, robots["planar3r"], base_dir=tmp_path)
    _assert_equal(out, planar)
    with pytest.raises(ConfigError, match=r"'signs' names elbow, not a joint of robot 'planar3r' \(joint1, joint2"):
        load_log({"path": "run", "signs": {"elbow": -1}}, robots["planar3r"], base_dir=tmp_path)


# ------------------------------------------------------------------------------------------------------ topics


def test_several_joint_state_topics_need_a_topic_and_an_unknown_one_is_named(tmp_path, robots, planar):
    bag = _write_bag(tmp_path / "run", "sqlite3", {"/a/joint_states": _messages(planar), "/b/joint_states": []}, True)
    robot = robots["planar3r"]
    with pytest.raises(DataError, match=r"several sensor_msgs/msg/JointState topics \(/a/joint_states, /b/joint_st"):
        load_log(bag, robot)
    with pytest.raises(DataError, match=r"has no topic '/c'; its sensor_msgs/msg/JointState topics: /a/joint_states, "):
        load_log({"path": str(bag), "topic": "/c"}, robot)
    with pytest.raises(DataError, match=r"topic '/status' .* holds std_msgs/msg/String messages, not sensor_msgs"):
        load_log({"path": str(bag), "topic": "/status"}, robot)
    with pytest.raises(DataError, match=r"topic '/b/joint_states' of .* holds no message"):
        load_log({"path": str(bag), "topic": "/b/joint_states"}, robot)
    _assert_equal(load_log({"path": str(bag), "topic": "/a/joint_states"}, robot), planar)


def test_a_topic_mapping_needs_q_and_a_csv_takes_no_topic(tmp_path, robots, planar):
    with pytest.raises(ConfigError, match=r"'topic' names no topic for q"):
        load_log({"path": "run", "topic": {"tau": "/efforts"}}, robots["planar3r"], base_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"unknown signal 'qdd' in 'topic'"):
        load_log({"path": "run", "topic": {"q": "/a", "qdd": "/b"}}, robots["planar3r"], base_dir=tmp_path)
    planar.save(tmp_path / "run.csv")
    with pytest.raises(ConfigError, match=r"'topic' applies to ROS bags only, and '.*run.csv' is read as csv"):
        load_log({"path": "run.csv", "topic": "/joint_states"}, robots["planar3r"], base_dir=tmp_path)


@pytest.mark.parametrize(
    "topic", [["/joint_states", "/joint_efforts"], {"q": "/joint_states", "tau": "/joint_efforts"}], ids=["list", "map"]
)
def test_efforts_published_on_another_topic_are_merged_by_stamp(tmp_path, robots, planar, topic):
    topics = {
        "/joint_states": _messages(planar, fields=("position", "velocity")),
        "/joint_efforts": _messages(planar, order=(1, 2, 0), fields=("effort",)),
    }
    _write_bag(tmp_path / "run", "mcap", topics)
    out = load_log({"path": "run", "topic": topic}, robots["planar3r"], base_dir=tmp_path)
    _assert_equal(out, planar)
    rosbag = out.metadata["file_metadata"]["rosbag"]
    assert rosbag["topics"] == {"q": "/joint_states", "qd": "/joint_states", "tau": "/joint_efforts"}
    assert rosbag["merge"] == "nearest message within 2.5 ms (half the median period of '/joint_states')"
    assert rosbag["dropped_samples"] == 0


def test_a_merged_topic_is_matched_to_the_nearest_stamp_and_unmatched_samples_are_dropped(tmp_path, robots, planar):
    late = _stamps(planar)[5:] + 1_000_000  # 1 ms after the positions, the first 5 samples without an effort
    topics = {
        "/joint_states": _messages(planar, fields=("position",)),
        "/joint_efforts": _messages(planar, fields=("effort",), stamps=np.r_[np.zeros(5, np.int64), late])[5:],
    }
    _write_bag(tmp_path / "run", "sqlite3", topics)
    out = load_log({"path": "run", "topic": list(topics)}, robots["planar3r"], base_dir=tmp_path)
    np.testing.assert_array_equal(out.q, planar.q[5:])
    np.testing.assert_array_equal(out.tau, planar.tau[5:])
    assert out.metadata["file_metadata"]["rosbag"]["dropped_samples"] == 5
    assert list(out.metadata["derived_signals"]) == ["qd", "qdd"]  # no velocity on either topic: derived


def test_topics_recorded_at_other_times_are_an_error_naming_their_spans(tmp_path, robots, planar):
    topics = {
        "/joint_states": _messages(planar, fields=("position",)),
        "/joint_efforts": _messages(planar, fields=("effort",), stamps=_stamps(planar) + 10**10),  # 10 s later
    }
    _write_bag(tmp_path / "run", "mcap", topics)
    with pytest.raises(
        DataError, match=r"no message of '/joint_efforts' \(t = 1700000010.000 .. 1700000010.495 s\) in "
    ):
        load_log({"path": "run", "topic": list(topics)}, robots["planar3r"], base_dir=tmp_path)


def test_efforts_on_no_topic_are_an_error_naming_the_topics(tmp_path, robots, planar):
    _write_bag(tmp_path / "run.bag", "ros1", {"/joint_states": _messages(planar, fields=("position", "velocity"))})
    with pytest.raises(DataError, match=r"messages of '/joint_states' in .* carry no effort .* --topic /joint_states"):
        load_log(tmp_path / "run.bag", robots["planar3r"])
    with pytest.raises(DataError, match=r"topic '/joint_states' of .* carries no effort \(topic.tau\)"):
        load_log(
            {"path": "run.bag", "topic": {"q": "/joint_states", "tau": "/joint_states"}}, robots["planar3r"], tmp_path
        )


# ------------------------------------------------------------------------------------------ messages and clocks


def test_zero_header_stamps_fall_back_to_the_receive_time(tmp_path, robots, planar):
    rows = _messages(planar, stamps=np.zeros(planar.n_samples, np.int64))
    _write_bag(tmp_path / "run", "mcap", {"/joint_states": rows})
    out = load_log(tmp_path / "run", robots["planar3r"])
    np.testing.assert_allclose(out.t, np.arange(planar.n_samples) * 1e-3, rtol=0, atol=1e-12)  # written 1 ms apart
    rosbag = out.metadata["file_metadata"]["rosbag"]
    assert rosbag["clock"] == "receive time" and rosbag["zero_stamps"] == {"/joint_states": planar.n_samples}


def test_a_message_with_an_array_of_another_length_than_its_names_is_an_error(tmp_path, robots, planar):
    rows = _messages(planar)
    rows[7][2]["velocity"] = rows[7][2]["velocity"][:2]
    _write_bag(tmp_path / "run", "sqlite3", {"/joint_states": rows})
    with pytest.raises(DataError, match=r"message 7 of topic '/joint_states' of .* has 2 velocity values for 3 joints"):
        load_log(tmp_path / "run", robots["planar3r"])


def test_a_message_without_a_velocity_is_named_when_the_others_have_one(tmp_path, robots, planar):
    rows = _messages(planar)
    del rows[7][2]["velocity"]
    _write_bag(tmp_path / "run", "sqlite3", {"/joint_states": rows})
    with pytest.raises(DataError, match=r"'/joint_states' velocity of 'joint1' of .* has nan at sample 7"):
        load_log(tmp_path / "run", robots["planar3r"])


@pytest.mark.parametrize("name", ["x.bag", "x.mcap", "x.db3"])
def test_a_file_that_is_not_a_bag_is_one_data_error(tmp_path, robots, name):
    (tmp_path / name).write_text("t,q_joint1,tau_joint1\n0,1,2\n")
    with pytest.raises(DataError, match=r"cannot read '.*x\.\w+' as a ROS bag \(.*\); give a ROS 1 .bag") as info:
        load_log(tmp_path / name, robots["planar3r"])
    assert "\n" not in str(info.value)


def test_a_rosbag2_folder_with_a_broken_metadata_file_is_one_data_error(tmp_path, robots):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metadata.yaml").write_text("rosbag2_bagfile_information: [")
    with pytest.raises(DataError, match=r"cannot read '.*run' as a ROS bag \(Could not load YAML") as info:
        load_log(tmp_path / "run", robots["planar3r"])
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------------------- CLI


def test_identify_on_a_bag_with_an_ambiguous_topic_is_one_error_line_and_writes_nothing(tmp_path, planar):
    _write_bag(tmp_path / "run", "mcap", {"/a": _messages(planar), "/b": _messages(planar)})
    before = sorted(tmp_path.rglob("*"))
    result = cli_process(["identify", "--robot", "planar3r", "--data", "run", "--out", "model.json"], tmp_path)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert "several sensor_msgs/msg/JointState topics (/a, /b); choose with --topic" in errors[0]
    assert sorted(tmp_path.rglob("*")) == before


def test_identify_on_a_rosbag2_folder_with_merged_topics_matches_the_dataset(tmp_path, planar):
    topics = {
        "/joint_states": _messages(planar, fields=("position", "velocity")),
        "/joint_efforts": _messages(planar, fields=("effort",)),
    }
    _write_bag(tmp_path / "run", "sqlite3", topics)
    args = ["identify", "--robot", "planar3r", "--data", "run", "--topic", "/joint_states", "--topic", "/joint_efforts"]
    result = cli_process([*args, "--estimator", "ols", "--out", "model.json"], tmp_path)
    assert result.returncode == 0, result.stderr
    loaded = load_log({"path": "run", "topic": list(topics)}, "planar3r", base_dir=tmp_path)
    expected = rid.identify(loaded, "planar3r", estimator="ols")
    model = rid.load_model(tmp_path / "model.json")
    np.testing.assert_allclose(model.values, expected.values, rtol=1e-12, atol=1e-12)

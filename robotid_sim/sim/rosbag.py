"""ROS bags: the ``sensor_msgs/JointState`` messages of a rosbag2 (SQLite or MCAP) or ROS 1 bag as joint signals.

A bag is read with the pure-Python ``rosbags`` package (no ROS install): a ROS 1 ``.bag`` file, a rosbag2
folder (``metadata.yaml`` beside its ``.db3`` or ``.mcap`` files), or a lone ``.db3`` or ``.mcap`` file.
:func:`read_joint_states` turns the messages of one or several topics into signal matrices on one time
base; :mod:`robotid_sim.sim.logs` matches their joints to the robot's and converts their units.

The rules, in order:

* **Topics.** ``topic`` is one topic, a list of topics, or a mapping per signal (``{q: /joint_states,
  tau: /joint_efforts}``); by default the one JointState topic of the bag (several, or none, are a
  :class:`~robotid_sim.errors.DataError` listing them). From a list, each signal (q: ``position``, qd:
  ``velocity``, tau: ``effort``) comes from the first topic whose messages carry it; a mapping names the
  topic of each signal, and a signal it leaves out comes from the topic of q when that carries it. A
  velocity no topic carries is left out (derived from q by the loader); an effort no topic carries is an
  error naming the topics.
* **Joints.** Each message's ``name`` list says which joint each entry is: messages whose lists differ
  (another order, a joint more or less) are put in the columns of the joints in order of first
  appearance, NaN where a message lacks a joint (the loader names such a sample only when the robot uses
  that joint). An empty ``velocity`` or ``effort`` array in a message is NaN there too. Messages without
  names must all have the same number of entries (the loader then takes them in the robot's order).
* **Time.** A sample's time is its header stamp (``sec + nanosec``, kept in integer nanoseconds). When
  any message of a topic read has a zero stamp (drivers that leave the header empty), every topic is
  timed by the bag's receive time instead: ``metadata["clock"]`` says ``receive time`` and
  ``metadata["zero_stamps"]`` counts the zero stamps per topic.
* **Merging.** The samples are the messages of the topic of q, in bag order. A signal from another topic
  is taken from that topic's message with the nearest time, if it lies within half the median sample
  period of the q topic (stamps that are equal always match); a sample without such a message on every
  other topic is dropped, and ``metadata["dropped_samples"]`` counts them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robotid_sim.errors import DataError

__all__ = [
    "JOINT_STATE",
    "JOINT_STATE_FIELDS",
    "ROSBAG_SUFFIXES",
    "JointStates",
    "is_rosbag2_folder",
    "read_joint_states",
]

#: file suffixes of a bag: ROS 1, rosbag2 MCAP and SQLite storage files
ROSBAG_SUFFIXES = (".bag", ".mcap", ".db3")
#: the message type read (rosbags' name for it, in ROS 1 and ROS 2 bags alike)
JOINT_STATE = "sensor_msgs/msg/JointState"
#: our signal -> the JointState field holding it
JOINT_STATE_FIELDS = {"q": "position", "qd": "velocity", "tau": "effort"}
_TOPIC_HINT = "choose with --topic (or 'topic:' in the layout); list several topics to merge them"


def is_rosbag2_folder(path: Path) -> bool:
    """Whether ``path`` is a rosbag2 folder (it holds a ``metadata.yaml``)."""
    return path.is_dir() and (path / "metadata.yaml").is_file()


@dataclass(frozen=True)
class JointStates:
    """JointState signals of a bag on one time base.

    Attributes:
        t_ns: (N,) int64 time of each sample in ns (header stamps, or receive time: ``metadata["clock"]``).
        names: the m joints of the columns, or None when the messages name none.
        signals: ``q`` and, where a topic carries them, ``qd`` and ``tau``: (N, m) float64, NaN where a
            message lacks that joint or that field.
        fields: signal -> where it comes from, e.g. ``"'/joint_states' position"``.
        metadata: ``topics`` (signal -> topic), ``clock`` (``header stamps`` or ``receive time``), ``t0_ns`` (the
            time of the first sample), ``zero_stamps`` (topic -> count) when the clock is the receive time, and
            when topics were merged ``merge`` (the rule) and ``dropped_samples``.
    """

    t_ns: np.ndarray
    names: list[str] | None
    signals: dict[str, np.ndarray]
    fields: dict[str, str]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class _Topic:
    """The JointState messages of one topic: stamps, receive times, joint names and a matrix per field."""

    name: str
    stamps: np.ndarray
    received: np.ndarray
    names: list[str] | None
    fields: dict[str, np.ndarray | None]  # None: the field is empty in every message


def read_joint_states(path: Path, topic: str | Sequence[str] | Mapping[str, str] | None) -> JointStates:
    """The ``sensor_msgs/JointState`` signals of a bag (module docstring: topics, joints, time, merging).

    Args:
        path: a ROS 1 ``.bag``, a rosbag2 folder, or a rosbag2 ``.db3`` / ``.mcap`` storage file.
        topic: a topic, a list of topics, a mapping signal (q, qd, tau) -> topic, or None (the bag's one
            JointState topic).

    Raises:
        DataError: not a readable bag; no, several (with ``topic`` None) or an unknown JointState topic (those
            of the bag listed); a topic of another type; no positions or efforts; a message whose arrays and
            name list differ in length; topics whose samples never meet.
    """
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.rosbag1 import ReaderError as Rosbag1Error
    from rosbags.rosbag2 import ReaderError as Rosbag2Error
    from rosbags.typesys import Stores, get_typestore

    where = f"'{path}'"
    try:  # bags recorded before ROS 2 Iron hold no message definitions: Humble's (JointState is the same in all)
        with AnyReader([path], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
            wanted = _wanted_topics(topic, {c.topic: c.msgtype for c in reader.connections}, where)
            raw = {name: ([], [], [], {s: [] for s in JOINT_STATE_FIELDS}) for name in wanted}
            connections = [c for c in reader.connections if c.topic in raw]
            for connection, received, data in reader.messages(connections=connections):
                message = reader.deserialize(data, connection.msgtype)
                stamps, times, names, values = raw[connection.topic]
                stamps.append(message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec)
                times.append(received)
                names.append(tuple(message.name))
                for signal, field_name in JOINT_STATE_FIELDS.items():
                    values[signal].append(getattr(message, field_name))
    except (AnyReaderError, Rosbag1Error, Rosbag2Error) as exc:
        reason = " ".join(str(exc).split())  # rosbags' YAML errors span several lines
        raise DataError(
            f"cannot read {where} as a ROS bag ({reason}); give a ROS 1 .bag, a rosbag2 folder (with "
            "metadata.yaml) or its .db3 / .mcap file, or set 'format' for another kind of file"
        ) from None
    topics = {name: _topic(name, *columns, where) for name, columns in raw.items()}
    return _merged(topics, _signal_topics(topic, wanted, topics, where), where)


def _wanted_topics(topic, available: dict[str, str], where: str) -> list[str]:
    """The topics ``topic`` names (default: the bag's one JointState topic), checked against the bag's."""
    joint_states = sorted(name for name, kind in available.items() if kind == JOINT_STATE)
    listing = ", ".join(joint_states)
    if topic is None:
        if len(joint_states) == 1:
            return joint_states
        if not joint_states:
            shown = ", ".join(f"{name} ({kind})" for name, kind in sorted(available.items())) or "none"
            raise DataError(f"{where} holds no {JOINT_STATE} topic (its topics: {shown}); record the joint states")
        raise DataError(f"{where} holds several {JOINT_STATE} topics ({listing}); {_TOPIC_HINT}")
    names = (
        [topic]
        if isinstance(topic, str)
        else list(dict.fromkeys(topic.values() if isinstance(topic, Mapping) else topic))
    )
    for name in names:
        if name not in available:
            raise DataError(
                f"{where} has no topic '{name}'; its {JOINT_STATE} topics: {listing or 'none'}; {_TOPIC_HINT}"
            )
        if available[name] != JOINT_STATE:
            raise DataError(
                f"topic '{name}' of {where} holds {available[name]} messages, not {JOINT_STATE}; its {JOINT_STATE} "
                f"topics: {listing or 'none'}; {_TOPIC_HINT}"
            )
    return names


def _topic(name: str, stamps: list, received: list, names: list[tuple], values: dict[str, list], where: str) -> _Topic:
    """One topic's messages as arrays: its joints in order of first appearance, a NaN-filled matrix per field."""
    label = f"topic '{name}' of {where}"
    if not stamps:
        raise DataError(f"{label} holds no message; {_TOPIC_HINT}")
    index = {group: k for k, group in enumerate(dict.fromkeys(names))}  # the distinct name lists, first seen first
    groups = list(index)
    ids = np.array([index[group] for group in names])
    if len(groups) > 1 and () in groups:
        k = next(i for i, group in enumerate(names) if bool(group) != bool(names[0]))
        raise DataError(
            f"message {k} of {label} {'names its joints' if names[k] else 'names no joint'} while message 0 "
            f"{'does' if names[0] else 'does not'}; every message must name its joints, or none"
        )
    for group in groups:
        if len(set(group)) != len(group):
            repeated = next(joint for joint in group if group.count(joint) > 1)
            raise DataError(f"message {names.index(group)} of {label} names joint '{repeated}' twice")
    if groups == [()]:  # no names: each message's entries in one order
        joints = None
        width = max(len(v) for v in values["q"])
        widths, columns = np.full(len(names), width), [np.arange(width)]
    else:
        joints = list(dict.fromkeys(joint for group in groups for joint in group))
        widths = np.array([len(g) for g in groups])[ids]
        columns = [np.array([joints.index(joint) for joint in group], dtype=int) for group in groups]
    m = len(joints) if joints is not None else int(widths[0])
    matrices = {s: _field_matrix(v, widths, ids, columns, m, JOINT_STATE_FIELDS[s], label) for s, v in values.items()}
    return _Topic(name, np.array(stamps, dtype=np.int64), np.array(received, dtype=np.int64), joints, matrices)


def _field_matrix(arrays: list, widths, ids, columns: list[np.ndarray], m: int, field_name: str, label: str):
    """One JointState field of every message as (n, m), NaN where a message's array is empty; None if all are."""
    lengths = np.array([len(a) for a in arrays])
    if not lengths.any():
        return None
    bad = np.flatnonzero((lengths != 0) & (lengths != widths))
    if bad.size:
        k = int(bad[0])
        raise DataError(
            f"message {k} of {label} has {lengths[k]} {field_name} values for {widths[k]} joints; a JointState "
            f"array holds one value per joint, or none"
        )
    flat = np.concatenate([np.asarray(a, dtype=float) for a in arrays])
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out = np.full((len(arrays), m), np.nan)
    for group, cols in enumerate(columns):
        rows = np.flatnonzero((ids == group) & (lengths > 0))
        out[rows[:, None], cols[None, :]] = flat[offsets[rows][:, None] + np.arange(cols.shape[0])]
    return out


def _signal_topics(topic, wanted: list[str], topics: dict[str, _Topic], where: str) -> dict[str, str]:
    """Signal -> the topic it is read from (module docstring, 'Topics')."""
    if isinstance(topic, Mapping):
        chosen = dict(topic)
        for signal, name in chosen.items():
            if topics[name].fields[signal] is None:
                raise DataError(
                    f"topic '{name}' of {where} carries no {JOINT_STATE_FIELDS[signal]} (topic.{signal}): its "
                    f"messages' '{JOINT_STATE_FIELDS[signal]}' arrays are empty; name the topic that publishes it"
                )
        for signal in ("qd", "tau"):
            if signal not in chosen and topics[chosen["q"]].fields[signal] is not None:
                chosen[signal] = chosen["q"]
    else:
        chosen = {}
        for signal in JOINT_STATE_FIELDS:
            carrying = [name for name in wanted if topics[name].fields[signal] is not None]
            if carrying:
                chosen[signal] = carrying[0]
    read = ", ".join(f"'{name}'" for name in wanted)
    if "q" not in chosen:
        raise DataError(f"the {JOINT_STATE} messages of {read} in {where} carry no position; {_TOPIC_HINT}")
    if "tau" not in chosen:
        raise DataError(
            f"the {JOINT_STATE} messages of {read} in {where} carry no effort (their 'effort' arrays are empty) but "
            "the joint torques are needed; add the topic that publishes them, e.g. --topic /joint_states --topic "
            "/joint_efforts (topic: [/joint_states, /joint_efforts] in the layout)"
        )
    return chosen


def _clock(topics: dict[str, _Topic]) -> tuple[dict[str, np.ndarray], str, dict[str, int]]:
    """Each topic's times (ns), the clock (``header stamps``, or ``receive time`` when any stamp is zero) and the
    count of zero stamps per topic that has some."""
    zero = {name: int(np.count_nonzero(t.stamps == 0)) for name, t in topics.items()}
    zero = {name: count for name, count in zero.items() if count}
    if not zero:
        return {name: t.stamps for name, t in topics.items()}, "header stamps", zero
    return {name: t.received for name, t in topics.items()}, "receive time", zero


def _nearest(times: np.ndarray, base: np.ndarray, tolerance: int) -> tuple[np.ndarray, np.ndarray]:
    """For each ``base`` time, the index of the nearest of ``times`` and whether it lies within ``tolerance``."""
    order = np.argsort(times, kind="stable")
    ordered = times[order]
    right = np.clip(np.searchsorted(ordered, base), 0, ordered.shape[0] - 1)
    left = np.clip(right - 1, 0, None)
    nearer = np.where(np.abs(ordered[left] - base) <= np.abs(ordered[right] - base), left, right)
    return order[nearer], np.abs(ordered[nearer] - base) <= tolerance


def _aligned(source: _Topic, target: _Topic, matrix: np.ndarray, where: str) -> np.ndarray:
    """``matrix`` of topic ``source`` in the joint columns of ``target`` (by name; NaN for a joint it lacks)."""
    if source is target:
        return matrix
    if source.names is not None and target.names is not None:
        out = np.full((matrix.shape[0], len(target.names)), np.nan)
        shared = [k for k, joint in enumerate(target.names) if joint in source.names]
        out[:, shared] = matrix[:, [source.names.index(target.names[k]) for k in shared]]
        return out
    if matrix.shape[1] != (len(target.names) if target.names is not None else target.fields["q"].shape[1]):
        raise DataError(
            f"topic '{source.name}' of {where} has {matrix.shape[1]} joints and '{target.name}' another number, and "
            "one of them names none; merged topics must name their joints, or have the same ones in one order"
        )
    return matrix


def _merged(topics: dict[str, _Topic], chosen: dict[str, str], where: str) -> JointStates:
    """The chosen signals on the time base of the q topic (module docstring, 'Merging')."""
    times, clock, zero_stamps = _clock(topics)
    base = topics[chosen["q"]]
    t = times[base.name]
    steps = np.diff(t)
    tolerance = int(np.median(steps)) // 2 if steps.size else 0
    rows = {base.name: np.arange(t.shape[0])}
    keep = np.ones(t.shape[0], dtype=bool)
    for name in dict.fromkeys(chosen.values()):
        if name != base.name:
            rows[name], matched = _nearest(times[name], t, tolerance)
            keep &= matched
    if not keep.any():
        others = ", ".join(f"'{name}' {_span(times[name])}" for name in rows if name != base.name)
        raise DataError(
            f"no message of {others} in {where} lies within {tolerance / 1e6:g} ms of one of '{base.name}' "
            f"{_span(t)}; merge topics recorded at the same time (on one clock)"
        )
    signals = {
        s: _aligned(topics[name], base, topics[name].fields[s][rows[name]], where)[keep] for s, name in chosen.items()
    }
    metadata: dict[str, Any] = {"topics": chosen, "clock": clock, "t0_ns": int(t[keep][0])}
    if zero_stamps:
        metadata["zero_stamps"] = zero_stamps
    if len(rows) > 1:
        metadata["merge"] = f"nearest message within {tolerance / 1e6:g} ms (half the median period of '{base.name}')"
        metadata["dropped_samples"] = int(np.count_nonzero(~keep))
    return JointStates(
        t_ns=t[keep],
        names=base.names,
        signals=signals,
        fields={s: f"'{name}' {JOINT_STATE_FIELDS[s]}" for s, name in chosen.items()},
        metadata=metadata,
    )


def _span(t: np.ndarray) -> str:
    """A topic's time span in a message: ``(t = a .. b s)``."""
    return f"(t = {t.min() / 1e9:.3f} .. {t.max() / 1e9:.3f} s)"

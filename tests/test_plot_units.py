"""Every axis of every figure names its unit (issue 27, item 14): rad, rad/s, rad/s², N·m (m, m/s, m/s², N for a
prismatic joint), s, ``[-]`` for a ratio, ``[count]`` for a count. The figures are caught at ``savefig``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from robotid_sim.control.comparison import ClosedLoopOutcome
from robotid_sim.report import StudyResult, write_report
from robotid_sim.report.plots import plot_friction_curves, plot_sparsity, plot_tracking_errors
from robotid_sim.studies import load_run_result

UNIT = re.compile(r"\[[^\[\]]+\]$")


@pytest.fixture()
def axis_labels(monkeypatch) -> dict[str, list[str]]:
    """{PNG file name: the x and y labels of its axes (colour bars included) that are not empty}, as saved (the
    files are left empty)."""
    saved: dict[str, list[str]] = {}

    def catching(fig, path, *args, **kwargs):  # the labels, and an empty file: rendering is not under test here
        labels = [label for ax in fig.axes for label in (ax.get_xlabel(), ax.get_ylabel()) if label.strip()]
        saved[Path(path).name] = labels
        Path(path).write_bytes(b"")

    monkeypatch.setattr(Figure, "savefig", catching)
    return saved


def _without_unit(saved: dict[str, list[str]]) -> list[str]:
    return [f"{name}: {label!r}" for name, labels in saved.items() for label in labels if not UNIT.search(label)]


def test_every_axis_of_the_figures_of_a_runs_report_names_its_unit(history_run, tmp_path, axis_labels):
    # the report of a tiny PRRRP run with a parameter history and a sensitivity study, drawn again from its folder
    # (the same figures as the run's own: test_first_screen.test_the_report_rebuilt_from_a_run_folder_is_the_runs_own)
    write_report(tmp_path / "again", load_run_result(history_run))
    assert {"torque_comparison.png", "forward_dynamics.png", "sensitivity.png", "values_hopfield.png"} <= set(
        axis_labels
    )
    assert _without_unit(axis_labels) == []
    # the PRRRP arm: joint 1 is prismatic (a force, N), joint 2 revolute (a torque, N·m)
    torque = [label for label in axis_labels["torque_comparison.png"] if label.startswith("torque")]
    assert torque[:2] == ["torque [N]", "torque [N·m]"]
    assert "qdd [m/s²]" in axis_labels["forward_dynamics.png"] and "q [mm]" in axis_labels["forward_dynamics.png"]


def _study(kinds: list[str]) -> StudyResult:
    n, t = len(kinds), np.linspace(0.0, 1.0, 50)
    qd = np.linspace(-1.0, 1.0, 21)
    error = np.outer(np.sin(t), np.ones(n))
    return StudyResult(
        title="units",
        robot_name="toy",
        joint_names=[f"j{k + 1}" for k in range(n)],
        scenario={},
        t_validation=t,
        tau_measured=np.zeros((50, n)),
        tau_true=None,
        outcomes=[],
        friction_curves={"qd": qd, "true": np.outer(qd, np.ones(n))},
        closed_loop=[ClosedLoopOutcome("pid", {"units": ["mm", "deg"][:n]}, t=t, error=error)],
        joint_kinds=kinds,
    )


def test_friction_tracking_and_sparsity_figures_name_their_units(tmp_path, axis_labels):
    study = _study(["prismatic", "revolute"])
    plot_friction_curves(study, tmp_path / "friction.png")
    plot_tracking_errors(study, tmp_path / "tracking.png")
    plot_sparsity(["a", "b", "c"], np.array([1.0, 1e-4, 0.5]), tmp_path / "sparsity.png", 1e-3)
    assert _without_unit(axis_labels) == []
    assert axis_labels["friction.png"][:3] == ["velocity [m/s]", "friction torque [N]", "velocity [rad/s]"]

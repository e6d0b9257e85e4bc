"""Carried over to issue 27: ``check_excitation`` and the dense fallback stacked the regressor without a budget.

A scenario's memory budget counts no stacked regressor for estimators that stream it, yet the excitation check's QR
(where the Gram matrix cannot decide) and the dense QR fallback of an ill-conditioned solve stacked it all the
same. Each now asks :meth:`IdentificationProblem.check_stacked_memory` first and is refused with the estimate.
"""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim.errors import IdentificationError
from robotid_sim.identification import IdentificationProblem
from robotid_sim.identification import problem as problem_module
from robotid_sim.sim.dataset import Dataset

#: the regressor of the problem below: 400 samples × 3 joints × b base parameters × 8 bytes × 5 copies
TINY_RAM = 1000


@pytest.fixture()
def problem(robots) -> IdentificationProblem:
    robot = robots["planar3r"]
    t = np.arange(400) * 0.005
    w = np.array([1.0, 1.7, 2.3])
    q, qd, qdd = np.sin(np.outer(t, w)), np.cos(np.outer(t, w)) * w, -np.sin(np.outer(t, w)) * w**2
    return IdentificationProblem(robot, Dataset(t, q, qd, qdd, robot.inverse_dynamics(q, qd, qdd)))


@pytest.fixture()
def small_machine(monkeypatch):
    monkeypatch.setattr(problem_module, "memory_limit_bytes", lambda: TINY_RAM // 2)


def _estimate(problem) -> str:
    return f"{problem.n_samples * problem.n_dof * problem.base.count * 8 * 5 / 1e9:.3g} GB"


def test_the_excitation_checks_qr_is_refused_with_the_estimate_where_it_would_not_fit(
    problem, small_machine, monkeypatch
):
    monkeypatch.setattr(problem_module, "_gram_rank_test", lambda gram: None)  # the Gram matrix cannot decide
    with pytest.raises(IdentificationError) as info:
        problem.check_excitation()
    message = str(info.value)
    assert message.startswith("the excitation check (a QR of the stacked rows")
    assert f"about {_estimate(problem)} (400 samples × 3 joints × {problem.base.count} base parameters" in message
    assert "trim or decimate" in message
    assert "_kept_regressor" not in problem.__dict__  # refused before stacking


def test_the_dense_fallback_and_base_regressor_are_refused_too(problem, small_machine):
    with pytest.raises(IdentificationError, match="the dense QR fallback of an ill-conditioned least-squares solve"):
        problem.least_squares().source.matrix()
    with pytest.raises(IdentificationError, match=r"the stacked base regressor \(problem.base_regressor\(\)\)"):
        problem.base_regressor()
    assert "_base_regressor" not in problem.__dict__


def test_the_streamed_checks_need_no_stacked_regressor(problem, small_machine):
    assert np.isfinite(problem.check_excitation())  # decided on the Gram matrix
    assert problem.least_squares().solve().beta.shape == (problem.base.count,)

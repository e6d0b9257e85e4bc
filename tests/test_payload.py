"""Payload identification (issue 29, deliver 4): a payload's 10 inertial parameters at the flange, given an arm model
identified without it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.errors import IdentificationError
from robotid_sim.identification.payload import PayloadEstimate, identify_payload
from robotid_sim.robot.physical import center_of_mass, link_violations, pseudo_inertia
from robotid_sim.sim.dataset import Dataset
from tests.helpers import cli_process
from tests.test_drives import hyper9_recording, payload_parameters, with_payload

#: the payload of the acceptance case: 1.5 kg, its COM offset from the flange, some inertia
MASS, COM = 1.5, np.array([0.05, 0.03, 0.08])
PHI = payload_parameters(MASS, COM, [[0.004, 0.0005, 0.0], [0.0005, 0.005, 0.0], [0.0, 0.0, 0.003]])


@pytest.fixture(scope="module")
def hyper9_case(robots, tmp_path_factory):
    """hyper9 at its default noise on its default excitation (:func:`tests.test_drives.hyper9_recording`): an arm
    model identified by OLS without the payload, saved, and the recording with the payload, saved as NPZ."""
    robot = robots["hyper9"]
    model = rid.identify(hyper9_recording(robot, robot, 0), robot, "ols")
    loaded = hyper9_recording(robot, with_payload(robot, PHI), 1)
    folder = tmp_path_factory.mktemp("payload")
    model.save(folder / "arm.json")
    loaded.save(folder / "loaded.npz")
    return robot, model, loaded, folder


def test_payload_mass_within_one_percent_and_com_within_5_mm(hyper9_case):
    robot, model, loaded, _ = hyper9_case
    estimate = identify_payload(model, loaded, robot.structure())
    assert abs(estimate.mass / MASS - 1) < 0.01
    assert np.linalg.norm(estimate.center_of_mass - COM) < 0.005
    assert np.all(estimate.std > 0) and np.all(estimate.center_of_mass_std > 0)
    assert estimate.to_dict()["least_squares"]["physically_consistent"] == (not estimate.violations())
    # the least-squares inertia about the COM is not a rigid body's here: the consistent estimate is the result,
    # a rigid body (pseudo-inertia eigenvalues >= -1e-9, the strict check passes) within the same tolerances
    assert estimate.violations() and estimate.result == "consistent"
    phi = estimate.result_parameters
    assert np.linalg.eigvalsh(pseudo_inertia(phi))[0] >= -1e-9 and not link_violations(phi, "payload")
    assert abs(phi[9] / MASS - 1) < 0.01 and np.linalg.norm(center_of_mass(phi) - COM) < 0.005
    # the constraint costs little fit: each joint's residual RMS within 1 % of the unconstrained one
    np.testing.assert_array_less(estimate.consistent_residual_rms, 1.01 * estimate.residual_rms)


def test_a_consistent_least_squares_estimate_is_the_result(hyper9_case):
    robot, model, loaded, _ = hyper9_case
    structure = robot.structure()
    first = (robot.n_dof - 1) * robot.parameter_block
    columns = np.arange(first, first + 10)
    payload = structure.regressor(loaded.q, loaded.qd, loaded.qdd, columns=columns) @ PHI
    noise = 1e-3 * np.random.default_rng(2).standard_normal(loaded.tau.shape)
    tau = model.predict_torque(loaded.q, loaded.qd, loaded.qdd) + payload + noise  # the arm exactly its model
    estimate = identify_payload(model, Dataset(loaded.t, loaded.q, loaded.qd, loaded.qdd, tau), structure)
    assert not estimate.violations() and estimate.result == "least_squares"
    assert estimate.result_parameters is estimate.parameters
    np.testing.assert_array_equal(estimate.consistent, estimate.parameters)
    np.testing.assert_allclose(estimate.parameters, PHI, atol=1e-3)


def test_an_inconsistent_payload_is_named():
    phi = PHI.copy()
    phi[9] = -1.0
    rms = np.zeros(9)
    estimate = PayloadEstimate(phi, np.eye(10) * 1e-6, PHI, "joint9", 10.0, rms, rms, 100)
    verdict = estimate.to_dict()
    assert verdict["result"] == "consistent" and verdict["consistent"]["physically_consistent"]
    assert not verdict["least_squares"]["physically_consistent"]
    assert "payload: mass is not positive" in verdict["least_squares"]["violations"][0]


def test_a_recording_that_leaves_the_last_joints_still_is_refused(hyper9_case):
    robot, model, loaded, _ = hyper9_case
    still = Dataset(loaded.t, loaded.q[:1].repeat(loaded.n_samples, 0), 0 * loaded.qd, 0 * loaded.qdd, loaded.tau)
    with pytest.raises(IdentificationError, match="does not excite the payload's parameters"):
        identify_payload(model, still, robot.structure())


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([], "--payload needs --model arm.json"),
        (["--model", "arm.json", "--payload-mass", "2"], "--payload-mass does not apply to --payload"),
        (["--model", "missing.json"], "missing.json"),
        (["--model", "arm.json", "--robot", "planar3r"], "planar3r"),
    ],
)
def test_payload_cli_bad_input_is_one_error_line_and_writes_nothing(hyper9_case, extra, expected):
    folder = hyper9_case[3]
    before = _listing(folder)
    robot = [] if "--robot" in extra else ["--robot", "hyper9"]
    result = cli_process(["identify", "--payload", *robot, "--data", "loaded.npz", *extra], folder)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], result.stderr
    assert _listing(folder) == before


def test_payload_cli_writes_a_run_folder(hyper9_case):
    folder = hyper9_case[3]
    args = ["identify", "--payload", "--robot", "hyper9", "--model", "arm.json", "--data", "loaded.npz"]
    result = cli_process([*args, "--out", "runs", "--name", "tool"], folder)
    assert result.returncode == 0, result.stderr
    (run_dir,) = (folder / "runs").iterdir()
    data = json.loads((run_dir / "payload.json").read_text())
    assert data["recordings"] == ["loaded.npz"] and data["result"] == "consistent"
    assert abs(data["least_squares"]["mass_kg"] / MASS - 1) < 0.01 and data["least_squares"]["mass_std_kg"] > 0
    assert not data["least_squares"]["physically_consistent"] and data["consistent"]["physically_consistent"]
    assert abs(data["consistent"]["mass_kg"] / MASS - 1) < 0.01
    report = (run_dir / "report.md").read_text()
    assert "Payload at the flange" in report and "**Result: the physically consistent estimate**" in report
    assert "payload mass:" in result.stdout and str(run_dir.name) in result.stdout
    assert "result: the physically consistent estimate ('consistent')" in result.stdout

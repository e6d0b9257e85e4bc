"""The cost of one CLOE / CLIE Jacobian on BIRDy's TX40 loop: forward sensitivities against forward differences
(issue 30).

    python benchmarks/closed_loop_jacobian.py [--duration 2] [--repeats 3]

The TX40 (52 base parameters) under BIRDy's PID (5 kHz, four physics steps per control step) along its default
excitation for ``duration`` seconds, samples at 1 kHz, simulated noise-free on the model at 1.02 × the true base
parameters. Times, in the same process, the median over ``repeats`` of

- ``finite_difference``: ONE batched :meth:`ClosedLoopSimulation.run` of the b + 1 copies β, β + h_i e_i (what
  cloe's ``jacobian="finite_difference"`` runs per Jacobian, threads over the copies);
- ``sensitivity``: :meth:`ClosedLoopSimulation.sensitivities` (one loop carrying its 52 derivative columns,
  serial), with the rigid-body derivatives held over a control step (the default) and evaluated at every
  physics step;
- one copy of :meth:`ClosedLoopSimulation.run`, for scale;

and prints their ratios and how far the two Jacobians are apart (cloe's scaled coordinates, relative to the
largest column). The first call of each compiles or loads numba's cache and is not timed. numba's threads:
``NUMBA_NUM_THREADS``; the machine's load (``uptime``) matters on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from robotid_sim.identification import IdentificationProblem
from robotid_sim.identification.closed_loop_model import ClosedLoopSimulation, ClosedLoopSpec, simulate_closed_loop
from robotid_sim.robot import load_robot
from robotid_sim.sim.closed_loop_data import BIRDY_TX40_PID
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.simulate import resolve_excitation

SAMPLE_RATE_HZ = 1000.0


def tx40_simulation(duration: float) -> tuple[ClosedLoopSimulation, np.ndarray]:
    """The simulation of a noise-free TX40 record of ``duration`` s, and the base parameters to linearise at."""
    robot = load_robot("tx40")
    excitation = resolve_excitation(robot, "default").describe()
    spec = ClosedLoopSpec(BIRDY_TX40_PID, excitation, duration, SAMPLE_RATE_HZ)
    t = np.arange(1, int(round(duration * SAMPLE_RATE_HZ))) / SAMPLE_RATE_HZ
    sim = simulate_closed_loop(robot.structure(), robot.true_parameters(), spec, t)
    metadata = {
        "robot": "tx40",
        "closed_loop": {
            "controller": BIRDY_TX40_PID.to_dict(),
            "excitation": excitation,
            "duration": duration,
            "sample_rate_hz": SAMPLE_RATE_HZ,
        },
    }
    ds = Dataset(t, *(sim[key][0] for key in ("q", "qd", "qdd", "u")), joint_names=robot.joint_names, metadata=metadata)
    problem = IdentificationProblem(robot.structure(), ds)
    return ClosedLoopSimulation(problem), problem.base.K @ robot.true_parameters() * 1.02


def median_time(call, repeats: int) -> tuple[float, object]:
    """(median seconds over ``repeats`` calls after an untimed first one, the last call's answer)."""
    answer = call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=2.0, help="seconds of closed loop (BIRDy: 10)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    simulation, beta = tx40_simulation(args.duration)
    b = len(beta)
    h = 1e-6 * np.maximum(np.abs(beta), 1.0)  # cloe's default fd_step (in its scaled coordinates)
    copies = np.vstack([beta, beta + np.diag(h)])

    def differences():
        run = simulation.run(copies)
        return np.moveaxis((run["q"][1:] - run["q"][0]) / h[:, None, None], 0, -1)

    one, _ = median_time(lambda: simulation.run(beta), args.repeats)
    fd, dq_fd = median_time(differences, args.repeats)
    held, (_, dq, _) = median_time(lambda: simulation.sensitivities(beta, h), args.repeats)
    each, (_, dq_each, _) = median_time(lambda: simulation.sensitivities(beta, h, hold=False), args.repeats)
    scale = np.abs(beta)
    reference = dq_fd.reshape(-1, b) * scale
    largest = np.linalg.norm(reference, axis=0).max()
    print(f"TX40, {args.duration:g} s of BIRDy's loop ({len(simulation.times)} samples, b = {b}), "
          f"NUMBA_NUM_THREADS={os.environ.get('NUMBA_NUM_THREADS', 'default')}, median of {args.repeats}:")  # fmt: skip
    print(f"  one copy (run)                          {one:8.3f} s")
    print(f"  finite_difference (b + 1 = {b + 1} copies)   {fd:8.3f} s")
    for label, seconds, sens in (("held over a control step", held, dq), ("at every physics step", each, dq_each)):
        gap = np.linalg.norm(sens.reshape(-1, b) * scale - reference, axis=0).max() / largest
        print(
            f"  sensitivity, {label:26s}{seconds:8.3f} s  = {seconds / one:4.1f} copies, {fd / seconds:5.1f}x "
            f"cheaper than finite_difference; max column gap to it {gap:.1e}"
        )


if __name__ == "__main__":
    main()

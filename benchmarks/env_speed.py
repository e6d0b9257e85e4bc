"""Env steps per second: the vector env of an identified model against PyBullet (issue 11).

    python benchmarks/env_speed.py [--robot hyper9] [--copies 1024] [--repeats 5]

Four envs on the same robot and task (reach, 10 ms control step, 1 ms physics step: 10
substeps per env step), timed in the same process with interleaved repeats (medians):

- ``PyBulletArm-v0``: one arm in PyBullet (the truth), friction on;
- ``IdentifiedArm-v0``: one arm stepped by an identified model (a ``BaseParameterModel`` holding
  the true base values, as in ``benchmarks/forward_dynamics_speed.py``), one compiled call per env step;
- the vector env (``gymnasium.make_vec``, vector entry point) with ``--copies`` copies of that model;
- the same vector env with ``parameter_draws="covariance"`` (a diagonal covariance of 1 % of
  each base value: each copy has its own parameters, the per-copy compiled kernel).

Actions are uniform in ±ACTION_AMPLITUDE of the torque limits; episodes that end are reset (the
single envs by ``reset()``, the vector envs by their autoreset), and resets count in the time. A
vector step counts as ``--copies`` env steps. The goals of issue 28: one ``IdentifiedArm-v0`` at ≥ 10×
the steps per second of one ``PyBulletArm-v0``, the vector env with 1,024 copies of hyper9 at ≥ 30×
(goal 60×); issue 11's was ≥ 10× (stretch 20×) for the vector env.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium
import numpy as np

import robotid_sim as rid
from robotid_sim.identification import BaseParameterModel

ACTION_AMPLITUDE = 0.05


def single_rate(env, actions: np.ndarray) -> float:
    """Env steps per second of a single env over the rows of ``actions`` (K, n)."""
    t0 = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
    return len(actions) / (time.perf_counter() - t0)


def vector_rate(env, actions: np.ndarray) -> float:
    """Env steps per second of a vector env over ``actions`` (K, B, n): K·B steps."""
    t0 = time.perf_counter()
    for a in actions:
        env.step(a)
    return actions.shape[0] * actions.shape[1] / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="hyper9")
    parser.add_argument("--copies", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--single-steps", type=int, default=200, help="env steps per timing of a single env")
    parser.add_argument("--vector-steps", type=int, default=10, help="vector steps per timing of the vector env")
    args = parser.parse_args()

    robot = rid.load_robot(args.robot)
    base = robot.base_parameters()
    beta = base.true_values()
    model = BaseParameterModel(robot.structure(), base.independent, beta)
    drawn = BaseParameterModel(robot.structure(), base.independent, beta, covariance=np.diag((0.01 * beta) ** 2))
    n, B = robot.n_dof, args.copies

    pybullet_env = gymnasium.make("robotid_sim/PyBulletArm-v0", robot=robot)
    identified_env = gymnasium.make("robotid_sim/IdentifiedArm-v0", model=model, robot=robot)
    vector_env = gymnasium.make_vec("robotid_sim/IdentifiedArm-v0", num_envs=B, model=model, robot=robot)
    drawn_env = gymnasium.make_vec(
        "robotid_sim/IdentifiedArm-v0", num_envs=B, model=drawn, robot=robot, parameter_draws="covariance"
    )
    rng = np.random.default_rng(0)
    for env in (pybullet_env, identified_env, vector_env, drawn_env):
        env.reset(seed=0)
    # warm-up: PyBullet world, numba kernels (loaded from the cache or compiled), the per-copy driver
    single_rate(pybullet_env, rng.uniform(-1, 1, (5, n)) * ACTION_AMPLITUDE)
    single_rate(identified_env, rng.uniform(-1, 1, (5, n)) * ACTION_AMPLITUDE)
    vector_rate(vector_env, rng.uniform(-1, 1, (2, B, n)) * ACTION_AMPLITUDE)
    vector_rate(drawn_env, rng.uniform(-1, 1, (2, B, n)) * ACTION_AMPLITUDE)

    rates: dict[str, list[float]] = {"pybullet": [], "identified": [], "vector": [], "vector_draws": []}
    for _ in range(args.repeats):
        single = rng.uniform(-1, 1, (args.single_steps, n)) * ACTION_AMPLITUDE
        batch = rng.uniform(-1, 1, (args.vector_steps, B, n)) * ACTION_AMPLITUDE
        rates["pybullet"].append(single_rate(pybullet_env, single))
        rates["identified"].append(single_rate(identified_env, single))
        rates["vector"].append(vector_rate(vector_env, batch))
        rates["vector_draws"].append(vector_rate(drawn_env, batch))
    median = {k: statistics.median(v) for k, v in rates.items()}

    print(f"{robot.name} ({n} joints), reach task, 10 substeps per env step; medians of {args.repeats} repeats")
    print(f"{'env':<46} {'env steps/s':>12} {'vs PyBulletArm-v0':>18}")
    rows = [
        ("PyBulletArm-v0 (1 arm)", "pybullet"),
        ("IdentifiedArm-v0 (1 arm)", "identified"),
        (f"vector env, {B} copies", "vector"),
        (f"vector env, {B} copies, parameter_draws", "vector_draws"),
    ]
    for label, key in rows:
        print(f"{label:<46} {median[key]:>12,.0f} {median[key] / median['pybullet']:>17.1f}x")
    spread = {k: (min(v), max(v)) for k, v in rates.items()}
    print("range over repeats: " + ", ".join(f"{k} {lo:,.0f}-{hi:,.0f}" for k, (lo, hi) in spread.items()))
    for env in (pybullet_env, identified_env, vector_env, drawn_env):
        env.close()


if __name__ == "__main__":
    main()

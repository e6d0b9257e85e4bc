"""What one simulation will cost, estimated before anything is simulated (SPEC §13: bad input never harms the
machine).

:func:`simulation_cost` turns a simulation's numbers into steps, samples, bytes and seconds (cheap arithmetic,
nothing allocated), :func:`limit_problems` compares an estimate with the memory and time limits, and
:func:`check_simulation` refuses one simulation above them (:func:`~robotid_sim.sim.simulate.simulate` calls it
before the trajectory is evaluated), :func:`check_closed_loop` a closed-loop run's (``run_closed_loop`` and a
study's ``closed_loop:`` section). :mod:`robotid_sim.scenario.budget` builds a scenario run's estimate from the
same pieces, and ``rl-demo`` its training's; all of them refuse through :func:`limit_problems` with the same
wording.

One simulation (``n`` joints, S physics steps, N recorded samples, bytes of float64):

- memory ``S · n · 8 · 25`` while simulating (the reference ``q, qd, qdd`` at the physics rate, the temporaries
  of evaluating it and the tracking loop's per-step copies: about 22 more, measured) plus ``N · n · 8 · 10``
  for the recorded dataset (measured and true ``q, qd, qdd, tau``, rigid-body torque, t);
- time ``S · 40 µs`` (``benchmarks/simulator_speed.py``: 21–34 µs per step on prrrp and hyper9).

Limits: memory :func:`robotid_sim.safety.memory_limit_bytes` (half of this machine's RAM), time
:data:`TIME_LIMIT_S` (2 hours); ``allow_large`` lifts the time limit and raises the memory limit to the whole RAM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from robotid_sim.errors import ConfigError
from robotid_sim.safety import memory_limit_bytes

#: seconds of wall time per physics step of the tracking simulation (measured 21–34 µs, rounded up)
SECONDS_PER_STEP = 40e-6
#: longest run accepted without ``allow_large`` (seconds)
TIME_LIMIT_S = 2 * 3600.0
#: float64 values held per physics step and joint while simulating (reference + temporaries)
SIMULATION_VALUES_PER_STEP = 25
#: float64 arrays (N, n) a recorded dataset holds (measured and true signals, rigid torque, t)
RECORDED_ARRAYS = 10
#: bytes of one float64
F64_BYTES = 8
#: seconds of wall time per control step of a closed-loop run (measured 90–190 µs on three_axis, rounded up)
CLOSED_LOOP_SECONDS_PER_STEP = 250e-6
#: float64 arrays (S, n) recorded per controller of a closed-loop run (t, q, qd, q_ref, qd_ref, tau)
CLOSED_LOOP_ARRAYS = 6


@dataclass(frozen=True)
class SimulationCost:
    """What one simulation of ``duration`` seconds at physics step ``dt`` and recording rate ``rate_hz`` costs.

    Attributes:
        n_dof: joints.
        steps: physics steps S (an int; may be astronomically large, nothing is allocated).
        samples: recorded samples N = ceil(S / decimation).
    """

    n_dof: int
    steps: int
    samples: int

    @property
    def working_bytes(self) -> float:
        """Memory while simulating: the reference at the physics rate and the loop's temporaries."""
        return float(self.steps) * self.n_dof * F64_BYTES * SIMULATION_VALUES_PER_STEP

    @property
    def data_bytes(self) -> float:
        """Memory of the recorded dataset (measured and true signals)."""
        return float(self.samples) * self.n_dof * F64_BYTES * RECORDED_ARRAYS

    @property
    def file_bytes(self) -> float:
        """Size of the dataset's ``.npz`` file: t and the measured and true q, qd, qdd, tau."""
        return float(self.samples) * (9 * self.n_dof + 1) * F64_BYTES

    @property
    def seconds(self) -> float:
        """Wall time of the simulation."""
        return float(self.steps) * SECONDS_PER_STEP


def simulation_cost(n_dof: int, duration: float, dt: float, rate_hz: float, what: str = "simulation") -> SimulationCost:
    """Steps and samples of one simulation, checking its numbers (no array is made).

    Raises:
        ConfigError: a duration, step or rate that is not a finite positive number, a rate that does not
            divide the physics rate ``1/dt`` (the same rule as :func:`~robotid_sim.sim.simulate.simulate`), or
            fewer than 2 samples.
    """
    for name, value in (("duration", duration), ("dt", dt), ("rate_hz", rate_hz)):
        if not isinstance(value, int | float) or not math.isfinite(value) or not value > 0:
            raise ConfigError(f"{what}: {name} must be a finite number > 0, got {value!r}")
    ratio = 1.0 / (rate_hz * dt)
    decimation = round(ratio) if math.isfinite(ratio) else 0
    if decimation < 1 or abs(decimation * rate_hz * dt - 1.0) > 1e-9:
        raise ConfigError(
            f"{what}: rate_hz = {rate_hz:g} must divide the physics rate 1/dt = {1 / dt:g} Hz "
            "(e.g. 100, 200, 500, 1000)"
        )
    steps_float = duration / dt
    if not math.isfinite(steps_float):
        raise ConfigError(f"{what}: duration / dt = {duration:g} / {dt:g} is not a finite number of steps")
    steps = max(int(round(steps_float)), 1)
    samples = -(-steps // decimation)
    if samples < 2:
        raise ConfigError(
            f"{what}: {duration:g} s recorded at rate_hz = {rate_hz:g} Hz gives {samples} sample; a dataset needs at "
            "least 2: raise the rate or the duration"
        )
    return SimulationCost(n_dof=int(n_dof), steps=steps, samples=samples)


def limit_problems(
    memory_bytes: float,
    seconds: float,
    memory_limit: float,
    allow_large: bool,
    time_limit: float | None = TIME_LIMIT_S,
    work: str = "simulation",
) -> list[str]:
    """What an estimate exceeds: ``["about 60 GB of memory (limit 12 GB, half of this machine's RAM)", ...]``.

    Args:
        memory_bytes, seconds: the estimate.
        memory_limit: bytes (the caller's, so that it applies ``allow_large`` to it).
        allow_large: no time limit; the memory limit is then called "this machine's RAM".
        time_limit: seconds, or None for none.
        work: what the seconds are spent on ("simulation", "training").
    """
    memory_what = "this machine's RAM" if allow_large else "half of this machine's RAM"
    problems = []
    if memory_bytes > memory_limit:
        problems.append(
            f"about {format_bytes(memory_bytes)} of memory (limit {format_bytes(memory_limit)}, {memory_what})"
        )
    if not allow_large and time_limit is not None and seconds > time_limit:
        problems.append(f"about {format_seconds(seconds)} of {work} (limit {format_seconds(time_limit)})")
    return problems


def check_simulation(cost: SimulationCost, allow_large: bool = False, hint: str = "") -> None:
    """Refuse one simulation above the memory or time limit (module docstring), before anything is allocated.

    Args:
        cost: the simulation's :func:`simulation_cost`.
        allow_large: lift the time limit and raise the memory limit to the whole RAM.
        hint: how to shrink it, in the caller's words (flags or arguments).

    Raises:
        ConfigError: stating the estimate, the limit and ``hint``.
    """
    limit = memory_limit_bytes() * (2 if allow_large else 1)
    problems = limit_problems(cost.working_bytes + cost.data_bytes, cost.seconds, limit, allow_large)
    if problems:
        raise ConfigError(
            f"this simulation ({cost.steps:.3g} physics steps, {cost.samples:.3g} samples, {cost.n_dof} joints) "
            f"would need {' and '.join(problems)}; {hint}"
        )


def check_closed_loop(
    n_dof: int,
    duration: float,
    dt: float,
    controllers: int,
    allow_large: bool = False,
    hint: str = "shorten closed_loop.duration (closed-loop --duration) or raise closed_loop.dt",
) -> SimulationCost:
    """The steps of a closed-loop comparison of ``controllers`` runs of ``duration`` s at ``dt``, refused
    above the memory or time limit: ``S · c · 250 µs`` for ``c`` controllers of ``S`` control steps each (the
    PyBullet torque step, the controller and a model's dynamics at N = 1: 90–190 µs per step measured on
    three_axis), and ``S · n · 8 · (25 + 6 c)`` bytes (the reference and the loop's temporaries, and the six
    recorded arrays per controller). ``hint``: how to shrink it, in the caller's words.

    Raises:
        ConfigError: a duration or step that is not a finite positive number, or a comparison above the
            limits, stating the estimate and the limit.
    """
    cost = simulation_cost(n_dof, duration, dt, 1.0 / dt if dt > 0 else math.nan, "closed_loop")
    memory = cost.working_bytes + float(cost.steps) * n_dof * F64_BYTES * CLOSED_LOOP_ARRAYS * controllers
    seconds = float(cost.steps) * controllers * CLOSED_LOOP_SECONDS_PER_STEP
    limit = memory_limit_bytes() * (2 if allow_large else 1)
    problems = limit_problems(memory, seconds, limit, allow_large, work="closed-loop simulation")
    if problems:
        raise ConfigError(
            f"the closed loop ({controllers} controllers x {cost.steps:.3g} steps) would need "
            f"{' and '.join(problems)}; {hint}"
        )
    return cost


def format_bytes(value: float) -> str:
    """``"3.2 GB"``, ``"512 MB"`` (decimal units)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def format_seconds(value: float) -> str:
    """``"2 h"``, ``"35 min"``, ``"12 s"``; years for the absurd."""
    if value >= 365 * 86400:
        return f"{value / (365 * 86400):.3g} years"
    if value >= 3600:
        return f"{value / 3600:.3g} h"
    if value >= 60:
        return f"{value / 60:.3g} min"
    return f"{value:.3g} s"

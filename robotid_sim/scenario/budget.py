"""What a run will cost, estimated before anything is simulated (SPEC §13: bad input never harms the machine).

A scenario asking for ``duration: 1e5`` s, ``dt: 1e-12`` or ``rate_hz: 1e12`` would otherwise grow until the
machine kills it, or end in a NumPy allocation traceback. :func:`~robotid_sim.sim.cost.simulation_cost` turns one
simulation's numbers into steps, samples, bytes and seconds (cheap arithmetic, nothing allocated; it lives with
the simulator, whose :func:`~robotid_sim.sim.simulate.simulate` checks itself with it), :func:`estimate_run` adds
up a scenario run, and :meth:`RunBudget.check` refuses one above the limits with a :class:`ConfigError` that
states the estimate and the limit (the wording of :func:`~robotid_sim.sim.cost.limit_problems`, shared by every
check).

The estimate (bytes of float64, ``n`` joints, ``b`` base parameters, S physics steps, N recorded samples):

- simulating: ``S · n · 8 · 25``: the reference ``q, qd, qdd`` at the physics rate (3 arrays), the
  temporaries of evaluating it and the tracking loop's per-step copies (measured: about 22 more);
- recorded data: ``N · n · 8 · 10``: measured and true ``q, qd, qdd, tau``, rigid-body torque, t;
- identifying: ``N · n · 8 · (5 b + 30)`` when some estimator forms the stacked base regressor
  (``problem.base_regressor()``): the regressor ``N · n · b``, its working copies (column-normalised copy,
  SVD factors: 5 regressors at the peak, measured) and the Newton–Euler temporaries of forming it (about
  30 per sample and joint); ``N · n · 8 · 12`` when every estimator streams it
  (:attr:`~robotid_sim.identification.Estimator.streams_regressor`: the built-in least squares read
  chunks of :data:`~robotid_sim.identification.problem.CHUNK_BYTES` and keep per-row vectors only:
  measurements, residuals, weights, row indices);
- the peak of the three phases (simulate the identification data; simulate the validation data while the
  identification data is kept; identify with both datasets in memory);
- time: ``S · 40 µs`` per simulation (``benchmarks/simulator_speed.py``: 21–34 µs per step on prrrp and hyper9);
- disk: the two datasets' ``.npz`` files, ``N · (9 n + 1) · 8`` bytes each.

A closed-loop comparison (``closed_loop:``) is checked on its own by
:func:`~robotid_sim.sim.cost.check_closed_loop` (with the simulator: ``run_closed_loop`` checks itself with it).

Limits: memory :func:`robotid_sim.safety.memory_limit_bytes` (half of this machine's RAM), time
:data:`TIME_LIMIT_S` (2 hours), the free space of the output folder. ``simulation.allow_large: true`` lifts the
time limit and raises the memory limit to the whole RAM; the disk limit always holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from robotid_sim.errors import ConfigError
from robotid_sim.identification.problem import STACKED_REGRESSOR_COPIES
from robotid_sim.safety import memory_limit_bytes
from robotid_sim.sim.cost import (
    F64_BYTES,
    TIME_LIMIT_S,
    SimulationCost,
    format_bytes,
    limit_problems,
)

#: float64 values per sample and joint of the Newton–Euler recursion forming the regressor
REGRESSOR_WORK_VALUES = 30
#: float64 values per row (sample and joint) held while every estimator streams the regressor
STREAMED_ROW_VALUES = 12


@dataclass(frozen=True)
class RunBudget:
    """The estimated cost of a scenario run (module docstring for the formula).

    Attributes:
        identification, validation: the two simulations.
        n_base: base parameters b.
        memory_bytes: peak memory of the run.
        peak_phase: the phase of the peak ("simulating the identification data", ...).
        seconds: wall time of the two simulations.
        disk_bytes: size of the files written (the two datasets).
    """

    identification: SimulationCost
    validation: SimulationCost
    n_base: int
    memory_bytes: float
    peak_phase: str
    seconds: float
    disk_bytes: float

    def describe(self) -> str:
        """One line: the sizes behind the estimate."""
        ident, val = self.identification, self.validation
        return (
            f"identification {ident.steps:.3g} physics steps / {ident.samples:.3g} samples, validation "
            f"{val.steps:.3g} / {val.samples:.3g}, {ident.n_dof} joints, {self.n_base} base parameters; "
            f"peak while {self.peak_phase}"
        )

    def check(
        self, allow_large: bool = False, memory_limit: float | None = None, time_limit: float | None = TIME_LIMIT_S
    ) -> None:
        """Refuse a run above the memory or time limit.

        Args:
            allow_large: ``simulation.allow_large``: no time limit, and the memory limit is the whole RAM.
            memory_limit: bytes (default :func:`~robotid_sim.safety.memory_limit_bytes`, doubled with
                ``allow_large``).
            time_limit: seconds (ignored with ``allow_large``).

        Raises:
            ConfigError: stating the estimate, the limit, what it is made of and how to shrink the run.
        """
        if memory_limit is None:
            memory_limit = memory_limit_bytes() * (2 if allow_large else 1)
        problems = limit_problems(self.memory_bytes, self.seconds, memory_limit, allow_large, time_limit)
        if not problems:
            return
        hint = "shorten simulation.duration or validation.duration, lower simulation.rate_hz or raise simulation.dt"
        fits_in_ram = self.memory_bytes <= memory_limit_bytes() * 2
        if not allow_large and fits_in_ram:
            hint += ", or set simulation.allow_large: true to run it anyway"
        raise ConfigError(f"this run would need {' and '.join(problems)}: {self.describe()}; {hint}")

    def check_disk(self, free_bytes: float, folder) -> None:
        """Refuse a run whose data files would not fit in ``free_bytes`` (the output folder's free space)."""
        if self.disk_bytes > free_bytes:
            raise ConfigError(
                f"this run's data files would take about {format_bytes(self.disk_bytes)} but only "
                f"{format_bytes(free_bytes)} are free under {folder}; free some space, choose another --out, or "
                "shorten simulation.duration / lower simulation.rate_hz"
            )


def estimate_run(
    identification: SimulationCost, validation: SimulationCost, n_base: int, *, forms_regressor: bool = True
) -> RunBudget:
    """The cost of a scenario run: its two simulations and an identification on ``n_base`` base parameters.

    ``forms_regressor``: False when every estimator streams the regressor (no stacked copy in memory).
    """
    ident, val = identification, validation
    per_row = STACKED_REGRESSOR_COPIES * n_base + REGRESSOR_WORK_VALUES if forms_regressor else STREAMED_ROW_VALUES
    regressor = float(ident.samples) * ident.n_dof * F64_BYTES * per_row
    phases = {
        "simulating the identification data": ident.working_bytes + ident.data_bytes,
        "simulating the validation data": ident.data_bytes + val.working_bytes + val.data_bytes,
        "identifying": ident.data_bytes + val.data_bytes + regressor,
    }
    peak_phase = max(phases, key=phases.__getitem__)
    return RunBudget(
        identification=ident,
        validation=val,
        n_base=int(n_base),
        memory_bytes=phases[peak_phase],
        peak_phase=peak_phase,
        seconds=ident.seconds + val.seconds,
        disk_bytes=ident.file_bytes + val.file_bytes,
    )

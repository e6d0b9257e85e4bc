"""The closed loop that produced a dataset, re-run on a robot model: what closed-loop estimators simulate.

BIRDy generates its data with the robot in a joint PID loop at 5 kHz (issue 30's interfaces, written by
:mod:`robotid_sim.sim.closed_loop_data` into ``dataset.metadata["closed_loop"]``). The estimators that
identify through that loop (IDIM-IV, DIDIM, CLOE, CLIE and their physically consistent variants) re-run it
on the model with a candidate parameter set, noise-free, and compare the simulated states or torques with
the measured ones at the dataset's samples.

- :func:`closed_loop_of` reads the loop of a dataset (the controller, the resolved reference, the duration)
  as a :class:`ClosedLoopSpec`, or refuses data without one in one line.
- :func:`simulate_closed_loop` runs the loop for B parameter copies at once, compiled
  (:func:`robotid_sim.dynamics.closed_loop_kernels.closed_loop_copies`, threads over the copies); without
  numba, or for a friction law the kernel does not know, a batched numpy loop over the control steps.
- :class:`ClosedLoopSimulation` binds both to an
  :class:`~robotid_sim.identification.IdentificationProblem` for the estimators: base parameters in,
  simulated signals and base regressor rows out, model evaluations counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robotid_sim.dynamics import crba
from robotid_sim.errors import ConfigError, DataError, IdentificationError

#: the friction laws the compiled loop knows, by ``FrictionModel.kind``: the codes of ``crba_kernels._friction``
FRICTION_CODES = {
    "none": 0,
    "coulomb_viscous": 1,
    "nonlinear": 2,
    "stribeck": 3,
    "nonlinear_stribeck": 4,
    "coulomb_viscous_no_offset": 5,
}
#: step halvings of :meth:`ClosedLoopSimulation.fixed_point` before it gives up on an iteration
MAX_HALVINGS = 6
#: how far (in control steps) a sample time may sit from the control grid
GRID_TOLERANCE = 1e-6
_WHERE = "metadata['closed_loop']"


@dataclass(frozen=True, eq=False)
class ClosedLoopSpec:
    """The loop a closed-loop dataset was recorded in.

    Attributes:
        controller: the :class:`robotid_sim.sim.closed_loop_data.PIDLoop` (``kp, kd, ki`` (n,), ``anti_windup``,
            ``control_rate_hz``, ``physics_substeps``).
        excitation: the reference trajectory as its mapping (``Excitation.describe()``); some types need the
            robot's joint limits to be built (:meth:`reference` takes the structure).
        duration: seconds of closed loop from t = 0.
        sample_rate_hz: the raw record's rate (before any decimation).
        noise: the noise description of the record (``preset``, ``sd_q``, ``sd_tau``), for reports.
        t_offset: the loop's time (s) at the dataset's t = 0: 0 for a dataset from ``birdy_dataset``, the time of
            its first kept sample for one saved and read back as a log (which starts t at 0; ``load_log`` writes
            it as ``metadata['closed_loop']['t_offset_s']``).
    """

    controller: Any
    excitation: dict
    duration: float
    sample_rate_hz: float
    noise: dict = field(default_factory=dict)
    t_offset: float = 0.0
    _references: dict = field(default_factory=dict, repr=False)

    @property
    def dt(self) -> float:
        """The control step, s."""
        return 1.0 / float(self.controller.control_rate_hz)

    @property
    def timing(self) -> tuple[float, int, float]:
        """(control step dt, physics substeps per control step, physics step h), as the PyBullet record steps."""
        substeps = int(self.controller.physics_substeps)
        return self.dt, substeps, 1.0 / (float(self.controller.control_rate_hz) * substeps)

    def steps(self, times) -> np.ndarray:
        """The control step k = round(t·rate) (N,) of each time of ``times`` (N,), checked.

        Raises:
            DataError: times that are not finite, not increasing, not on the control grid or after the loop's end.
        """
        t = np.asarray(times, float)
        if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
            raise DataError(f"the sample times must be a non-empty finite (N,) array, got shape {t.shape}")
        grid = t * float(self.controller.control_rate_hz)
        steps = np.rint(grid).astype(np.int64)
        off = np.abs(grid - steps)
        if off.max() > GRID_TOLERANCE:
            bad = int(np.argmax(off))
            raise DataError(
                f"sample time {t[bad]:.9g} s is not on the {self.controller.control_rate_hz:g} Hz control grid of the "
                "closed loop: the data's t must be each sample's time since the loop started (birdy_dataset keeps it)"
            )
        if steps[0] < 0 or np.any(np.diff(steps) <= 0):
            raise DataError("the sample times of closed-loop data must be increasing and not negative")
        last = int(round(self.duration * float(self.controller.control_rate_hz)))
        if steps[-1] > last:
            raise DataError(f"sample time {t[-1]:.6g} s is after the end of the closed loop ({self.duration:g} s)")
        return steps

    def trajectory(self, structure=None):
        """The reference as an :class:`~robotid_sim.excitation.Excitation`, built with ``structure``'s joint limits.

        Raises:
            DataError: the mapping is not a valid excitation of ``structure``'s joints (naming the field).
        """
        from robotid_sim.sim.simulate import resolve_excitation

        try:
            excitation = resolve_excitation(structure, self.excitation)
        except ConfigError as exc:
            raise DataError(f"{_WHERE}['excitation']: {exc}") from None
        if structure is not None and excitation.n_dof != structure.n_dof:
            raise DataError(
                f"{_WHERE}['excitation'] has {excitation.n_dof} joints, robot '{structure.name}' has {structure.n_dof}"
            )
        return excitation

    def reference(self, structure, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(q_ref, qd_ref), each (count, n): the reference at the control steps k·dt, k < ``count`` (the last kept)."""
        key = (id(structure), count)
        if key not in self._references:
            q, qd, _ = self.trajectory(structure).evaluate(np.arange(count) * self.dt)
            self._references.clear()
            self._references[key] = (structure, np.ascontiguousarray(q, float), np.ascontiguousarray(qd, float))
        return self._references[key][1:]


def closed_loop_of(dataset, user: str = "the closed-loop model simulation", structure=None) -> ClosedLoopSpec:
    """The closed loop ``dataset`` was recorded in (its ``metadata['closed_loop']``).

    Args:
        dataset: a :class:`~robotid_sim.sim.dataset.Dataset` written by
            :func:`robotid_sim.sim.closed_loop_data.birdy_dataset`.
        user: who needs it, for the message (``"estimator 'cloe'"``).
        structure: the robot structure, to check the reference against now (it is built with its joint
            limits); None leaves that to the simulation.

    Raises:
        DataError: the data has no closed loop, or a malformed one (one line naming the field).
        ConfigError: the controller is malformed (:meth:`PIDLoop.from_dict`'s message).
    """
    from robotid_sim.sim.closed_loop_data import PIDLoop

    metadata = getattr(dataset, "metadata", None)
    loop = metadata.get("closed_loop") if isinstance(metadata, dict) else None
    if not isinstance(loop, dict):
        raise DataError(
            f"{user} needs closed-loop data ({_WHERE} with the controller and the reference, as "
            "robotid_sim.sim.closed_loop_data writes it); this dataset has none: record it with closed_loop_record "
            "and birdy_dataset, or choose an estimator for open-loop data"
        )
    for key in ("controller", "excitation", "duration", "sample_rate_hz"):
        if key not in loop:
            raise DataError(f"{_WHERE} has no '{key}': the record is incomplete; write it again with birdy_dataset")
    for key in ("controller", "excitation"):
        if not isinstance(loop[key], dict):
            raise DataError(f"{_WHERE}['{key}'] must be a mapping, got {type(loop[key]).__name__}")
    controller = PIDLoop.from_dict(loop["controller"], np.shape(dataset.q)[1])
    numbers = {}
    for key in ("duration", "sample_rate_hz"):
        value = loop[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value) or value <= 0:
            raise DataError(f"{_WHERE}['{key}'] must be a positive number, got {value!r}")
        numbers[key] = float(value)
    noise = loop.get("noise") if isinstance(loop.get("noise"), dict) else {}
    offset = loop.get("t_offset_s", 0.0)
    if isinstance(offset, bool) or not isinstance(offset, int | float) or not np.isfinite(offset) or offset < 0:
        raise DataError(f"{_WHERE}['t_offset_s'] must be a number >= 0 (the loop's time at t = 0), got {offset!r}")
    spec = ClosedLoopSpec(
        controller,
        dict(loop["excitation"]),
        numbers["duration"],
        numbers["sample_rate_hz"],
        dict(noise),
        t_offset=float(offset),
    )
    if structure is not None:
        spec.trajectory(structure)
    return spec


def check_uncoupled(structure) -> None:
    """Refuse a robot with coupled drives (a transmission matrix), which the model loop does not simulate."""
    if getattr(structure, "coupling", None):  # a Coupling is empty (falsy) without coupled drives
        raise ConfigError(
            f"robot '{structure.name}' has coupled drives (a transmission matrix), which the closed-loop model "
            "simulation does not support: identify its uncoupled variant (tx40 for tx40_coupled)"
        )


def simulate_closed_loop(structure, thetas, spec: ClosedLoopSpec, times) -> dict[str, np.ndarray]:
    """Run the loop of ``spec`` noise-free on ``structure`` for B standard parameter sets.

    Args:
        structure: the robot structure (a :class:`~robotid_sim.robot.structure.RobotStructure` or a Robot).
        thetas: (B, p) standard parameters, one copy each, or (p,) for one; base parameters β map to
            θ = pinv(K)·β (:func:`standard_of_base`).
        spec: the loop (:func:`closed_loop_of`).
        times: (N,) sample times since the loop started, on the control grid.

    Returns:
        ``"q"``, ``"qd"``, ``"qdd"``, ``"u"`` (B, N, n): state, acceleration and control torque at the control
        steps of ``times``; ``"ok"`` (B,) False for copies that diverged (singular mass matrix or a non-finite
        state; their samples from there on are NaN).

    Raises:
        DataError: malformed ``thetas`` or ``times``; ConfigError: a coupled robot or gains of another joint count.
    """
    thetas, steps, q_ref, qd_ref, gains, (inert, rotor, fvals) = _loop_inputs(structure, thetas, spec, times)
    B, n = thetas.shape[0], structure.n_dof
    friction = structure.friction
    out = {key: np.empty((B, len(steps), n)) for key in ("q", "qd", "qdd", "u")}
    out["ok"] = np.ones(B, dtype=np.bool_)
    if crba.kernels() is None or friction.kind not in FRICTION_CODES:
        _simulate_numpy(structure, thetas, q_ref, qd_ref, gains, spec.timing, steps, out)
        return out
    from robotid_sim.dynamics import closed_loop_kernels

    law = _kernel_law(structure, fvals)
    chain = crba.pack_chain(structure.joints).kernel_arrays
    g = crba.kernel_array(structure.gravity, (3,), "gravity")
    signals = (out["q"], out["qd"], out["qdd"], out["u"])
    closed_loop_kernels.closed_loop_copies(
        chain, g, inert, rotor, law, q_ref, qd_ref, gains, spec.timing, steps, *signals, out["ok"]
    )
    return out


def _loop_inputs(structure, thetas, spec: ClosedLoopSpec, times) -> tuple:
    """:func:`simulate_closed_loop`'s checked inputs: thetas (B, p), the control steps (N,) of ``times``, q_ref,
    qd_ref (K, n), the gains ``(kp, kd, ki, anti_windup)`` and each copy's ``(inert (B, n, 10), rotor (B, n),
    fvals (B, n, k))``."""
    check_uncoupled(structure)
    n, p = structure.n_dof, structure.n_parameters
    thetas = np.asarray(thetas, float)
    thetas = thetas[None] if thetas.ndim == 1 else thetas
    if thetas.ndim != 2 or thetas.shape[1] != p or thetas.shape[0] == 0:
        raise DataError(f"thetas must be (B, {p}) standard parameters of robot '{structure.name}', got {thetas.shape}")
    if not np.all(np.isfinite(thetas)):
        raise DataError("thetas contain NaN or inf; give finite standard parameters")
    steps = spec.steps(times)
    q_ref, qd_ref = spec.reference(structure, int(steps[-1]) + 1)
    c = spec.controller
    gains = tuple(crba.kernel_array(getattr(c, key), (n,), f"controller '{key}'") for key in ("kp", "kd", "ki"))
    gains += (float(c.anti_windup),)
    slices = structure.parameter_slices()
    B = thetas.shape[0]
    inert = np.ascontiguousarray(thetas[:, slices["inertial"]].reshape(B, n, 10))
    rotor = np.zeros((B, n))
    if len(slices["rotor"]):
        rotor[:] = thetas[:, slices["rotor"]]
    fvals = np.ascontiguousarray(thetas[:, slices["friction"]].reshape(B, n, -1))
    return thetas, steps, q_ref, qd_ref, gains, (inert, rotor, fvals)


def _kernel_law(structure, fvals) -> tuple:
    """The compiled loop's friction law ``(code, fvals, alpha (n,), vs (n,), smoothing)`` of ``structure``."""
    friction = structure.friction
    ones = np.ones(structure.n_dof)
    return (
        FRICTION_CODES[friction.kind],
        fvals,
        crba.kernel_array(getattr(friction, "alpha", ones)),
        crba.kernel_array(getattr(friction, "vs", ones)),
        float(friction.sign_smoothing),
    )


def _simulate_numpy(structure, thetas, q_ref, qd_ref, gains, timing, steps, out) -> None:
    """The loop of :func:`simulate_closed_loop` in numpy, batched over the copies (one regressor call per physics
    step): M + diag(Ia) and h + friction of every copy from the regressor at (q, qd, 0) and (q, 0, e_i),
    τ(q, qd, 0) = h + friction(qd), τ(q, 0, e_i) − τ(q, 0, 0) = column i of M + diag(Ia)."""
    kp, kd, ki, anti_windup = gains
    dt, substeps, h = timing
    B, n = thetas.shape[0], structure.n_dof
    q, qd = np.repeat(q_ref[:1], B, axis=0), np.repeat(qd_ref[:1], B, axis=0)
    previous, integral = q.copy(), np.zeros((B, n))
    ok = out["ok"]
    r = 0
    for k in range(int(steps[-1]) + 1):
        w = qd_ref[0] if k == 0 else (q - previous) / dt
        e = q_ref[k] - q
        integral = np.clip(integral + e * dt, -anti_windup, anti_windup)
        u = kp * e + kd * (qd_ref[k] - w) + ki * integral
        previous = q.copy()
        for sub in range(substeps):
            qdd = _accelerations(structure, thetas, q, qd, u, ok)
            while sub == 0 and r < len(steps) and steps[r] == k:
                for key, value in (("q", q), ("qd", qd), ("qdd", qdd), ("u", u)):
                    out[key][:, r] = np.where(ok[:, None], value, np.nan)
                r += 1
            qd = np.where(ok[:, None], qd + h * qdd, 0.0)
            q = np.where(ok[:, None], q + h * qd, 0.0)


def _accelerations(structure, thetas, q, qd, u, ok) -> np.ndarray:
    """qdd (B, n) of every copy under the torque ``u``; ``ok`` (B,) set False where M is singular or qdd not finite."""
    B, n = q.shape
    zeros = np.zeros((B, n))
    unit = [np.broadcast_to(row, (B, n)) for row in np.eye(n)]
    states = (
        np.concatenate([q] * (n + 2)),
        np.concatenate([qd] + [zeros] * (n + 1)),
        np.concatenate([zeros] * 2 + unit),
    )
    with np.errstate(all="ignore"):
        Y = structure.regressor(*states).reshape(n + 2, B, n, -1)
        tau = np.einsum("cbjp,bp->cbj", Y, thetas)
    M = (tau[2:] - tau[1]).transpose(1, 2, 0)  # (B, n, n): column i from e_i
    qdd = np.full((B, n), np.nan)
    for b in np.flatnonzero(ok):
        try:
            qdd[b] = np.linalg.solve(M[b], u[b] - tau[0, b])
        except np.linalg.LinAlgError:
            ok[b] = False
    ok &= np.all(np.isfinite(qdd), axis=1) & np.all(np.isfinite(q), axis=1)
    return qdd


def standard_of_base(base, betas) -> np.ndarray:
    """θ = pinv(K)·β (…, p) of base parameters ``betas`` (…, b): a standard set with K θ = β (same dynamics)."""
    return np.asarray(betas, float) @ np.linalg.pinv(base.K).T


class ClosedLoopSimulation:
    """The closed loop of a problem's data, re-run for candidate base or standard parameter sets.

    Args:
        problem: an :class:`~robotid_sim.identification.IdentificationProblem` on closed-loop data.
        user: who needs it, for the message of data without a loop (``"estimator 'cloe'"``).

    Attributes:
        spec: the loop (:func:`closed_loop_of`).
        evaluations: closed-loop simulations run so far (one per copy).
        standard: (p, b) pinv(K), θ = standard·β (:func:`standard_of_base`, computed once: a threaded SVD can take
            ~0.1 s on a busy machine).
    """

    def __init__(self, problem, user: str = "the closed-loop model simulation"):
        check_uncoupled(problem.structure)
        self.problem = problem
        self.spec = closed_loop_of(problem.dataset, user)
        self.times = np.asarray(problem.dataset.t, float) + self.spec.t_offset
        self.spec.reference(problem.structure, int(self.spec.steps(self.times)[-1]) + 1)
        self.evaluations = 0
        self.standard = np.linalg.pinv(problem.base.K)

    def run(self, betas=None, thetas=None) -> dict[str, np.ndarray]:
        """:func:`simulate_closed_loop` of base parameter sets ``betas`` (B, b), or of standard ones ``thetas``."""
        thetas = np.atleast_2d(np.asarray(betas, float) @ self.standard.T if thetas is None else thetas)
        self.evaluations += thetas.shape[0]
        return simulate_closed_loop(self.problem.structure, thetas, self.spec, self.times)

    def sensitivities(self, beta, fd_steps, hold: bool = True) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The simulation at the base parameters ``beta`` (b,) and its derivatives ∂q/∂β, ∂u/∂β at the samples.

        Compiled forward sensitivities of the discrete loop
        (:func:`robotid_sim.dynamics.closed_loop_sensitivity.loop_sensitivity`): one nominal loop that carries
        its b derivative columns along, counted as ONE model evaluation (it costs about as much as two or three
        copies of :meth:`run`). Without numba, or for a friction law the compiled loop does not know, forward
        differences instead: the b + 1 copies β and β + ``fd_steps[i]``·e_i in one batched :meth:`run`
        (counted b + 1).

        Args:
            beta: (b,) base parameters.
            fd_steps: (b,) the forward-difference steps of the fallback (> 0).
            hold: the compiled loop evaluates the rigid-body derivatives ∂τ/∂q, ∂τ/∂qd once per control step and
                holds them over its physics steps (True: within 1e-4 of the exact derivative of the discrete loop,
                the cheaper), or at every physics step (False: the exact one, to finite-difference accuracy).

        Returns:
            (result, dq, du): ``result`` as :meth:`run`'s for one copy, ``dq``, ``du`` (N, n, b) ∂q/∂β and
            ∂u/∂β at the data's samples (NaN from where the loop diverged).
        """
        beta = np.asarray(beta, float)
        structure = self.problem.structure
        if crba.kernels() is None or structure.friction.kind not in FRICTION_CODES:
            fd_steps = np.asarray(fd_steps, float)
            result = self.run(np.vstack([beta, beta + np.diag(fd_steps)]))
            dq, du = (np.moveaxis((result[key][1:] - result[key][0]) / fd_steps[:, None, None], 0, -1) for key in "qu")
            return {key: value[:1] for key, value in result.items()}, dq, du
        from robotid_sim.dynamics import closed_loop_sensitivity

        base = self.problem.base
        thetas, steps, q_ref, qd_ref, gains, (inert, rotor, fvals) = _loop_inputs(
            structure, beta[None] @ self.standard.T, self.spec, self.times
        )
        n, k, block = structure.n_dof, fvals.shape[2], structure.parameter_block
        units = np.zeros((k, n, k))
        units[np.arange(k), :, np.arange(k)] = 1.0
        colmap = np.full(n * block, -1, dtype=np.int64)  # Y·pinv(K) = Y_b: the independent columns of Y
        colmap[base.independent] = np.arange(len(beta))
        out = np.empty((4, len(steps), n))
        dq, du = np.empty((len(steps), n, len(beta))), np.empty((len(steps), n, len(beta)))
        ok = closed_loop_sensitivity.loop_sensitivity(
            crba.pack_chain(structure.joints).kernel_arrays,
            crba.kernel_array(structure.gravity, (3,), "gravity"),
            inert[0],
            rotor[0],
            _kernel_law(structure, fvals[0]),
            units,
            colmap.reshape(n, block),
            int(structure.has_rotor_inertia),
            q_ref,
            qd_ref,
            gains,
            self.spec.timing,
            bool(hold),
            steps,
            out,
            dq,
            du,
        )
        self.evaluations += 1
        result = {key: out[i][None] for i, key in enumerate(("q", "qd", "qdd", "u"))}
        result["ok"] = np.array([ok])
        return result, dq, du

    def base_regressor(self, result: dict[str, np.ndarray], copy: int = 0) -> np.ndarray:
        """The base regressor (m, b) of copy ``copy``'s simulated states, on the problem's rows in use."""
        Y = self.problem.base.regressor(result["q"][copy], result["qd"][copy], result["qdd"][copy])
        return Y.reshape(-1, Y.shape[-1])[self.problem.row_index()]

    def rows(self, signal: np.ndarray) -> np.ndarray:
        """A simulated (…, N, n) signal stacked like the problem's rows in use (…, m)."""
        signal = np.asarray(signal)
        return signal.reshape(*signal.shape[:-2], -1)[..., self.problem.row_index()]

    def input_error(self, result: dict[str, np.ndarray]) -> float:
        """‖τ − u_s‖² of copy 0 on the rows in use: the measured torque against the simulated control torque."""
        return float(np.sum((self.problem.torque_vector() - self.rows(result["u"][0])) ** 2))

    def fixed_point(self, start, update, tol: float, max_iterations: int, standard: bool = False, cost=None):
        """Iterate x ← x + α (``update``(simulation at x) − x) from ``start`` until the update would change the
        base values by less than ``tol`` (relative); x is then returned as it is.

        The loop of IDIM-IV and DIDIM (Janot et al. 2014, Gautier et al. 2013): one closed-loop simulation per
        iteration at the new estimate. The step is taken whole (α = 1) when the simulation at the new estimate
        does not diverge and, with ``cost``, does not raise it; else it is halved, up to :data:`MAX_HALVINGS`
        times (one simulation each), and the iteration stops (not converged) when no halving helps. A halved
        step between two physically consistent standard sets stays consistent (the constraints are convex).

        Args:
            start: base values (b,), or standard ones (p,) with ``standard``.
            update: ``update(result) -> x``, the next estimate from :meth:`run`'s result at x (one copy).
            tol: the relative change ‖β_{i+1} − β_i‖ / ‖β_i‖ that ends the iteration.
            max_iterations: at most this many iterations.
            standard: x is a standard parameter set θ (the physically consistent variants); β = K θ.
            cost: ``cost(result) -> float`` a step must not raise (DIDIM's ‖τ − u_s‖²), or None.

        Returns:
            (x, result at x, diagnostics ``iterations`` (updates computed), ``converged``, ``diverged`` (no shortened
            step avoided a diverging simulation), ``relative_change`` (of the last update)).

        Raises:
            IdentificationError: the simulation at ``start`` diverged (the initial estimate cannot run the loop).
        """
        K = self.problem.base.K

        def base(x):
            return K @ x if standard else x

        def simulate(x):
            return self.run(thetas=x) if standard else self.run(x)

        def worse(trial, current) -> bool:
            return not trial["ok"][0] or (cost is not None and cost(trial) > cost(current))

        x = np.asarray(start, float)
        result = simulate(x)
        if not result["ok"][0]:
            raise IdentificationError(
                "the closed loop simulated with the initial estimate diverged (singular mass matrix or a non-finite "
                "state): start from a physically consistent estimate (IdentificationProblem(..., initial=theta0))"
            )
        info = {"converged": False, "diverged": False, "relative_change": float("inf")}
        for iteration in range(1, max_iterations + 1):
            step = np.asarray(update(result), float) - x
            info["relative_change"] = float(np.linalg.norm(base(step)) / max(np.linalg.norm(base(x)), 1e-300))
            if info["relative_change"] < tol:  # x is the fixed point to within tol: no more simulation needed
                return x, result, {"iterations": iteration, **info, "converged": True}
            for _ in range(MAX_HALVINGS + 1):
                trial = simulate(x + step)
                if not worse(trial, result):
                    break
                step = 0.5 * step
            else:
                info["diverged"] = not trial["ok"][0]
                return x, result, {"iterations": iteration, **info}
            x, result = x + step, trial
        return x, result, {"iterations": max_iterations, **info}


# ------------------------------------------------------------------------------ the estimators' least-squares steps
def column_scale(A: np.ndarray) -> np.ndarray:
    """The column norms (b,) of ``A`` (m, b), 1 for an all-zero column."""
    scale = np.linalg.norm(A, axis=0)
    return np.where(scale > 0, scale, 1.0)


def scaled_solve(A: np.ndarray, t: np.ndarray) -> np.ndarray:
    """β (b,) minimising ‖A β − t‖ (m ≥ b), through the column-scaled least squares (an exact solve for m = b)."""
    scale = column_scale(A)
    return np.linalg.lstsq(A / scale, t, rcond=None)[0] / scale


def instrumented(V: np.ndarray, W: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Qᵀ W, Qᵀ y) (b, b), (b,) with V = Q R: the IV estimate (Vᵀ W)⁻¹ Vᵀ y is the solution of Qᵀ W β = Qᵀ y,
    and its physically consistent counterpart minimises ‖Qᵀ (y − W β)‖ (the two-stage least squares on the
    instruments' span, Janot, Vandanjon & Gautier 2014)."""
    Q, _ = np.linalg.qr(V / column_scale(V))
    return Q.T @ W, Q.T @ y


def consistent_solve(program, A: np.ndarray, t: np.ndarray) -> np.ndarray:
    """θ (p,) minimising ‖A K θ − t‖ under the physical constraints of ``program``
    (:class:`~robotid_sim.identification.lmi.ConsistentLeastSquares`, built once per fit)."""
    scale = column_scale(A)
    scaled = A / scale
    G, c = scaled.T @ scaled, scaled.T @ t

    def unconstrained() -> np.ndarray:
        return np.linalg.lstsq(scaled, t, rcond=None)[0]

    return program.solve(G, c, scale, unconstrained)


def starting_point(problem, consistent_fit=None) -> np.ndarray:
    """Where an iterative estimator starts: the problem's initial estimate (``initial``), else the OLS estimate.

    Base values (b,); with ``consistent_fit`` (a physically consistent variant) a standard set (p,): ``initial``
    itself, else ``consistent_fit()`` (its constrained least squares on the measured data).
    """
    if consistent_fit is not None:
        return np.array(problem.initial, float) if problem.initial is not None else consistent_fit()
    if problem.initial_base is not None:
        return problem.initial_base
    return problem.least_squares().solve(covariance=False).beta

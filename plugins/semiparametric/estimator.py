"""The ``semiparametric`` estimator (seed 001 §4.4, Eq. 33): options, the rigid-body fit, the hold-out, the data
the network is trained on, diagnostics."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator
from robotid_sim_plugins.semiparametric.training import TrainingSettings, train_network

from robotid_sim.errors import ConfigError, IdentificationError, PluginError
from robotid_sim.identification import (
    Estimator,
    EstimatorOptions,
    EstimatorSpec,
    IdentificationProblem,
    MLPCorrection,
    ResidualModel,
)
from robotid_sim.identification.metrics import robust_std

#: the validation hold-out is cut into at most this many contiguous blocks, spread evenly over the record
VALIDATION_BLOCKS = 5
#: a validation block is at least this many samples long (fewer blocks on short records)
MIN_BLOCK_SAMPLES = 10
#: fewest samples the network may be trained on, and fewest held out for early stopping
MIN_TRAINING_SAMPLES = 20
MIN_VALIDATION_SAMPLES = 20
#: the loss curves in the diagnostics keep at most this many epochs (every k-th beyond)
MAX_CURVE_POINTS = 1000
#: most weights and biases the saved network may have (8 bytes each; a model's array file loads up to 1 GiB)
MAX_STORED_WEIGHTS = 100_000_000
#: an input column whose standard deviation is below this fraction of its magnitude is constant (std 1)
CONSTANT_INPUT = 1e-12
#: a joint's target scale is at least this fraction of its RMS measured torque (and never 0)
MIN_TARGET_SCALE = 1e-12


class SemiparametricEstimator(Estimator):
    """Semiparametric model τ = τ_RBD(q, qd, qdd) + N(x) (seed 001 Eq. 33).

    1. The rigid-body (parametric) part τ_RBD is identified on the problem by the estimator named
       in ``rigid_body`` (any registered estimator: ``wls`` by default, ``irls``, ``lmi_wls``, ...).
    2. Its residual r = τ − τ_RBD(q, qd, qdd) on the identification data is the target of a
       multilayer perceptron N (seed 001: one hidden layer of 36 tanh units fed the joint
       velocities, all joints in one network; here ``inputs``, ``hidden``, ``activation`` and
       ``per_joint`` are options), trained with torch. Inputs are standardised per column (mean
       and standard deviation over the training samples; a constant column keeps standard
       deviation 1) and targets scaled per joint by the residual's standard deviation over the
       rows in use, so every joint weighs alike whatever its torque scale.
    3. The loss is the mean squared scaled residual over the rows in use only: rows a velocity
       dead-band removed (:meth:`IdentificationProblem.row_weights`) do not count, nor do outliers
       (a residual beyond ``outlier_k_sigma`` robust standard deviations of its joint's).
    4. Training: AdamW (``learning_rate``, decoupled ``weight_decay``) on shuffled mini-batches of
       ``batch_size`` samples for up to ``epochs`` epochs, in float64, the output bias starting at
       the mean residual. With ``validation_fraction`` > 0 that fraction of the samples is held
       out as up to five contiguous blocks spread evenly over the record (not random samples,
       which would sit between training neighbours on the smooth trajectory and flatter the
       network); training stops after ``patience`` epochs without a lower validation loss and the
       weights of the best epoch are kept. Without a hold-out every epoch runs and the last
       weights are kept.

    ``per_joint`` makes joint j's correction a function of joint j's own signals only (n networks
    of the ``hidden`` widths, trained together, stored as one block-diagonal network), the shape
    of friction-like effects. A coupled network (the seed's) fed all joint velocities can learn
    the residual of one trajectory as a function of where it is on that trajectory, including the
    part caused by biased rigid-body parameters, and carry it badly to another trajectory; the
    hold-out blocks cannot show this when the excitation is periodic (each block repeats a
    training period), only a validation on another trajectory does.

    The run is deterministic for a given ``seed``: the weights are initialised and the batches
    shuffled from it, on one torch thread (the caller's torch thread count and global random state
    are restored afterwards). The trained weights are copied into a numpy
    :class:`~robotid_sim.identification.MLPCorrection` of a
    :class:`~robotid_sim.identification.ResidualModel`, saved as plain arrays, never pickled.
    When ``inputs`` leave out ``qdd`` the correction joins the bias torque, so the mass matrix is
    the rigid-body model's and forward dynamics cost what its own do.

    On noise-free data the rigid-body part is exact and the residual is rounding error; the
    target scale is then of that size too, so the correction is negligible and the model is exact.

    Diagnostics: ``rigid_body`` (``estimator``, ``options`` and ``diagnostics`` of the rigid-body
    fit), ``inputs``, ``per_joint``, ``network_parameters`` (trainable weights and biases),
    ``training_samples``, ``validation_samples``, ``epochs_run``, ``best_epoch`` (1-based, the
    kept weights'), ``stopped_early``, ``train_loss`` and ``validation_loss`` (mean squared scaled
    residual at the kept weights; None without a hold-out), ``train_loss_curve`` and
    ``validation_loss_curve`` (mean per epoch, every ``loss_curve_every``-th epoch),
    ``residual_rms_before`` and ``residual_rms_after`` (per joint, N·m or N, over the rows in use
    of the identification data, before and after the correction), ``outliers_left_out`` (rows), ``residual_scale`` (the
    per-joint target scale), ``deadband_rows_removed``.

    Raises:
        ConfigError: a network too large to save (:data:`MAX_STORED_WEIGHTS`; found by ``check_structure``, when
            the joint count is known).
        IdentificationError: too few samples for the hold-out (or to train at all), a dead-band
            leaving the training or held-out samples no row in use, or a diverged training.
    """

    name = "semiparametric"

    class Options(EstimatorOptions):
        rigid_body: EstimatorSpec = Field(
            default_factory=lambda: EstimatorSpec(name="wls"),
            description="the estimator of the rigid-body (parametric) part: {name, options}, or just its name; any "
            "registered estimator but semiparametric itself",
        )
        inputs: list[Literal["q", "qd", "qdd"]] = Field(
            default_factory=lambda: ["qd"],
            min_length=1,
            max_length=3,
            description="the signals fed to the network, in order (seed 001: joint velocities only); without 'qdd' "
            "the correction is part of the bias torque and forward dynamics stay as fast as the rigid-body model's",
        )
        hidden: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
            default_factory=lambda: [36],
            min_length=1,
            max_length=8,
            description="widths of the hidden layers (seed 001: one layer of 36)",
        )
        activation: Literal["tanh", "relu"] = Field("tanh", description="hidden-layer activation (seed 001: tanh)")
        per_joint: bool = Field(
            False,
            description="joint j's correction from joint j's own inputs only: n independent networks of the "
            "'hidden' widths (block-diagonal weights), as friction acts; false: one network coupling all joints, as "
            "the seed's",
        )
        epochs: int = Field(1000, ge=1, le=1_000_000, description="most passes over the training samples")
        learning_rate: float = Field(1e-2, gt=0, le=1, description="AdamW step size")
        batch_size: int = Field(128, ge=1, le=10_000_000, description="samples per mini-batch")
        weight_decay: float = Field(0.0, ge=0, le=1, description="AdamW decoupled weight decay")
        validation_fraction: float = Field(
            0.2,
            ge=0,
            le=0.5,
            description="fraction of the identification samples held out, as contiguous blocks, for early stopping "
            "(seed 001: 5 000 of 25 000); 0: no hold-out, every epoch runs and the last weights are kept",
        )
        patience: int = Field(
            200, ge=1, description="stop after this many epochs without a better validation loss (with a hold-out)"
        )
        seed: int = Field(0, ge=0, lt=2**63, description="seed of the weight initialisation and the batch order")
        outlier_k_sigma: float | None = Field(
            5.0,
            gt=0,
            description="rows whose residual exceeds this multiple of the joint's robust residual std (1.4826 × "
            "median absolute deviation) are left out of the loss, so the network does not learn measurement "
            "outliers; None: every row counts",
        )

        @field_validator("rigid_body", mode="before")
        @classmethod
        def _name_only(cls, value: Any) -> Any:
            return {"name": value} if isinstance(value, str) else value

        @field_validator("rigid_body")
        @classmethod
        def _buildable(cls, spec: EstimatorSpec) -> EstimatorSpec:
            from robotid_sim.plugins import get_estimator

            if spec.name == SemiparametricEstimator.name:
                raise ValueError(
                    "the rigid-body part cannot be 'semiparametric' itself; name a parametric estimator (wls, irls, "
                    "lmi_wls, ...)"
                )
            try:
                estimator_class = get_estimator(spec.name)
            except PluginError as exc:
                raise ValueError(str(exc)) from None
            if isinstance(estimator_class, type) and issubclass(estimator_class, SemiparametricEstimator):
                raise ValueError(
                    f"'{spec.name}' is a semiparametric estimator; the rigid-body part must be a parametric one"
                )
            try:
                estimator_class.from_options(**spec.options)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
            return spec

        @field_validator("inputs")
        @classmethod
        def _distinct(cls, inputs: list[str]) -> list[str]:
            repeated = sorted({s for s in inputs if inputs.count(s) > 1})
            if repeated:
                raise ValueError(f"each signal may be named once, {repeated} is repeated")
            return inputs

    def check_structure(self, structure) -> None:
        self._check_size(structure.n_dof)
        self.rigid_body.build().check_structure(structure)

    # ------------------------------------------------------------------------------------ fit
    def _fit(self, problem: IdentificationProblem) -> ResidualModel:
        ds = problem.dataset
        q, qd, qdd, tau = (np.asarray(getattr(ds, k), float) for k in ("q", "qd", "qdd", "tau"))
        N, n = q.shape
        train, validation = self._split(N)  # before the rigid-body fit: a short record fails at once
        base = self.rigid_body.build().fit(problem)
        residual = tau - np.asarray(base.predict_torque(q, qd, qdd), float)
        use = problem.row_weights().reshape(N, n) > 0
        outliers = _outliers(residual, use, self.outlier_k_sigma)
        use &= ~outliers
        signals = {"q": q, "qd": qd, "qdd": qdd}
        X = np.concatenate([signals[s] for s in self.inputs], axis=1)
        x_mean, x_std = _standardisation(X[train])
        y_scale = _target_scale(residual[train], use[train], tau)
        trained = self._train((X - x_mean) / x_std, residual / y_scale, use.astype(float), train, validation, n_out=n)
        correction = MLPCorrection(
            tuple(self.inputs),
            trained["weights"],
            trained["biases"],
            self.activation,
            x_mean,
            x_std,
            y_scale,
        )
        after = residual - correction(q, qd, qdd)
        every = max(1, math.ceil(trained["epochs_run"] / MAX_CURVE_POINTS))
        diagnostics = {
            "rigid_body": {"estimator": base.estimator, "options": base.options, "diagnostics": base.diagnostics},
            "inputs": list(self.inputs),
            "per_joint": self.per_joint,
            "network_parameters": trained["parameters"],
            "training_samples": int(train.size),
            "validation_samples": int(validation.size),
            "epochs_run": trained["epochs_run"],
            "best_epoch": trained["best_epoch"],
            "stopped_early": trained["epochs_run"] < self.epochs,
            "train_loss": trained["train_loss"],
            "validation_loss": trained["validation_loss"],
            "loss_curve_every": every,
            "train_loss_curve": trained["train_curve"][every - 1 :: every],
            "validation_loss_curve": trained["validation_curve"][every - 1 :: every],
            "residual_rms_before": _rms_in_use(residual, use).tolist(),
            "residual_rms_after": _rms_in_use(after, use).tolist(),
            "residual_scale": y_scale.tolist(),
            "outliers_left_out": int(np.count_nonzero(outliers)),
            **problem.diagnostics(),
        }
        return ResidualModel(base, correction, diagnostics=diagnostics)

    def _check_size(self, n: int) -> None:
        """Refuse a network whose stored (dense) weights would exceed :data:`MAX_STORED_WEIGHTS`."""
        groups = n if self.per_joint else 1
        widths = [len(self.inputs) * n, *(groups * h for h in self.hidden), n]
        stored = sum((a + 1) * b for a, b in zip(widths[:-1], widths[1:], strict=True))
        if stored > MAX_STORED_WEIGHTS:
            shape = " -> ".join(map(str, widths))
            raise ConfigError(
                f"estimator 'semiparametric': options 'hidden' {self.hidden} and 'per_joint' {self.per_joint} on "
                f"{n} joints make a network of {stored:,} stored weights ({shape}; per_joint stores its n networks "
                f"as one block-diagonal network), above the limit of {MAX_STORED_WEIGHTS:,}; use narrower or "
                "fewer hidden layers"
            )

    def _split(self, N: int) -> tuple[np.ndarray, np.ndarray]:
        """(training, validation) sample indices: the hold-out as contiguous blocks spread evenly."""
        everything = np.arange(N)
        if self.validation_fraction == 0:
            if N < MIN_TRAINING_SAMPLES:
                raise IdentificationError(
                    f"estimator 'semiparametric': {N} samples are too few to train the network (at least "
                    f"{MIN_TRAINING_SAMPLES}); record a longer trajectory"
                )
            return everything, everything[:0]
        held = int(round(self.validation_fraction * N))
        if held < MIN_VALIDATION_SAMPLES or N - held < MIN_TRAINING_SAMPLES:
            raise IdentificationError(
                f"estimator 'semiparametric': {N} samples are too few to hold out validation_fraction = "
                f"{self.validation_fraction:g} for early stopping ({held} held out, {N - held} left to train on; at "
                f"least {MIN_VALIDATION_SAMPLES} and {MIN_TRAINING_SAMPLES} are needed): record a longer trajectory, "
                "raise validation_fraction, or set it to 0 (no hold-out: every epoch runs)"
            )
        blocks = max(1, min(VALIDATION_BLOCKS, held // MIN_BLOCK_SAMPLES))
        lengths = np.full(blocks, held // blocks)
        lengths[: held % blocks] += 1
        centres = (np.arange(blocks) + 0.5) * N / blocks
        starts = np.clip(np.round(centres - lengths / 2).astype(int), 0, N - lengths)
        held_out = np.zeros(N, dtype=bool)
        for start, length in zip(starts, lengths, strict=True):
            held_out[start : start + length] = True
        return everything[~held_out], everything[held_out]

    def _train(self, X, Y, M, train, validation, *, n_out: int) -> dict:
        """Train on standardised inputs X (N, d), scaled targets Y (N, n) and row weights M (N, n)
        (:func:`~robotid_sim_plugins.semiparametric.training.train_network`)."""
        settings = TrainingSettings(
            signals=len(self.inputs),
            hidden=tuple(self.hidden),
            activation=self.activation,
            per_joint=self.per_joint,
            epochs=self.epochs,
            learning_rate=self.learning_rate,
            batch_size=self.batch_size,
            weight_decay=self.weight_decay,
            patience=self.patience,
            seed=self.seed,
        )
        return train_network(settings, X, Y, M, train, validation, n_out)


def _standardisation(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and standard deviation of X; a constant column gets standard deviation 1."""
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    constant = ~(std > CONSTANT_INPUT * np.maximum(np.abs(mean), 1.0))
    return mean, np.where(constant, 1.0, std)


def _outliers(residual: np.ndarray, use: np.ndarray, k_sigma: float | None) -> np.ndarray:
    """(N, n) mask of the rows in use whose residual is beyond ``k_sigma`` robust standard deviations of its joint's
    residual around the median; all False for None."""
    out = np.zeros(residual.shape, dtype=bool)
    if k_sigma is None:
        return out
    for j in range(residual.shape[1]):
        r = residual[use[:, j], j]
        if r.size == 0:
            continue
        centre, sigma = np.median(r), robust_std(r)
        if sigma > 0:
            out[:, j] = use[:, j] & (np.abs(residual[:, j] - centre) > k_sigma * sigma)
    return out


def _target_scale(residual: np.ndarray, use: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Per-joint standard deviation of the residual over the rows in use, floored above 0."""
    n = residual.shape[1]
    scale = np.empty(n)
    for j in range(n):
        r = residual[use[:, j], j]
        scale[j] = r.std() if r.size > 1 else 0.0
    floor = MIN_TARGET_SCALE * np.maximum(np.sqrt(np.mean(tau**2, axis=0)), 1.0)
    scale = np.maximum(scale, floor)
    return np.where(np.isfinite(scale), scale, 1.0)


def _rms_in_use(residual: np.ndarray, use: np.ndarray) -> np.ndarray:
    """Per-joint RMS of ``residual`` (N, n) over the rows in use."""
    count = use.sum(axis=0)
    return np.sqrt(np.where(use, residual**2, 0.0).sum(axis=0) / np.maximum(count, 1))

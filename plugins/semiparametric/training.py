"""Training of the semiparametric estimator's network with torch (seed 001 §4.4): AdamW on mini-batches, early
stopping on a hold-out, the weights copied out as the dense layers of one
:class:`~robotid_sim.identification.MLPCorrection`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robotid_sim.errors import IdentificationError


@dataclass(frozen=True)
class TrainingSettings:
    """The network's shape and its training, from the estimator's options.

    Attributes:
        signals: number of signals fed per joint (``len(inputs)``).
        hidden: widths of the hidden layers.
        activation: ``"tanh"`` or ``"relu"``.
        per_joint: n independent networks (one per joint, batched) instead of one coupled network.
        epochs, learning_rate, batch_size, weight_decay, patience, seed: as the estimator's options.
    """

    signals: int
    hidden: tuple[int, ...]
    activation: str
    per_joint: bool
    epochs: int
    learning_rate: float
    batch_size: int
    weight_decay: float
    patience: int
    seed: int


def train_network(settings: TrainingSettings, X, Y, M, train_rows, validation_rows, n: int) -> dict:
    """Train on standardised inputs X (N, d), scaled targets Y (N, n) and row weights M (N, n).

    ``train_rows`` and ``validation_rows`` are sample indices (the hold-out may be empty). One torch thread,
    the caller's thread count and global random state restored afterwards.

    Returns:
        ``weights``, ``biases`` (the dense layers), ``parameters``, ``epochs_run``, ``best_epoch``,
        ``train_loss``, ``validation_loss`` (None without a hold-out), ``train_curve``, ``validation_curve``.

    Raises:
        IdentificationError: a dead-band leaving the training or held-out samples no row in use, or a
            diverged training.
    """
    import torch

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(settings.seed)
            return _train_torch(torch, settings, X, Y, M, train_rows, validation_rows, n)
    finally:
        torch.set_num_threads(threads)


def _train_torch(torch, settings: TrainingSettings, X, Y, M, train, validation, n) -> dict:
    # the network as G groups of one layout: G = 1 coupled network over all d inputs, or G = n
    # per-joint networks over that joint's len(inputs) signals (batched: tensors (G, samples, width))
    s = settings.signals
    grouped = X.reshape(len(X), s, n).transpose(2, 0, 1) if settings.per_joint else X[None]
    G = grouped.shape[0]
    widths = [grouped.shape[2], *settings.hidden, 1 if settings.per_joint else n]
    Xt, Xv = (torch.from_numpy(np.ascontiguousarray(grouped[:, rows])) for rows in (train, validation))
    Yt, Yv, Mt, Mv = (torch.from_numpy(np.ascontiguousarray(a[rows])) for a in (Y, M) for rows in (train, validation))
    if float(Mt.sum()) == 0:
        raise IdentificationError(
            "estimator 'semiparametric': the velocity dead-band leaves no row of the training samples in use; "
            "lower velocity_deadband"
        )
    params = _initial_parameters(torch, widths, G, Yt, Mt)
    net = _network(torch, params, settings.activation, n)
    has_validation = validation.size > 0
    if has_validation and float(Mv.sum()) == 0:
        raise IdentificationError(
            "estimator 'semiparametric': the velocity dead-band leaves no row of the held-out samples in use; "
            "lower velocity_deadband, or set validation_fraction to 0"
        )
    epoch, best_epoch, train_curve, validation_curve = _run_epochs(
        torch, settings, net, params, (Xt, Yt, Mt), (Xv, Yv, Mv) if has_validation else None
    )
    if not all(bool(torch.isfinite(p).all()) for p in params):
        raise IdentificationError(
            f"estimator 'semiparametric': the network training diverged (non-finite weights after {epoch} "
            "epochs); lower learning_rate"
        )
    layers = len(widths) - 1
    grouped_weights = [params[2 * k].detach().numpy().copy() for k in range(layers)]
    grouped_biases = [params[2 * k + 1].detach().numpy()[:, 0, :].copy() for k in range(layers)]
    weights, biases = _dense(grouped_weights, grouped_biases, n, s, settings.per_joint)
    return {
        "weights": weights,
        "biases": biases,
        "parameters": int(sum(p.numel() for p in params)),
        "epochs_run": epoch,
        "best_epoch": best_epoch,
        "train_loss": _evaluate(torch, net, Xt, Yt, Mt),
        "validation_loss": _evaluate(torch, net, Xv, Yv, Mv) if has_validation else None,
        "train_curve": train_curve,
        "validation_curve": validation_curve,
    }


def _initial_parameters(torch, widths: list[int], G: int, Yt, Mt) -> list:
    """Weights (G, out, in) and biases (G, 1, out) per layer as torch.nn.Linear initialises them, drawn from the
    global random state layer by layer; the output bias starts at the training targets' mean."""
    params = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:], strict=True):
        bound = 1.0 / math.sqrt(fan_in)  # torch.nn.Linear's default initialisation
        W = torch.empty(G, fan_out, fan_in, dtype=torch.float64).uniform_(-bound, bound)
        b = torch.empty(G, 1, fan_out, dtype=torch.float64).uniform_(-bound, bound)
        params += [W.requires_grad_(), b.requires_grad_()]
    with torch.no_grad():  # start from the training targets' mean: the output bias
        counts = Mt.sum(dim=0)
        mean = torch.where(counts > 0, (Yt * Mt).sum(dim=0) / counts.clamp_min(1), 0.0)
        params[-1].copy_(mean.reshape(params[-1].shape))
    return params


def _network(torch, params: list, activation: str, n: int):
    """The network as a function (G, B, in) -> (B, n) of the parameters ``params`` (updated in place)."""
    act = torch.tanh if activation == "tanh" else torch.relu
    layers = len(params) // 2

    def net(x):  # (G, B, in) -> (B, n)
        h = x
        for k in range(layers):
            h = torch.baddbmm(params[2 * k + 1], h, params[2 * k].transpose(1, 2))
            if k < layers - 1:
                h = act(h)
        return h.permute(1, 0, 2).reshape(h.shape[1], n)

    return net


def _loss(pred, target, weight):
    """Mean squared scaled residual over the rows in use (``weight`` 1 in use, 0 not)."""
    return ((pred - target) ** 2 * weight).sum() / weight.sum().clamp_min(1.0)


def _evaluate(torch, net, x, y, m) -> float:
    with torch.no_grad():
        return float(_loss(net(x), y, m))


def _run_epochs(torch, settings: TrainingSettings, net, params: list, training: tuple, validation: tuple | None):
    """AdamW on shuffled mini-batches, epoch by epoch; with a hold-out, early stopping and the best weights kept.

    Returns:
        (epochs run, best epoch (1-based, the kept weights'), training loss per epoch, validation loss per epoch).
    """
    Xt, Yt, Mt = training
    optimiser = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    generator = torch.Generator().manual_seed(settings.seed)
    size = Xt.shape[1]
    batch = min(settings.batch_size, size)
    best_loss, best_epoch, best = math.inf, 0, None
    train_curve: list[float] = []
    validation_curve: list[float] = []
    epoch = 0
    for epoch in range(1, settings.epochs + 1):
        order = torch.randperm(size, generator=generator)
        total, weight = 0.0, 0.0
        for start in range(0, size, batch):
            index = order[start : start + batch]
            m = Mt[index]
            in_use = float(m.sum())
            if in_use == 0:
                continue
            loss = _loss(net(Xt[:, index]), Yt[index], m)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * in_use
            weight += in_use
        train_curve.append(total / weight)
        if validation is None:
            continue
        current = _evaluate(torch, net, *validation)
        validation_curve.append(current)
        if current < best_loss:
            best_loss, best_epoch = current, epoch
            best = [p.detach().clone() for p in params]
        elif epoch - best_epoch >= settings.patience:
            break
    if best is not None:
        with torch.no_grad():
            for p, kept in zip(params, best, strict=True):
                p.copy_(kept)
    else:
        best_epoch = epoch
    return epoch, best_epoch, train_curve, validation_curve


def _dense(weights, biases, n: int, s: int, per_joint: bool):
    """The grouped layers (G, out, in), (G, out) as the dense matrices of one MLP (MLPCorrection's layout).

    Coupled (G = 1): the group's own. Per joint (G = n): block diagonal, hidden unit o of joint j at
    row j·out + o; the first layer reads joint j's signals at input columns k·n + j (signals
    concatenated signal by signal); the last layer's block j is joint j's output row.
    """
    if not per_joint:
        return tuple(W[0] for W in weights), tuple(b[0] for b in biases)
    eye = np.eye(n)
    first = np.einsum("jhk,jm->jhkm", weights[0], eye).reshape(n * weights[0].shape[1], s * n)
    rest = [np.einsum("jab,jm->jamb", W, eye).reshape(n * W.shape[1], n * W.shape[2]) for W in weights[1:]]
    return (first, *rest), tuple(b.reshape(-1) for b in biases)

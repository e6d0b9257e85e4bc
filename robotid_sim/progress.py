"""The one progress-callback signature of robotid_sim: ``progress(label, done, total)``.

Every long piece of work that reports progress — a simulation, a closed-loop run, a scenario run and its
stages, a sweep, the RL demo — takes an optional callable of this shape and calls it with what it is doing
(``label``, e.g. ``"simulate"``, ``"identify"``, ``"sweep"``), how many steps are done and how many there are.
The command line maps each label to a progress bar; library code never prints.
"""

from __future__ import annotations

from collections.abc import Callable

#: ``progress(label, done, total)``
Progress = Callable[[str, int, int], None]


def relabel(progress: Progress | None, label: str) -> Progress | None:
    """``progress`` with every call's label replaced by ``label`` (None stays None): a stage that calls a
    step-level worker (a simulation) reports it under its own name."""
    if progress is None:
        return None
    return lambda _label, done, total: progress(label, done, total)

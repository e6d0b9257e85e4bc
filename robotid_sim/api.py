"""Top-level functions composing the stages (re-exported by ``robotid_sim``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robotid_sim.identification import IdentifiedModel
    from robotid_sim.robot import Robot


def identify(dataset, robot: Robot | str, estimator: str = "wls", **options) -> IdentifiedModel:
    """Identify a model of ``robot`` from ``dataset`` with a registered estimator.

    Args:
        dataset: a :class:`~robotid_sim.sim.dataset.Dataset` (simulated or loaded from a file).
        robot: a :class:`Robot`, a bundled robot name or a URDF path (its structure is used).
        estimator: estimator name (``robotid-sim plugins`` lists them).
        **options: the estimator's options; an unknown option raises ConfigError listing valid ones.
    """
    # imported here, not with the module: ``import robotid_sim`` must stay cheap (see __init__)
    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.plugins import get_estimator
    from robotid_sim.robot import Robot, load_robot

    if not isinstance(robot, Robot):
        robot = load_robot(robot)
    est = get_estimator(estimator).from_options(**options)
    return est.fit(IdentificationProblem(robot, dataset))

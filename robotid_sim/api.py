"""Top-level functions composing the stages (re-exported by ``robotid_sim``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robotid_sim.identification import IdentifiedModel
    from robotid_sim.robot import Robot


def identify(
    dataset, robot: Robot | str, estimator: str = "wls", *, velocity_deadband=None, **options
) -> IdentifiedModel:
    """Identify a model of ``robot`` from ``dataset`` with a registered estimator.

    Args:
        dataset: a :class:`~robotid_sim.sim.dataset.Dataset` (simulated or loaded from a file).
        robot: a :class:`Robot`, a bundled robot name or a URDF path (its structure is used).
        estimator: estimator name (``robotid-sim plugins`` lists them).
        velocity_deadband: rad/s or m/s, one for all joints or one per joint: samples where |qd_j| is
            below it are left out of joint j's equations (:class:`IdentificationProblem`).
        **options: the estimator's options; an unknown option raises ConfigError listing valid ones.

    Raises:
        ConfigError: an unknown estimator or option, or an option of the wrong type (before any work).
        DataError: the data was recorded on another robot or with other joints than ``robot``'s
            (``dataset.metadata["robot"]``, ``dataset.joint_names``, the joint count), naming both.
        IdentificationError: the data does not excite every base parameter; for data simulated with a duration
            that cut the excitation before some joints moved (``dataset.metadata["excitation_cut"]``), the
            message names that cause.
    """
    # imported here, not with the module: ``import robotid_sim`` must stay cheap (see __init__)
    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.plugins import get_estimator
    from robotid_sim.robot import Robot, load_robot

    est = get_estimator(estimator).from_options(**options)  # a bad option fails before the robot is built
    if not isinstance(robot, Robot):
        robot = load_robot(robot)
    return est.fit(IdentificationProblem(robot, dataset, velocity_deadband=velocity_deadband))

"""Frames of an arm posed kinematically: the renderer of identified envs (SPEC §11)."""

from __future__ import annotations

import numpy as np

from robotid_sim.robot.model import Robot


class KinematicRenderer:
    """A headless PyBullet world of ``robot``, posed with ``resetJointState`` (no physics) and
    rendered by the TinyRenderer camera of :meth:`~robotid_sim.sim.pybullet_sim.PyBulletSimulator.render`.

    The world is created on the first frame, and dropped when pickled (it is a live PyBullet
    client), to be created again on the next frame.
    """

    def __init__(self, robot: Robot):
        self.robot = robot
        self._sim = None

    def frame(self, q: np.ndarray) -> np.ndarray:
        """RGB frame (height, width, 3) uint8 of the arm at joint positions ``q`` (n,)."""
        if self._sim is None:
            from robotid_sim.sim.pybullet_sim import PyBulletSimulator

            self._sim = PyBulletSimulator(self.robot)
        self._sim.reset(q)
        return self._sim.render()

    def close(self) -> None:
        if self._sim is not None:
            self._sim.close()
            self._sim = None

    def __getstate__(self) -> dict:
        return {"robot": self.robot, "_sim": None}

"""Simulation: the exact PyBullet backend, noise models, and the Dataset with its file formats."""

from robotid_sim.sim.dataset import Dataset, Signals, load_dataset
from robotid_sim.sim.pybullet_sim import PyBulletSimulator
from robotid_sim.sim.simulate import simulate

__all__ = ["Dataset", "PyBulletSimulator", "Signals", "load_dataset", "simulate"]

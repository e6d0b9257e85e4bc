"""Bundled robot descriptions: one folder per robot with ``robot.urdf`` and ``robot.yaml``.

The URDFs are generated from the DH table in each sidecar by
``python -m robotid_sim.robot.build`` (see ``robotid_sim/robot/build.py``).
"""

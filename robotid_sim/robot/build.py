"""Regenerate bundled (or your own) URDFs from the DH table held in a sidecar.

    python -m robotid_sim.robot.build robots/*/robot.yaml

Each sidecar's ``dh`` mapping (convention, base_mass, rows; see :mod:`robotid_sim.robot.dh`)
is turned into ``robot.urdf`` next to it. The bundled URDFs are this command's output.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from robotid_sim.errors import ConfigError
from robotid_sim.robot.dh import write_dh_urdf
from robotid_sim.robot.sidecar import load_sidecar


def build(sidecar_path: str | Path) -> Path:
    """Write ``robot.urdf`` next to ``sidecar_path`` from its ``dh`` table; return the path."""
    sidecar_path = Path(sidecar_path)
    sc = load_sidecar(sidecar_path)
    if sc.dh is None:
        raise ConfigError(f"{sidecar_path} has no 'dh' table to build a URDF from")
    table = {"name": sidecar_path.parent.name, **sc.dh}
    return write_dh_urdf(table, sidecar_path.parent / "robot.urdf")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sidecars", nargs="+", help="robot.yaml files with a 'dh' table")
    for path in parser.parse_args(argv).sidecars:
        print(build(path))


if __name__ == "__main__":
    main()

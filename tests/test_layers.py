"""The layers of robotid_sim are a contract: ``lint-imports`` (import-linter) checks pyproject.toml's contracts.

A lower layer never imports a higher one, imports inside functions included (dynamics < robot <
excitation/sim/signal < identification < control < envs/scenario/sweep < report < studies < api < cli), and
the registry (``robotid_sim.plugins``), the hook specifications and the utility modules import no stage.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: runs import-linter's command line in this interpreter (its console script may not sit beside it)
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_imports_keep_the_layers_contract():
    result = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"lint-imports failed:\n{result.stdout}\n{result.stderr}"

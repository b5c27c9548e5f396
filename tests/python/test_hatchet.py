"""pathscope.hatchet: its checks (hatchet_checks.py) run in .venv-hatchet, the environment
with llnl-hatchet, llnl-thicket and their pandas<3 (scripts/setup.sh); here, in .venv, the
error without them."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pathscope.errors import PathscopeError

ROOT = Path(__file__).resolve().parents[2]
HATCHET_PYTHON = ROOT / ".venv-hatchet" / "bin" / "python"


def run_checks(*pytest_args, env=None):
    """pytest on hatchet_checks.py in .venv-hatchet; fails with its output."""
    assert HATCHET_PYTHON.exists(), "no .venv-hatchet: run scripts/setup.sh"
    e = dict(os.environ, PYTHONPATH=f"{ROOT / 'python'}:{ROOT / 'tests' / 'python'}",
             **(env or {}))
    p = subprocess.run([str(HATCHET_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-W", "ignore::FutureWarning",
                        str(ROOT / "tests" / "python" / "hatchet_checks.py"), *pytest_args],
                       capture_output=True, text=True, env=e, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_hatchet_checks():
    out = run_checks("-k", "not real_run")
    assert "10 passed" in out


def test_without_hatchet_a_clear_error():
    if subprocess.run([sys.executable, "-c", "import hatchet"],
                      capture_output=True).returncode == 0:
        pytest.skip("hatchet is importable here")
    import pathscope.hatchet as ph
    from pathscope_samples import HYBRID
    with pytest.raises(PathscopeError) as e:
        ph.read(HYBRID)
    assert str(e.value) == (
        "pathscope.hatchet needs llnl-hatchet and llnl-thicket, which need pandas<3: use "
        ".venv-hatchet (scripts/setup.sh makes it) or pip install 'pathscope[hatchet]' into "
        "an environment of its own")

"""home.py: where the runtime files are, in a checkout and in an installed prefix."""
import sys
from pathlib import Path

import pytest

from pathscope import home
from pathscope.errors import LaunchError

ROOT = Path(__file__).resolve().parents[2]


def make_prefix(p: Path, mpis=("openmpi",), symbolizer=True) -> Path:
    (p / "share" / "pathscope").mkdir(parents=True)
    (p / "share" / "pathscope" / "options.def").write_text("")
    for mpi in mpis:
        (p / "lib" / "pathscope" / mpi).mkdir(parents=True)
        (p / "lib" / "pathscope" / mpi / "libpathscope.so").write_text("")
    if symbolizer:
        (p / "bin").mkdir()
        (p / "bin" / home.SYMBOLIZER_NAME).write_text("")
    return p


def test_checkout_of_this_package(monkeypatch):
    monkeypatch.delenv(home.HOME_VARIABLE, raising=False)
    monkeypatch.delenv(home.SYMBOLIZER_VARIABLE, raising=False)
    assert home.find_home() == home.Home(ROOT, installed=False)
    assert home.options_def_path() == ROOT / "runtime" / "core" / "options.def"
    assert home.runtime_library_path("mpich") == ROOT / "build" / "mpich" / "libpathscope.so"
    assert home.build_hint("mpich") == "build it with: make build MPI=mpich"
    assert home.build_hint() == "build it with: make build"
    assert home.symbolizer_hint() == "run `make build`"


def test_installed_prefix_named_by_the_variable(tmp_path, monkeypatch):
    p = make_prefix(tmp_path / "prefix")
    monkeypatch.setenv(home.HOME_VARIABLE, str(p))
    monkeypatch.delenv(home.SYMBOLIZER_VARIABLE, raising=False)
    assert home.find_home() == home.Home(p, installed=True)
    assert home.options_def_path() == p / "share" / "pathscope" / "options.def"
    assert home.runtime_library_path("openmpi") == p / "lib/pathscope/openmpi/libpathscope.so"
    assert home.runtime_library_path("mpich") == p / "lib/pathscope/mpich/libpathscope.so"
    assert home.symbolizer_path() == p / "bin" / home.SYMBOLIZER_NAME
    assert home.build_hint("mpich") == (f"install it with: cmake --install build/mpich --prefix "
                                        f"{p} (in a checkout, after make build MPI=mpich)")
    (p / "bin" / home.SYMBOLIZER_NAME).unlink()
    assert home.symbolizer_path() is None
    assert home.symbolizer_hint().startswith(f"not installed in {p}/bin: ")


def test_installed_package_finds_its_own_prefix(tmp_path, monkeypatch):
    """The CLI's package as `cmake --install` lays it out: P/share/pathscope/python/pathscope."""
    p = make_prefix(tmp_path / "prefix")
    package = p / "share" / "pathscope" / "python" / "pathscope"
    package.mkdir(parents=True)
    monkeypatch.delenv(home.HOME_VARIABLE, raising=False)
    monkeypatch.setattr(home, "__file__", str(package / "home.py"))
    assert home.find_home() == home.Home(p, installed=True)


def test_environment_prefix_then_none(tmp_path, monkeypatch):
    """A package outside both layouts (pip install .): the environment's prefix if the runtime
    is installed there, else none -- and `run` says what to do in one line."""
    monkeypatch.delenv(home.HOME_VARIABLE, raising=False)
    monkeypatch.delenv(home.SYMBOLIZER_VARIABLE, raising=False)
    site = tmp_path / "venv" / "lib" / "python3" / "site-packages" / "pathscope"
    site.mkdir(parents=True)
    monkeypatch.setattr(home, "__file__", str(site / "home.py"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    assert home.find_home() is None
    assert home.symbolizer_path() is None
    assert home.symbolizer_hint() == home.NO_HOME
    with pytest.raises(LaunchError) as e:
        home.runtime_library_path("openmpi")
    assert str(e.value) == home.NO_HOME
    make_prefix(tmp_path / "venv")
    assert home.find_home() == home.Home(tmp_path / "venv", installed=True)

"""pathscope.launch: MPI detection, output directory, program lookup, the program's env."""
import os

import pytest

from pathscope.errors import LaunchError, OptionError
from pathscope.launch import (detect_mpi, mpi_from_ldd, plan_launch, prepare_output_directory,
                              prepend_preload, resolve_program)
from pathscope.options import load_options

OMPI_LDD = "\tlibmpi.so.40 => /lib/x86_64-linux-gnu/libmpi.so.40 (0x00007f)\n"
MPICH_LDD = "\tlibmpich.so.12 => /lib/x86_64-linux-gnu/libmpich.so.12 (0x00007f)\n"


def ldd_gives(text):
    return lambda executable: text


@pytest.mark.parametrize("env, ldd, mpi", [
    ({"OMPI_COMM_WORLD_RANK": "0"}, "", "openmpi"),
    ({"OMPI_COMM_WORLD_RANK": "0", "PMI_RANK": "0"}, MPICH_LDD, "openmpi"),
    ({"PMI_RANK": "0", "PMI_FD": "6"}, OMPI_LDD, "mpich"),
    ({"HYDRA_CONTROL_FD": "5"}, "", "mpich"),
    # exported by users, not by a launch: do not decide on these
    ({"PMI_RANK": "0", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_MCA_btl": "self"}, "", "mpich"),
    ({"OMPI_MCA_btl": "self"}, MPICH_LDD, "mpich"),
    ({"OMPI_UNIVERSE_SIZE": "4"}, MPICH_LDD, "openmpi"),
    # under srun the PMI variables say nothing about the library: ldd decides
    ({"SLURM_PROCID": "0", "PMI_FD": "6"}, OMPI_LDD, "openmpi"),
    ({"SLURM_PROCID": "0"}, MPICH_LDD, "mpich"),
    ({"SLURM_PROCID": "0", "PMI_RANK": "0"}, "", "mpich"),
    ({}, OMPI_LDD, "openmpi"),
    ({}, MPICH_LDD, "mpich"),
    ({}, "", "openmpi"),
])
def test_detect_mpi(env, ldd, mpi):
    assert detect_mpi(env, "/bin/app", ldd_gives(ldd))[0] == mpi


def test_mpi_from_ldd():
    assert mpi_from_ldd(OMPI_LDD) == "openmpi"
    assert mpi_from_ldd(MPICH_LDD) == "mpich"
    assert mpi_from_ldd("\tlibc.so.6 => /lib/libc.so.6\n") is None


def test_prepend_preload():
    assert prepend_preload("/r/lib.so", None) == "/r/lib.so"
    assert prepend_preload("/r/lib.so", "/x/a.so /y/b.so") == "/r/lib.so:/x/a.so:/y/b.so"
    assert prepend_preload("/r/lib.so", "/x/a.so:/r/lib.so") == "/r/lib.so:/x/a.so"


def test_prepare_output_directory_creates_nothing(tmp_path, monkeypatch):
    """The runtime creates the directory (and refuses unsafe ones) at load time; the CLI only
    pre-checks, so a rejected run leaves nothing behind."""
    monkeypatch.chdir(tmp_path)
    assert prepare_output_directory("out/run1") == tmp_path / "out" / "run1"
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "plain").write_text("")
    with pytest.raises(LaunchError) as e:
        prepare_output_directory("plain/sub")
    assert str(e.value) == "cannot write to output directory 'plain/sub': Not a directory"
    with pytest.raises(LaunchError) as e:
        prepare_output_directory("plain")
    assert str(e.value) == "output location 'plain' exists and is not a directory"


def test_prepare_output_directory_refuses_what_the_runtime_refuses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir(mode=0o755)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(LaunchError) as e:
        prepare_output_directory("link")
    assert str(e.value) == ("output location 'link' is a symbolic link (pathscope does not "
                            "follow links in the output directory)")
    (tmp_path / "real" / "ranks").symlink_to("/")
    with pytest.raises(LaunchError) as e:
        prepare_output_directory("real/")
    assert str(e.value) == ("output location 'real/ranks' is a symbolic link (pathscope does "
                            "not follow links in the output directory)")
    (tmp_path / "open").mkdir()
    os.chmod(tmp_path / "open", 0o777)
    with pytest.raises(LaunchError) as e:
        prepare_output_directory("open")
    assert str(e.value) == ("output directory 'open' is writable by others (mode 0777) without "
                            "the sticky bit: remove their write permission (chmod go-w) or "
                            "choose another directory")
    os.chmod(tmp_path / "open", 0o1777)            # sticky, like /tmp: accepted
    assert prepare_output_directory("open") == tmp_path / "open"
    too_long = "d" * 200 + "/" + "e" * 200
    deep = "/".join([too_long] * 10)
    with pytest.raises(LaunchError) as e:
        prepare_output_directory(deep)
    length = len(str(tmp_path)) + 1 + len(deep)
    assert str(e.value) == (f"output directory path too long: {length} bytes as an absolute "
                            f"path, at most 4035 (every file pathscope writes under it must fit "
                            f"in PATH_MAX, 4096)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "open", "real"]


def test_resolve_program(tmp_path):
    assert resolve_program("sh") in ("/bin/sh", "/usr/bin/sh")
    with pytest.raises(LaunchError) as e:
        resolve_program("no-such-program-xyz")
    assert str(e.value) == "program not found: no-such-program-xyz"
    with pytest.raises(LaunchError, match="program not found: ./nope"):
        resolve_program("./nope")
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(LaunchError, match="program is not executable"):
        resolve_program(str(script))


def test_plan_launch_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake = tmp_path / "libpathscope.so"
    fake.write_text("")
    environ = {"PATH": os.environ["PATH"], "PATHSCOPE_HOME": "/repo", "PATHSCOPE_LIB": str(fake),
               "LD_PRELOAD": "/x/other.so", "PATHSCOPE_SIGNALS": "off"}
    plan = plan_launch(["sh", "-c", "echo 'a b'"], load_options(), environ, "prof", "auto",
                       {"PATHSCOPE_QUIET": "on"}, ldd=ldd_gives(""))
    assert plan.argv == ["sh", "-c", "echo 'a b'"]
    assert plan.executable.endswith("/sh")
    assert plan.env["LD_PRELOAD"] == f"{fake}:/x/other.so"
    assert plan.env["PATHSCOPE_OUTPUT"] == str(tmp_path / "prof")
    assert plan.env["PATHSCOPE_COMMAND"] == "sh -c 'echo '\"'\"'a b'\"'\"''"
    assert plan.env["PATHSCOPE_QUIET"] == "on"
    assert plan.env["PATHSCOPE_SIGNALS"] == "off"
    assert "PATHSCOPE_HOME" not in plan.env and "PATHSCOPE_LIB" not in plan.env


def test_plan_launch_without_output_leaves_the_default_to_the_runtime(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake = tmp_path / "lib.so"
    fake.write_text("")
    plan = plan_launch(["true"], load_options(), {"PATH": os.environ["PATH"],
                                                  "PATHSCOPE_LIB": str(fake)},
                       None, "auto", {}, ldd=ldd_gives(""))
    assert "PATHSCOPE_OUTPUT" not in plan.env
    assert list(tmp_path.iterdir()) == [fake]


def test_plan_launch_output_from_environment_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake = tmp_path / "lib.so"
    fake.write_text("")
    plan = plan_launch(["true"], load_options(), {"PATH": os.environ["PATH"],
                                                  "PATHSCOPE_LIB": str(fake),
                                                  "PATHSCOPE_OUTPUT": "rel"},
                       None, "auto", {}, ldd=ldd_gives(""))
    assert plan.env["PATHSCOPE_OUTPUT"] == str(tmp_path / "rel")


def test_plan_launch_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = load_options()
    path = {"PATH": os.environ["PATH"]}
    with pytest.raises(OptionError, match="unknown option PATHSCOPE_X "):
        plan_launch(["true"], options, {**path, "PATHSCOPE_X": "1"}, None, "auto", {})
    with pytest.raises(LaunchError, match="PATHSCOPE_LIB=/nope/lib.so: no such file"):
        plan_launch(["true"], options, {**path, "PATHSCOPE_LIB": "/nope/lib.so"}, None, "auto",
                    {})
    monkeypatch.setenv("PATHSCOPE_HOME", str(tmp_path))   # a checkout without builds
    with pytest.raises(LaunchError) as e:
        plan_launch(["true"], options, path, None, "mpich", {})
    assert str(e.value) == (f"runtime library for mpich not found: {tmp_path}/build/mpich/"
                            f"libpathscope.so (--mpi mpich); build it with: make build MPI=mpich")

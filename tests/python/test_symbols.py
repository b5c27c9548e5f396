"""Frame names (pathscope.symbols) and the symbolizer protocol (pathscope.symbolize), with a
fake pathscope-symbolize: a Python script that answers from the fixture's symbols.tsv and
logs every request it gets."""
import os
import sys
from pathlib import Path

import pytest

from pathscope.cli import main
from pathscope.errors import ProfileError
from pathscope.reader import load_profile
from pathscope.symbolize import request_text, needed_addresses, resolve_symbols
from pathscope.symbols import Frame, parse_symbols, read_symbols
from pathscope_samples import HYBRID, copy_hybrid

SOLVER = ("/opt/solver/bin/solver", "a1b2c3d4e5f60718")

FAKE_SYMBOLIZER = '''#!{python}
"""A fake pathscope-symbolize: answers from ANSWERS ((path, address, kind) -> frame fields
after the module id), logs each request to $FAKE_SYMBOLIZER_LOG."""
import os
import sys

ANSWERS = {answers!r}
STATUS = {status!r}
request = sys.stdin.read()
log = os.environ.get("FAKE_SYMBOLIZER_LOG")
if log:
    with open(log, "a") as f:
        f.write(request + "----\\n")
modules, out, frames = {{}}, ["pathscope-symbols\\t2.0\\n"], []
for number, line in enumerate(request.splitlines(), 1):
    f = line.split("\\t")
    if len(f) == 4 and f[0] == "module":
        modules[f[1]] = f[2]
        out.append("\\t".join(["module", f[1], f[2], f[3], STATUS.get(f[2], "ok")]) + "\\n")
    elif len(f) == 4 and f[0] == "addr" and f[1] in modules:
        for level in ANSWERS.get((modules[f[1]], f[2], f[3]), []):
            frames.append("\\t".join(["frame", f[1], f[2], f[3]] + level) + "\\n")
    else:
        sys.stderr.write(f"pathscope-symbolize: line {{number}}: malformed request\\n")
        sys.exit(2)
sys.stdout.write("".join(out + frames) + "end\\n")
'''

EXPECTED_REQUEST = """\
module\t0\t/lib/x86_64-linux-gnu/libc.so.6\t89abcdef01234567
module\t1\t/opt/solver/bin/solver\ta1b2c3d4e5f60718
module\t2\t/opt/solver/lib/libkernels.so\t-
addr\t0\t0x2724a\tcall
addr\t0\t0x8fe3c\tcall
addr\t0\t0x126a3c\tcall
addr\t1\t0x401025\tcall
addr\t1\t0x401100\tfn
addr\t1\t0x401130\tcall
addr\t1\t0x401288\tcall
addr\t1\t0x4012d0\tcall
addr\t1\t0x401300\tfn
addr\t1\t0x401345\tcall
addr\t1\t0x401365\tcall
addr\t1\t0x401375\tcall
addr\t1\t0x401500\tfn
addr\t1\t0x401540\tcall
addr\t2\t0x1a4f\tpc
"""


def fixture_answers():
    """The fixture's symbols.tsv as the fake's table."""
    rows = [line.split("\t") for line in (HYBRID / "symbols.tsv").read_text().splitlines()]
    paths = {r[1]: r[2] for r in rows if r[0] == "module"}
    answers: dict = {}
    for r in rows:
        if r[0] == "frame":
            answers.setdefault((paths[r[1]], r[2], r[3]), []).append(r[4:])
    status = {r[2]: r[4] for r in rows if r[0] == "module"}
    return answers, status


def make_fake(tmp_path, answers=None, status=None, body=None):
    if answers is None:
        answers, status = fixture_answers()
    script = tmp_path / "fake-symbolize"
    script.write_text(body if body is not None else FAKE_SYMBOLIZER.format(
        python=sys.executable, answers=answers, status=status or {}))
    script.chmod(0o755)
    return script


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """PATHSCOPE_SYMBOLIZER = the fake; returns the log of its requests."""
    log = tmp_path / "requests.log"
    monkeypatch.setenv("PATHSCOPE_SYMBOLIZER", str(make_fake(tmp_path)))
    monkeypatch.setenv("FAKE_SYMBOLIZER_LOG", str(log))
    return log


def requests(log: Path) -> list[str]:
    return log.read_text().split("----\n")[:-1] if log.exists() else []


# ---- names --------------------------------------------------------------------------------------

def test_names_inlines_unresolved_and_pseudo_frames():
    table = read_symbols(HYBRID / "symbols.tsv")
    assert table.modules[("/opt/solver/lib/libkernels.so", "")] == "missing"
    assert table.names(Frame("call", *SOLVER, 0x401288)) == ["solve", "update"]
    assert [(s.function, s.file, s.line) for s in table.lines(Frame("call", *SOLVER,
                                                                    0x401288))] == [
        ("solve", "/src/solver/solver.c", 20), ("update", "/src/solver/update.h", 7)]
    start = table.lines(Frame("call", *SOLVER, 0x401025))
    assert [(s.function, s.file, s.line) for s in start] == [("_start", None, None)]
    assert table.names(Frame("pc", "/opt/solver/lib/libkernels.so", "", 0x1A4F)) == [
        "libkernels.so+0x1a4f"]
    # same address, other kind: not resolved by the fn line
    assert table.names(Frame("call", *SOLVER, 0x401100)) == ["solver+0x401100"]
    assert table.names(Frame("fn", "", "", 0x7F00)) == ["?+0x7f00"]
    assert table.names(Frame("mpi", name="MPI_Send")) == ["MPI_Send"]
    assert table.names(Frame("failed")) == ["[failed unwind]"]
    assert table.names(Frame("not_unwound")) == ["[not unwound]"]
    assert table.names(Frame("root")) == []
    assert table.names(Frame("gpu", name="kernel7")) == ["[gpu kernel7]"]


def test_unknown_function_at_a_level_is_named_by_module_and_address():
    table = parse_symbols("pathscope-symbols\t2.0\nmodule\t4\t/a/libx.so\t-\tok\n"
                          "frame\t4\t0x10\tcall\t0\tf\tx.c\t3\n"
                          "frame\t4\t0x10\tcall\t1\t-\t-\t-\nend\n", "<test>")
    assert table.names(Frame("call", "/a/libx.so", "", 0x10)) == ["f", "libx.so+0x10"]


@pytest.mark.parametrize("text, message", [
    ("pathscope-symbols\t2.0\nframe\t0\t0x1\tcall\t0\tf\t-\t-\nend\n",
     "<t>:2: 'frame' line names module 0, which has no 'module' line"),
    ("pathscope-symbols\t2.0\nmodule\t0\t/a\t-\tok\nframe\t0\t0x1\tcall\t1\tf\t-\t-\nend\n",
     "<t>:3: level 1 of address 0x1 follows level -1 (levels are 0, 1, ... in order)"),
    ("pathscope-symbols\t2.0\nmodule\t0\t/a\t-\tok\n", "<t> is cut short (no end line)"),
    ("pathscope-symbols\t3.0\nend\n",
     "profile format 3.0 is newer than this pathscope (reads 2.x)"),
])
def test_malformed_symbols(text, message):
    with pytest.raises(ProfileError) as e:
        parse_symbols(text, "<t>")
    assert str(e.value) == message


# ---- the protocol and the cache -------------------------------------------------------------

def test_request_lists_each_address_once():
    assert request_text(needed_addresses(load_profile(HYBRID))) == EXPECTED_REQUEST


def test_symbolizer_answer_is_used_and_cached(tmp_path, fake):
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    table = resolve_symbols(load_profile(d))
    assert requests(fake) == [EXPECTED_REQUEST]
    assert table.names(Frame("call", *SOLVER, 0x401288)) == ["solve", "update"]
    assert table.notes == ["symbols: /opt/solver/lib/libkernels.so: not found on this machine; "
                           "its frames are shown as module+offset"]
    assert read_symbols(d / "symbols.tsv") == read_symbols(HYBRID / "symbols.tsv")
    assert not list(d.glob("*.tmp"))
    # the second look-up reads the cache: the symbolizer is not asked again
    again = resolve_symbols(load_profile(d))
    assert len(requests(fake)) == 1
    assert again.addresses == table.addresses and again.notes == table.notes


def test_cache_missing_a_module_asks_again(tmp_path, fake):
    d = copy_hybrid(tmp_path / "prof")
    (d / "symbols.tsv").write_text((d / "symbols.tsv").read_text().replace(
        "module\t2\t/opt/solver/lib/libkernels.so\t-\tmissing\n", ""))
    resolve_symbols(load_profile(d))
    assert requests(fake) == [EXPECTED_REQUEST]
    assert read_symbols(d / "symbols.tsv") == read_symbols(HYBRID / "symbols.tsv")


def test_unreadable_cache_is_ignored_with_a_note(tmp_path, fake):
    d = copy_hybrid(tmp_path / "prof")
    (d / "symbols.tsv").write_text("pathscope-symbols\t2.0\n")
    table = resolve_symbols(load_profile(d))
    assert table.notes[0] == f"symbols: {d}/symbols.tsv is cut short (no end line) (ignored)"
    assert len(requests(fake)) == 1
    assert table.names(Frame("fn", *SOLVER, 0x401500)) == ["worker"]


def test_read_only_directory_keeps_the_names_in_memory(tmp_path, fake, monkeypatch):
    """A directory we cannot write (simulated: the tests run as root): no error, no note."""
    def refuse(dir_fd, entry, text):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("pathscope.symbolize.write_in_directory", refuse)
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    table = resolve_symbols(load_profile(d))
    assert table.names(Frame("fn", *SOLVER, 0x401500)) == ["worker"]
    assert not (d / "symbols.tsv").exists()
    assert len(table.notes) == 1     # only the module the fake says is missing


def test_symbolizer_not_built(tmp_path, monkeypatch):
    monkeypatch.delenv("PATHSCOPE_SYMBOLIZER", raising=False)
    monkeypatch.setenv("PATHSCOPE_HOME", str(tmp_path / "checkout-without-build"))
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    table = resolve_symbols(load_profile(d))
    assert table.notes == ["symbols: pathscope-symbolize not found (run `make build`); frames "
                           "shown as module+offset"]
    assert table.names(Frame("call", *SOLVER, 0x401288)) == ["solver+0x401288"]
    assert not (d / "symbols.tsv").exists()


def test_symbolizer_variable_names_a_missing_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PATHSCOPE_SYMBOLIZER", str(tmp_path / "nope"))
    table = resolve_symbols(load_profile(copy_hybrid(tmp_path / "prof", symbols=False)))
    assert table.notes == [f"symbols: PATHSCOPE_SYMBOLIZER={tmp_path}/nope: no such file; "
                           f"frames shown as module+offset"]


@pytest.mark.parametrize("body, note", [
    ("#!/bin/sh\necho 'pathscope-symbolize: line 3: bad kind' >&2\nexit 2\n",
     "fake-symbolize failed (exit status 2): pathscope-symbolize: line 3: bad kind"),
    ("#!/bin/sh\nkill -9 $$\n", "fake-symbolize failed (killed by signal 9)"),
    ("#!/bin/sh\ncat >/dev/null\nprintf 'pathscope-symbols\\t2.0\\nframe\\t9\\nend\\n'\n",
     "fake-symbolize answered malformed symbols: fake-symbolize output:2: 'frame' line has 1 "
     "fields after the type, expected 7"),
])
def test_failing_symbolizer_falls_back_with_a_note(tmp_path, monkeypatch, body, note):
    monkeypatch.setenv("PATHSCOPE_SYMBOLIZER", str(make_fake(tmp_path, body=body)))
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    table = resolve_symbols(load_profile(d))
    assert table.notes == [f"symbols: {note}; frames shown as module+offset"]
    assert table.addresses == {}
    assert not (d / "symbols.tsv").exists()


def test_real_protocol_answer_for_malformed_input(tmp_path):
    """The fake exits 2 with a message for input it cannot parse (the contract)."""
    import subprocess
    script = make_fake(tmp_path)
    done = subprocess.run([str(script)], input="addr\tX\n", capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "pathscope-symbolize: line 1: malformed request\n"


def test_profile_without_call_paths_asks_nothing(tmp_path, fake):
    from pathscope_samples import write_sample
    assert resolve_symbols(load_profile(write_sample(tmp_path / "prof"))).notes == []
    assert requests(fake) == []


# ---- pathscope symbolize --------------------------------------------------------------------

def test_cli_symbolize_rewrites_and_counts(tmp_path, fake, capsys):
    d = copy_hybrid(tmp_path / "prof")
    (d / "symbols.tsv").write_text("stale")
    assert main(["symbolize", str(d)]) == 0
    assert len(requests(fake)) == 1           # always asks, even with a symbols.tsv
    assert read_symbols(d / "symbols.tsv") == read_symbols(HYBRID / "symbols.tsv")
    out = capsys.readouterr().out
    assert out == (
        f"wrote {d}/symbols.tsv: 14 of 15 addresses resolved\n"
        "  module                           build id          status   resolved  unresolved\n"
        "  /lib/x86_64-linux-gnu/libc.so.6  89abcdef01234567  ok              3           0\n"
        "  /opt/solver/bin/solver           a1b2c3d4e5f60718  ok             11           0\n"
        "  /opt/solver/lib/libkernels.so    -                 missing         0           1\n")


def test_cli_symbolize_errors(tmp_path, monkeypatch, capsys):
    from pathscope_samples import write_sample
    d1 = write_sample(tmp_path / "v1")
    assert main(["symbolize", str(d1)]) == 2
    assert capsys.readouterr().err == (f"pathscope: no call-path data in {d1} (profile format "
                                       f"1.x or sampling and unwinding were off)\n")
    monkeypatch.delenv("PATHSCOPE_SYMBOLIZER", raising=False)
    monkeypatch.setenv("PATHSCOPE_HOME", str(tmp_path))
    d = copy_hybrid(tmp_path / "prof")
    assert main(["symbolize", str(d)]) == 2
    assert capsys.readouterr().err == ("pathscope: pathscope-symbolize not found "
                                       "(run `make build`)\n")
    monkeypatch.setenv("PATHSCOPE_SYMBOLIZER", str(make_fake(tmp_path)))
    monkeypatch.setattr("pathscope.symbolize.write_in_directory",
                        lambda dir_fd, entry, text: (_ for _ in ()).throw(
                            PermissionError(13, "Permission denied")))
    assert main(["symbolize", str(d)]) == 2
    assert capsys.readouterr().err == (f"pathscope: cannot write '{d}/symbols.tsv': "
                                       f"Permission denied\n")


def test_symbolizer_found_in_the_build_tree(tmp_path, monkeypatch):
    from pathscope.home import symbolizer_path
    monkeypatch.delenv("PATHSCOPE_SYMBOLIZER", raising=False)
    monkeypatch.setenv("PATHSCOPE_HOME", str(tmp_path))
    assert symbolizer_path() is None
    mpich = tmp_path / "build" / "mpich" / "pathscope-symbolize"
    mpich.parent.mkdir(parents=True)
    mpich.write_text("")
    assert symbolizer_path() == mpich
    openmpi = tmp_path / "build" / "openmpi" / "pathscope-symbolize"
    openmpi.parent.mkdir(parents=True)
    openmpi.write_text("")
    assert symbolizer_path() == openmpi
    monkeypatch.setenv("PATHSCOPE_SYMBOLIZER", "/x/y")
    assert symbolizer_path() == Path("/x/y")
    assert os.environ["PATHSCOPE_HOME"] == str(tmp_path)


def test_run_keeps_the_variable_from_the_program(tmp_path):
    """PATHSCOPE_SYMBOLIZER is the CLI's: `pathscope run` accepts it and removes it (the
    runtime rejects PATHSCOPE_* variables it does not know)."""
    from pathscope.launch import plan_launch
    from pathscope.options import load_options

    lib = tmp_path / "libpathscope.so"
    lib.write_text("")
    environ = {"PATH": os.environ["PATH"], "PATHSCOPE_SYMBOLIZER": "/x/sym",
               "PATHSCOPE_LIB": str(lib)}
    plan = plan_launch(["true"], load_options(), environ, str(tmp_path / "prof"), "auto", {})
    assert "PATHSCOPE_SYMBOLIZER" not in plan.env


# ---- symbols.tsv written safely -------------------------------------------------------------

MISSING_NOTE = ("symbols: /opt/solver/lib/libkernels.so: not found on this machine; its frames "
                "are shown as module+offset")


def victim_file(tmp_path) -> Path:
    victim = tmp_path / "root-only"
    victim.write_text("root's data\n")
    victim.chmod(0o600)
    return victim


def test_planted_links_are_neither_followed_nor_read(tmp_path, fake):
    """The old temporary name (symbols.tsv.<pid>.tmp) and symbols.tsv itself planted as links
    to a file of ours: that file is untouched; symbols.tsv becomes a regular file."""
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    victim = victim_file(tmp_path)
    (d / f"symbols.tsv.{os.getpid()}.tmp").symlink_to(victim)
    (d / "symbols.tsv").symlink_to(victim)
    table = resolve_symbols(load_profile(d))
    assert table.notes == [f"symbols: {d}/symbols.tsv is a symbolic link (not followed) "
                           f"(ignored)", MISSING_NOTE]
    assert victim.read_text() == "root's data\n"
    assert not (d / "symbols.tsv").is_symlink()
    assert read_symbols(d / "symbols.tsv") == read_symbols(HYBRID / "symbols.tsv")
    assert sorted(p.name for p in d.iterdir()) == [
        "profile.tsv", "ranks", "symbols.tsv", f"symbols.tsv.{os.getpid()}.tmp"]


def test_no_cache_in_a_directory_of_another_user(tmp_path, fake, attacker, capsys):
    """Reading someone else's profile (here a real second user's) as root: the names are
    used from memory, said once; `pathscope symbolize` refuses to write there."""
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    os.chown(d, attacker.uid, attacker.gid)
    table = resolve_symbols(load_profile(d))
    why = f"{d}: it belongs to uid {attacker.uid} (neither you nor root)"
    assert table.notes == [f"symbols: {d}/symbols.tsv not written ({why}); the names are used "
                           f"from memory", MISSING_NOTE]
    assert table.names(Frame("call", *SOLVER, 0x401288)) == ["solve", "update"]
    assert sorted(p.name for p in d.iterdir()) == ["profile.tsv", "ranks"]
    assert main(["symbolize", str(d)]) == 2
    assert capsys.readouterr().err == f"pathscope: refusing to write '{d}/symbols.tsv': {why}\n"
    assert sorted(p.name for p in d.iterdir()) == ["profile.tsv", "ranks"]


def test_attacker_profile_in_shared_scratch(tmp_path, fake, attacker, shared_scratch):
    """The attack of issue 10: a user leaves a profile in a shared scratch area with
    symbols.tsv pointing at a root-only file, and asks root to look at it."""
    d = copy_hybrid(shared_scratch / "prof", symbols=False)
    for path in [d, *d.rglob("*")]:
        os.chown(path, attacker.uid, attacker.gid)
    victim = victim_file(tmp_path)
    planted = attacker.run(["/usr/bin/python3", "-c",
                            f"import os; os.symlink({str(victim)!r}, {str(d / 'symbols.tsv')!r})"])
    assert planted.returncode == 0, planted.stderr
    assert main(["report", str(d)]) == 0
    assert victim.read_text() == "root's data\n"
    assert (d / "symbols.tsv").is_symlink()


@pytest.mark.parametrize("mode, written", [(0o777, False), (0o1777, True), (0o755, True)])
def test_world_writable_directory_needs_the_sticky_bit(tmp_path, fake, mode, written):
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    d.chmod(mode)
    table = resolve_symbols(load_profile(d))
    assert (d / "symbols.tsv").exists() == written
    if not written:
        assert table.notes[0] == (f"symbols: {d}/symbols.tsv not written ({d}: it is writable "
                                  f"by everyone without the sticky bit); the names are used "
                                  f"from memory")


def test_directory_reached_through_a_link_or_replaced(tmp_path, fake):
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    link = tmp_path / "latest"
    link.symlink_to(d)
    table = resolve_symbols(load_profile(link))
    assert table.notes[0] == (f"symbols: {link}/symbols.tsv not written ({link} is a symbolic "
                              f"link); the names are used from memory")
    assert not (d / "symbols.tsv").exists()
    # replaced between reading the profile and writing the names: nothing written anywhere
    profile = load_profile(d)
    d.rename(tmp_path / "moved")
    copy_hybrid(d, symbols=False)
    table = resolve_symbols(profile)
    assert table.notes[0] == (f"symbols: {d}/symbols.tsv not written ({d} is no longer the "
                              f"directory that was read); the names are used from memory")
    assert not (d / "symbols.tsv").exists() and not (tmp_path / "moved" / "symbols.tsv").exists()

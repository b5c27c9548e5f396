#!/usr/bin/env python3
"""Unit test of pathscope-symbolize (runtime/symbols/symbolize.c), run by ctest.

usage: check_symbolize.py PATH/TO/pathscope-symbolize [--lammps]

--lammps: only the check on LAMMPS's library (ctest test_symbolize_lammps), which exits with
SKIPPED (77, ctest's SKIP_RETURN_CODE) where LAMMPS is not installed.  Its speed is measured
by bench/symbolize.py, not checked here: a time limit would fail on a loaded machine.

Builds the test programs of this directory with gcc, g++ and gfortran (-O2 -g) into a
temporary directory, finds addresses with nm and objdump (the return address after a given
call, function entries), feeds them to the symbolizer and checks the symbols.tsv it writes
(docs/format.md, "symbols.tsv") exactly: names, inline levels, file basenames and lines.
Expected lines come from the MARK comments of the sources, never from numbers written here.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAMMPS = "/usr/lib/x86_64-linux-gnu/liblammps.so.0"
SKIPPED = 77
failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}:\n    got  {got!r}\n    want {want!r}")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def mark(src, name):
    """The line number of the MARK:name comment in a source of this directory."""
    with open(os.path.join(HERE, src)) as f:
        lines = [i for i, line in enumerate(f, 1) if f"MARK:{name}" in line.split()]
    assert len(lines) == 1, f"MARK:{name} in {src}: {lines}"
    return lines[0]


def symbol(binary, name):
    """A symbol's address from nm."""
    for line in run(["nm", binary]).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise AssertionError(f"{name} not in nm {binary}")


def call_site(binary, func, callee):
    """(address of the call instruction, return address) of the one call of callee in func."""
    text = run(["objdump", "-d", "--no-show-raw-insn", binary])
    m = re.search(rf"^[0-9a-f]+ <{re.escape(func)}>:\n(.*?)\n\n", text, re.M | re.S)
    assert m, f"{func} not in objdump {binary}"
    insns = [line for line in m.group(1).splitlines() if re.match(r"^\s+[0-9a-f]+:\s", line)]
    addr = [int(line.split(":")[0], 16) for line in insns]
    calls = [i for i, line in enumerate(insns)
             if re.search(rf"\scall\s+[0-9a-f]+ <{re.escape(callee)}>", line)]
    assert len(calls) == 1 and calls[0] + 1 < len(insns), f"call {callee} in {func}: {calls}"
    return addr[calls[0]], addr[calls[0] + 1]


def build_id(binary):
    m = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", binary]))
    assert m, f"no build id in {binary}"
    return m.group(1)


def symbolize(tool, lines):
    """Runs the tool on request lines; returns (exit code, stdout, stderr)."""
    p = subprocess.run([tool], input="".join(line + "\n" for line in lines),
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def unescape(s):
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "\\": "\\"}[m.group(1)], s)


def parse(out):
    """symbols.tsv -> ({module id: (path, build id, status)}, {(id, addr, kind): [frames]}),
    a frame being (function, file basename or '-', line or '-')."""
    lines = out.split("\n")
    assert lines[0] == "pathscope-symbols\t2.0", lines[0]
    assert lines[-2:] == ["end", ""], lines[-2:]
    modules, frames, seen_frame = {}, {}, False
    for line in lines[1:-2]:
        f = line.split("\t")
        if f[0] == "module":
            assert not seen_frame, "module line after a frame line"
            assert len(f) == 5, line
            modules[int(f[1])] = (unescape(f[2]), f[3], f[4])
        elif f[0] == "frame":
            seen_frame = True
            assert len(f) == 8, line
            key = (int(f[1]), f[2], f[3])
            assert re.fullmatch(r"0x[0-9a-f]+", f[2]), line
            level = int(f[4])
            frames.setdefault(key, [])
            assert level == len(frames[key]), f"level {level} out of order: {line}"
            file = "-" if f[6] == "-" else os.path.basename(unescape(f[6]))
            frames[key].append((unescape(f[5]), file, f[7] if f[7] == "-" else int(f[7])))
        else:
            raise AssertionError(f"unexpected line {line!r}")
    return modules, frames


def resolve(tool, path, requests, given_build_id="-"):
    """Symbolizes (address, kind) requests of one module; returns (status, {key: frames})."""
    lines = [f"module\t0\t{path}\t{given_build_id}"]
    lines += [f"addr\t0\t{a:#x}\t{kind}" for a, kind in requests]
    rc, out, err = symbolize(tool, lines)
    assert rc == 0, f"exit {rc}: {err}"
    modules, frames = parse(out)
    return modules[0][2], {(a, kind): frames.get((0, f"{a:#x}", kind)) for a, kind in requests}


def test_c(tool, tmp):
    src = os.path.join(HERE, "symtest.c")
    variants = {"pie": ["-pie", "-fPIE"], "nopie": ["-no-pie", "-fno-PIE"]}
    chain = [("outer", "symtest.c", mark("symtest.c", "outer-calls-mid")),
             ("symtest_mid", "symtest_inline.h", mark("symtest_inline.h", "mid-calls-inner")),
             ("symtest_inner", "symtest_inline.h", mark("symtest_inline.h", "inner-calls-leaf"))]
    for name, flags in variants.items():
        exe = os.path.join(tmp, f"symtest-{name}")
        run(["gcc", "-O2", "-g", *flags, "-o", exe, src])
        call, ret = call_site(exe, "outer", "leaf")
        _, main_ret = call_site(exe, "main", "plain")
        if name == "nopie":
            check("non-PIE addresses are absolute", ret > 0x400000, True)
        status, got = resolve(tool, exe, [(ret, "call"), (call, "pc"), (symbol(exe, "plain"), "fn"),
                                          (main_ret, "call"), (symbol(exe, "outer"), "fn")])
        check(f"{name}: status", status, "ok")
        check(f"{name}: call in outer (inline chain)", got[(ret, "call")], chain)
        check(f"{name}: pc of the call instruction", got[(call, "pc")], chain)
        check(f"{name}: fn plain", got[(symbol(exe, "plain"), "fn")],
              [("plain", "symtest.c", mark("symtest.c", "plain-entry"))])
        check(f"{name}: call in main", got[(main_ret, "call")],
              [("main", "symtest.c", mark("symtest.c", "main-calls-plain"))])
        fn_outer = got[(symbol(exe, "outer"), "fn")]
        check(f"{name}: fn outer has one level", [(f[0], f[1]) for f in fn_outer or []],
              [("outer", "symtest.c")])

    # The same PIE without DWARF, without any symbols, with separate debuginfo, and with DWARF
    # but without the function's symbol.
    exe = os.path.join(tmp, "symtest-pie")
    call, ret = call_site(exe, "outer", "leaf")
    copies = {
        "nodebug": [["objcopy", "--strip-debug", exe, "{out}"]],
        "stripped": [["objcopy", "--strip-all", exe, "{out}"]],
        "split": [["objcopy", "--only-keep-debug", exe, "{out}.debug"],
                  ["objcopy", "--strip-all", "--add-gnu-debuglink={out}.debug", exe, "{out}"]],
        "nosym": [["objcopy", "--strip-symbol=outer", exe, "{out}"]],
    }
    want = {"nodebug": [("outer", "-", "-")], "stripped": None, "split": chain, "nosym": chain}
    for name, cmds in copies.items():
        out = os.path.join(tmp, f"symtest-{name}")
        for cmd in cmds:
            run([c.replace("{out}", out) for c in cmd])
        status, got = resolve(tool, out, [(ret, "call")])
        check(f"{name}: status", status, "ok")
        check(f"{name}: call in outer", got[(ret, "call")], want[name])

    # Build ids, statuses, escaping, duplicates.
    bid = build_id(exe)
    other = bid[:-1] + ("1" if bid[-1] == "0" else "0")
    weird = os.path.join(tmp, "no\tsuch\nfile\\here")
    esc = weird.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
    lines = [f"module\t3\t{exe}\t{bid.upper()}", f"module\t1\t{exe}\t{other}",
             f"module\t7\t{tmp}/missing.so\t-", "module\t4\t[vdso]\t-", f"module\t5\t{src}\t-",
             f"module\t6\t{esc}\t-",
             f"addr\t3\t{ret:#x}\tcall", f"addr\t1\t{ret:#x}\tcall", f"addr\t3\t{ret:#X}\tcall",
             "addr\t4\t0x10\tpc", "addr\t7\t0x10\tpc", f"addr\t3\t{ret:#x}\tcall"]
    rc, out, err = symbolize(tool, lines)
    check("statuses: exit", (rc, err), (0, ""))
    modules, frames = parse(out)
    check("statuses: modules in input order", [line.split("\t")[1] for line in out.split("\n")
                                                if line.startswith("module\t")],
          ["3", "1", "7", "4", "5", "6"])
    check("statuses", {k: v[2] for k, v in modules.items()},
          {3: "ok", 1: "build-id-mismatch", 7: "missing", 4: "unreadable", 5: "unreadable",
           6: "missing"})
    check("build id echoed in lower case", modules[3][1], bid)
    check("escaped path round trip", modules[6][0], weird)
    check("escaped path on the module line", f"\t{esc}\t" in out, True)
    check("only the good module resolves, once", sorted(frames), [(3, f"{ret:#x}", "call")])
    check("good module frames", frames.get((3, f"{ret:#x}", "call")), chain)


def test_cxx(tool, tmp):
    exe = os.path.join(tmp, "symtest-cxx")
    run(["g++", "-O2", "-g", "-o", exe, os.path.join(HERE, "symtest_cxx.cpp")])
    method = symbol(exe, "_ZN2ns5Klass6methodEi")
    twice = symbol(exe, "_ZN2ns5twiceIdEET_S1_")
    _, ret = call_site(exe, "_ZN2ns6callerERNS_5KlassEi", "_ZN2ns5Klass6methodEi")
    status, got = resolve(tool, exe, [(method, "fn"), (twice, "fn"), (ret, "call")])
    check("c++: status", status, "ok")
    check("c++: method", [f[0] for f in got[(method, "fn")] or []], ["ns::Klass::method(int)"])
    check("c++: template", [f[0] for f in got[(twice, "fn")] or []],
          ["double ns::twice<double>(double)"])
    check("c++: inline chain", got[(ret, "call")],
          [("ns::caller(ns::Klass&, int)", "symtest_cxx.cpp", mark("symtest_cxx.cpp", "caller-calls-helper")),
           ("ns::helper(ns::Klass&, int)", "symtest_cxx.cpp", mark("symtest_cxx.cpp", "helper-calls-method"))])


def test_fortran(tool, tmp):
    exe = os.path.join(tmp, "symtest-f")
    run(["gfortran", "-O2", "-g", "-fno-inline", "-J", tmp, "-o", exe,
         os.path.join(HERE, "symtest_f.f90")])
    scale = symbol(exe, "__sym_mod_MOD_scale")
    ext = symbol(exe, "ext_")
    _, ret = call_site(exe, "MAIN__", "__sym_mod_MOD_scale")
    status, got = resolve(tool, exe, [(scale, "fn"), (ext, "fn"), (ret, "call")])
    check("fortran: status", status, "ok")
    check("fortran: module procedure", [f[0] for f in got[(scale, "fn")] or []], ["sym_mod::scale"])
    check("fortran: external", [f[0] for f in got[(ext, "fn")] or []], ["ext_"])
    check("fortran: call in the main program", got[(ret, "call")],
          [("MAIN__", "symtest_f.f90", mark("symtest_f.f90", "main-calls-scale"))])


def test_version(tool, tmp):
    lib, vmap = os.path.join(tmp, "libsymtest.so"), os.path.join(tmp, "symtest.map")
    with open(vmap, "w") as f:
        f.write("V2 { global: foo; local: *; };\n")
    run(["gcc", "-O2", "-g", "-shared", "-fPIC", f"-Wl,--version-script={vmap}", "-o", lib,
         os.path.join(HERE, "symtest_version.c")])
    foo = symbol(lib, "foo@@V2")
    status, got = resolve(tool, lib, [(foo, "fn")])
    check("version: status", status, "ok")
    check("version: symbol version dropped", got[(foo, "fn")],
          [("foo", "symtest_version.c", mark("symtest_version.c", "foo-entry"))])


def test_errors(tool, tmp):
    good = f"module\t0\t{tmp}/x\t-"
    cases = [
        (["addr\t0\tzz\tcall"], "line 2: bad address 'zz'"),
        (["addr\t0\t0x12345678901234567\tcall"], "line 2: bad address '0x12345678901234567'"),
        (["addr\t9\t0x10\tcall"], "line 2: unknown module id 9"),
        (["addr\t0\t0x10\tret"], "line 2: bad kind 'ret' (want call, fn or pc)"),
        (["addr\t0\t0x10"], "line 2: addr line has 3 fields, want 4"),
        (["addr\t0\t0x10\tcall\tx"], "line 2: addr line has 5 fields, want 4"),
        (["", "module\t0\t/y\t-"], "line 3: duplicate module id 0"),
        (["module\t-1\t/y\t-"], "line 2: bad module id '-1'"),
        (["module\t1\t/y\\q\t-"], "line 2: bad escape in path '/y\\\\q'"),
        (["module\t1\t/y\tabc"], "line 2: bad build id 'abc'"),
        (["symbols\t1"], "line 2: unknown line type 'symbols' (want module or addr)"),
    ]
    for lines, message in cases:
        rc, out, err = symbolize(tool, [good] + lines)
        check(f"error {lines!r}", (rc, out, err), (2, "", f"pathscope-symbolize: {message}\n"))
    rc, out, err = symbolize(tool, [])
    check("empty input", (rc, out, err), (0, "pathscope-symbols\t2.0\nend\n", ""))


def test_lammps(tool):
    """A large stripped C++ library: every exported function's entry, the address just after
    it and a return address inside it; names must match nm -DC.  Returns the symbolizer's
    wall time in seconds (bench/symbolize.py)."""
    names = {}
    for line in run(["nm", "-D", "-C", "--defined-only", LAMMPS]).splitlines():
        a, t, n = line.split(" ", 2)
        if t in "TW":
            names.setdefault(int(a, 16), set()).add(n)
    requests = [(a, k) for a in sorted(names) for k in ("fn", "pc", "call")]
    lines = [f"module\t0\t{LAMMPS}\t{build_id(LAMMPS)}"]
    lines += [f"addr\t0\t{a + {'fn': 0, 'pc': 3, 'call': 9}[k]:#x}\t{k}" for a, k in requests]
    start = time.monotonic()
    rc, out, err = symbolize(tool, lines)
    elapsed = time.monotonic() - start
    check("lammps: exit", (rc, err), (0, ""))
    modules, frames = parse(out)
    check("lammps: status", modules[0][2], "ok")
    wrong = [(hex(a), frames.get((0, f"{a:#x}", "fn"))) for a in names
             if [f[0] for f in frames.get((0, f"{a:#x}", "fn")) or []] not in
             [[n] for n in names[a]]]
    check("lammps: fn names match nm -DC", wrong[:5], [])
    print(f"lammps: {len(requests)} addresses in {elapsed:.3f} s")
    return elapsed


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["--lammps"]):
        sys.exit(__doc__)
    tool = os.path.abspath(sys.argv[1])
    if sys.argv[2:] == ["--lammps"]:
        if not os.path.exists(LAMMPS):
            print(f"skipped: {LAMMPS} not installed")
            sys.exit(SKIPPED)
        test_lammps(tool)
        for f in failures:
            print("FAIL", f)
        sys.exit(1 if failures else 0)
    for compiler in ("gcc", "g++", "gfortran", "nm", "objdump", "objcopy", "readelf"):
        if not shutil.which(compiler):
            sys.exit(f"test_symbolize: {compiler} not found")
    with tempfile.TemporaryDirectory(prefix="psym-test-") as tmp:
        test_c(tool, tmp)
        test_cxx(tool, tmp)
        test_fortran(tool, tmp)
        test_version(tool, tmp)
        test_errors(tool, tmp)
    for f in failures:
        print("FAIL", f)
    print(f"test_symbolize: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

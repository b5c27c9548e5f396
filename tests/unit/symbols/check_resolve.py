#!/usr/bin/env python3
"""Unit test of pathscope-symbolize --resolve (runtime/symbols/resolve.c), run by ctest.

usage: check_resolve.py PATH/TO/pathscope-symbolize

Builds the resolver's test programs of this directory (restest_*.c, restest_cxx.cpp,
restest_asm.S, symtest_f.f90) with -O2 -g into a temporary directory, plus a shared library and
a stripped copy, sends SPECs and checks every output line exactly.  Addresses, sizes, files and
lines come from nm (binutils, not elfutils); the plans of compiled functions are rebuilt from
objdump's decoding (not Zydis), those of restest_asm.S from the bytes written there.
Also checks Debian's stripped liblammps.so.0 when it is installed.
Exits with SKIPPED (77, ctest's SKIP_RETURN_CODE) when the binary was built without Zydis.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIPPED = 77
LAMMPS = "/usr/lib/x86_64-linux-gnu/liblammps.so.0"
failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}:\n    got  {got!r}\n    want {want!r}")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def resolve(tool, modules, specs):
    """Runs the resolver on module paths (ids 1, 2, ...) and SPECs (ids 1, 2, ...); returns
    (exit code, stdout lines, stderr)."""
    lines = [f"module\t{i}\t{path}\t-" for i, path in enumerate(modules, 1)]
    lines += [f"spec\t{i}\t{text}" for i, text in enumerate(specs, 1)]
    p = subprocess.run([tool, "--resolve"], input="".join(line + "\n" for line in lines),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout.split("\n")[:-1], p.stderr


def nm(binary, demangle=False):
    """{name: [(address, size, file, line)]} of a binary's defined functions, from nm -S -l."""
    syms = {}
    out = run(["nm", "-S", "-l", "--defined-only"] + (["-C"] if demangle else []) + [binary])
    for line in out.splitlines():
        m = re.match(r"([0-9a-f]+) ([0-9a-f]+) [TtWw] ([^\t]+)(?:\t(.*):(\d+))?$", line)
        if m:
            syms.setdefault(m.group(3), []).append(
                (int(m.group(1), 16), int(m.group(2), 16), m.group(4) or "-", int(m.group(5) or 0)))
    return syms


def address(binary, name):
    """A symbol's address from plain nm (any type: data, ifunc, sizeless)."""
    for line in run(["nm", binary]).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise AssertionError(f"{name} not in nm {binary}")


def objdump_insns(binary, start, size):
    """[(address, bytes, text)] of the instructions of [start, start + size)."""
    out = run(["objdump", "-d", "-w", f"--start-address={start:#x}",
               f"--stop-address={start + size:#x}", binary])
    insns = []
    for line in out.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\t((?:[0-9a-f]{2} )+)\s*\t?(.*)$", line)
        if m:
            insns.append((int(m.group(1), 16), bytes.fromhex(m.group(2).replace(" ", "")), m.group(3)))
    return insns


def le32(v):
    return (v & 0xffffffff).to_bytes(4, "little").hex()


def objdump_plan(binary, start, size, plan):
    """The PLAN objdump's decoding gives for a function (kinds by opcode, targets from objdump's
    text); a RIP-relative field is taken from plan once its displacement is checked to reach
    objdump's target."""
    insns = objdump_insns(binary, start, size)
    site = 4 if insns[0][1] == bytes.fromhex("f30f1efa") else 0
    i = 1 if site else 0
    got = plan.split()
    groups, length = [], 0
    while length < 5:
        addr, code, text = insns[i]
        target = re.search(r"(?:# |\s)([0-9a-f]+) <", text)
        target = int(target.group(1), 16) if target else 0
        if "(%rip)" in text:
            j = len(groups)
            field = int(got[4 + 5 * j + 3]) if len(got) > 4 + 5 * j + 3 else -1
            disp = int.from_bytes(code[field:field + 4], "little", signed=True) if field > 0 else None
            check(f"rip field of {text!r}", addr + len(code) + (disp or 0) if disp is not None else None,
                  target)
            groups.append(f"rip {length} {len(code)} {field} {target:#x}")
        elif code[0] in (0xe8, 0xe9) or (code[0] == 0x0f and 0x80 <= code[1] <= 0x8f):
            groups.append(f"rel32 {length} {len(code)} {1 if code[0] != 0x0f else 2} {target:#x}")
        elif code[0] == 0xeb:
            groups.append(f"jmp8 {length} {len(code)} 1 {target:#x}")
        elif 0x70 <= code[0] <= 0x7f:
            groups.append(f"jcc8 {length} {len(code)} 1 {target:#x}")
        else:
            groups.append(f"copy {length} {len(code)} 0 0x0")
        length += len(code)
        i += 1
    orig = b"".join(code for _, code, _ in insns)[site:site + length].hex()
    return f"{site} {length} {orig} {len(groups)} " + " ".join(groups)


def match_line(binary, spec, module, name, sym, plan_from, demangle=False):
    """The expected match line of sym (nm's (address, size, file, line)) given the resolver's
    line, whose PLAN is checked against objdump_plan."""
    addr, size, file, line = sym
    fields = plan_from.split("\t")
    plan = fields[8] if len(fields) == 9 else ""
    return (f"match\t{spec}\t{module}\t{addr:#x}\t{size}\t{name}\t{file}\t{line}\t"
            + objdump_plan(binary, addr, size, plan))


def build(tmp):
    src = lambda name: os.path.join(HERE, name)
    lib = os.path.join(tmp, "librestest.so.1")
    run(["gcc", "-O2", "-g", "-shared", "-fPIC", "-Wl,-soname,librestest.so.1", "-o", lib,
         src("restest_lib.c")])
    exe = os.path.join(tmp, "restest")
    run(["gcc", "-O2", "-g", "-rdynamic", "-o", exe, src("restest_a.c"), src("restest_b.c"),
         src("restest_asm.S"), lib])
    stripped = os.path.join(tmp, "restest-stripped")
    run(["strip", "-o", stripped, exe])
    cxx = os.path.join(tmp, "restest-cxx")
    run(["g++", "-O2", "-g", "-o", cxx, src("restest_cxx.cpp")])
    fortran = os.path.join(tmp, "restest-f")
    run(["gfortran", "-O2", "-g", "-fno-inline", "-J", tmp, "-o", fortran, src("symtest_f.f90")])
    return exe, lib, stripped, cxx, fortran


def test_c(tool, exe, lib):
    """Static namesakes, aliases, ifunc, MODULE:SPEC, FILE:LINE and nomatch sentences."""
    syms, lsyms = nm(exe), nm(lib)
    specs = ["helper", "alias_weak", "chosen", "librestest.so:lib_work", "librestest.so.1:main",
             "libnone.so:helper", "restest_b.c:4", "restest_a.c:" + str(syms["a_entry"][0][3]),
             "restest:/^alias_/", "nope", "/a(/", "x:", "lib:x:y"]
    rc, out, err = resolve(tool, [exe, lib], specs)
    check("C: exit", (rc, err), (0, ""))
    by_spec = {}
    for line in out[:-1]:
        by_spec.setdefault(int(line.split("\t")[1]), []).append(line)
    check("C: end", out[-1:], ["end"])
    check("C: spec order", sorted(by_spec), list(by_spec))
    helpers = sorted(syms["helper"])
    check("C: two static helpers", [s[2].rsplit("/", 1)[-1] for s in helpers],
          ["restest_a.c", "restest_b.c"])
    got = by_spec.get(1, [])
    check("C: helper", got, [match_line(exe, 1, 1, "helper", s, g) for s, g in zip(helpers, got)])
    check("C: helper lines from nm are the MARK lines", [s[3] for s in helpers],
          [mark("restest_a.c", "a-helper"), mark("restest_b.c", "b-helper")])
    # the weak alias is found, named by the global symbol at its address
    alias = syms["alias_target"][0]
    check("C: alias", by_spec.get(2), [match_line(exe, 2, 1, "alias_target", alias, by_spec[2][0])])
    chosen = address(exe, "chosen")
    check("C: ifunc", by_spec.get(3),
          [f"refused\t3\t1\t{chosen:#x}\tchosen\tifunc\tan indirect function (STT_GNU_IFUNC): "
           "probe the implementation it selects by name"])
    check("C: MODULE:SPEC", by_spec.get(4),
          [match_line(lib, 4, 2, "lib_work", lsyms["lib_work"][0], by_spec[4][0])])
    check("C: MODULE:SPEC without the function", by_spec.get(5),
          [f"nomatch\t5\tno function matches 'librestest.so.1:main' in {lib}"])
    check("C: unknown module", by_spec.get(6),
          ["nomatch\t6\tno module matches 'libnone.so' among the 2 modules given"])
    check("C: FILE:LINE", by_spec.get(7),
          [match_line(exe, 7, 1, "helper", helpers[1], by_spec[7][0])])
    check("C: FILE:LINE of a declaration", by_spec.get(8),
          [match_line(exe, 8, 1, "a_entry", syms["a_entry"][0], by_spec[8][0])])
    check("C: regex (one line for the two aliases)", by_spec.get(9),
          [match_line(exe, 9, 1, "alias_target", alias, by_spec[9][0])])
    check("C: nothing", by_spec.get(10),
          [f"nomatch\t10\tno function matches 'nope' in {exe} and its 1 library"])
    check("C: bad regex", by_spec.get(11),
          ["nomatch\t11\tSPEC '/a(/' is not a valid extended regular expression"])
    check("C: empty name", by_spec.get(12), ["nomatch\t12\tSPEC 'x:' names no function"])
    check("C: two modules", by_spec.get(13), ["nomatch\t13\tSPEC 'lib:x:y' has two module prefixes"])


def mark(src, name):
    """The line number of the MARK:name comment in a source of this directory."""
    with open(os.path.join(HERE, src)) as f:
        lines = [i for i, line in enumerate(f, 1) if f"MARK:{name}" in line.split()]
    assert len(lines) == 1, f"MARK:{name} in {src}: {lines}"
    return lines[0]


def test_stripped(tool, stripped, exe):
    """Only .dynsym: exported functions are found (no DWARF: `-` and 0), statics are not."""
    entry = nm(exe)["a_entry"][0]
    rc, out, err = resolve(tool, [stripped], ["a_entry", "helper"])
    check("stripped: exit", (rc, err), (0, ""))
    want_entry = match_line(exe, 1, 1, "a_entry", (entry[0], entry[1], "-", 0), out[0])
    check("stripped", out, [
        want_entry,
        f"nomatch\t2\tno function matches 'helper' in {stripped} "
        f"({stripped} has only dynamic symbols: stripped?)",
        "end"])


def test_cxx(tool, cxx):
    syms = nm(cxx, demangle=True)
    specs = ["ns::Shape::area", "ns::Shape::area(double)", "ns::Shape::area(int) const",
             "ns::scale", "ns::scale<int>", "ns::scale<double>(double)", "/scale</", "ns::Shape"]
    rc, out, err = resolve(tool, [cxx], specs)
    check("C++: exit", (rc, err), (0, ""))
    lines = iter(out)
    want = []

    def expect(spec, name, nm_name=None):
        got = next(lines, "")
        want.append(match_line(cxx, spec, 1, name, syms[nm_name or name][0], got))
        return got
    got = [expect(1, "ns::Shape::area(int)"), expect(1, "ns::Shape::area(double)"),
           expect(1, "ns::Shape::area(int) const"), expect(2, "ns::Shape::area(double)"),
           expect(3, "ns::Shape::area(int) const"), expect(4, "int ns::scale<int>(int)"),
           expect(4, "double ns::scale<double>(double)"), expect(5, "int ns::scale<int>(int)"),
           expect(6, "double ns::scale<double>(double)"), expect(7, "int ns::scale<int>(int)"),
           expect(7, "double ns::scale<double>(double)")]
    got += list(lines)
    want += [f"nomatch\t8\tno function matches 'ns::Shape' in {cxx}", "end"]
    check("C++", got, want)


def test_fortran(tool, fortran):
    sym = nm(fortran)["__sym_mod_MOD_scale"][0]
    rc, out, err = resolve(tool, [fortran], ["sym_mod::scale"])
    check("Fortran: exit", (rc, err), (0, ""))
    check("Fortran", out, [match_line(fortran, 1, 1, "sym_mod::scale", sym, out[0]), "end"])


def test_asm(tool, exe):
    """The plans and refusals of restest_asm.S, byte for byte."""
    syms = nm(exe)
    a = {name: s[0][0] for name, s in syms.items()}
    data = address(exe, "asm_data")
    src = os.path.join(HERE, "restest_asm.S")
    with open(src) as f:
        labels = {line.split(":")[0]: n + 1 for n, line in enumerate(f)
                  if re.match(r"asm_\w+:$", line.strip())}

    def ok(spec, name, plan):
        addr, size, _, _ = syms[name][0]
        return f"match\t{spec}\t1\t{addr:#x}\t{size}\t{name}\t{src}\t{labels[name] + 1}\t{plan}"

    def refused(spec, name, key, text):
        return f"refused\t{spec}\t1\t{a[name]:#x}\t{name}\t{key}\t{text}"
    cases = [
        ("asm_rip", lambda s: ok(s, "asm_rip", f"0 7 488b05{le32(data - a['asm_rip'] - 7)} 1 "
                                 f"rip 0 7 3 {data:#x}")),
        ("asm_lea", lambda s: ok(s, "asm_lea", f"0 8 53488d1d{le32(data - a['asm_lea'] - 8)} 2 "
                                 f"copy 0 1 0 0x0 rip 1 7 3 {data:#x}")),
        ("asm_endbr", lambda s: ok(s, "asm_endbr", "4 8 554889e54883ec10 3 copy 0 1 0 0x0 "
                                   "copy 1 3 0 0x0 copy 4 4 0 0x0")),
        ("asm_jcc_out", lambda s: ok(s, "asm_jcc_out", "0 9 85ff7406b801000000 3 copy 0 2 0 0x0 "
                                     f"jcc8 2 2 1 {a['asm_jcc_out'] + 10:#x} copy 4 5 0 0x0")),
        ("asm_jcc_in", lambda s: refused(s, "asm_jcc_in", "jump-into-patch",
                                         "the jl at +7 jumps to +3, inside the 5 displaced bytes")),
        ("asm_tiny", lambda s: refused(s, "asm_tiny", "too-short",
                                       "the function has 3 bytes, fewer than the 5 a jump needs")),
        ("asm_call", lambda s: ok(s, "asm_call", f"0 5 e8{le32(a['asm_rip'] - a['asm_call'] - 5)} 1 "
                                  f"rel32 0 5 1 {a['asm_rip']:#x}")),
        ("asm_call_early", lambda s: refused(s, "asm_call_early", "returns-in-patch",
                                             "the call at +2 returns to +4, inside the displaced bytes")),
        ("asm_jrcxz", lambda s: refused(s, "asm_jrcxz", "unsupported-insn",
                                        "the jrcxz at +0 cannot be relocated")),
        ("asm_jmp8", lambda s: ok(s, "asm_jmp8", "0 5 5331c0eb01 3 copy 0 1 0 0x0 copy 1 2 0 0x0 "
                                  f"jmp8 3 2 1 {a['asm_jmp8'] + 6:#x}")),
        ("asm_ret_early", lambda s: refused(s, "asm_ret_early", "too-short",
                                            "a ret at +2 ends the code before the 5 bytes the jump needs")),
        ("asm_tail", lambda s: ok(s, "asm_tail", f"0 5 e9{le32(a['asm_rip'] - a['asm_tail'] - 5)} 1 "
                                  f"rel32 0 5 1 {a['asm_rip']:#x}")),
        ("asm_split", lambda s: refused(s, "asm_split", "jump-into-patch", "the jmp at "
                                        "asm_split.cold+2 jumps to +3, inside the 5 displaced bytes")),
    ]
    rc, out, err = resolve(tool, [exe], [name for name, _ in cases] + ["asm_nosize"])
    check("asm: exit", (rc, err), (0, ""))
    nosize = address(exe, "asm_nosize")
    want = [make(i) for i, (_, make) in enumerate(cases, 1)]
    want += [f"refused\t{len(cases) + 1}\t1\t{nosize:#x}\tasm_nosize\tno-size\t"
             "the symbol has no size, so the function's extent is unknown", "end"]
    for g, w in zip(out, want):
        check("asm", g, w)
    check("asm: line count", len(out), len(want))


def test_errors(tool, exe):
    cases = [
        (["spec\tx\tfoo"], "line 1: bad spec id 'x'"),
        (["spec\t1\tfoo", "spec\t1\tbar"], "line 2: duplicate spec id 1"),
        (["spec\t1\t"], "line 1: empty spec"),
        (["spec\t1\ta\\qb"], "line 1: bad escape in spec 'a\\\\qb'"),
        (["spec\t1"], "line 1: spec line has 2 fields, want 3"),
        (["addr\t1\t0x10\tfn"], "line 1: unknown line type 'addr' (want module or spec)"),
        ([f"module\t1\t{exe}"], "line 1: module line has 3 fields, want 4"),
    ]
    for lines, message in cases:
        p = subprocess.run([tool, "--resolve"], input="".join(line + "\n" for line in lines),
                           capture_output=True, text=True, timeout=60)
        check(f"error {lines!r}", (p.returncode, p.stdout, p.stderr),
              (2, "", f"pathscope-symbolize: {message}\n"))
    p = subprocess.run([tool, "--resolve", "x"], capture_output=True, text=True, timeout=60)
    check("usage", (p.returncode, p.stdout, p.stderr),
          (2, "", f"usage: {tool} [--resolve] < requests > output\n"))


def test_regex_limit(tool, tmp):
    src = os.path.join(tmp, "many.c")
    with open(src, "w") as f:
        for i in range(300):
            f.write(f"int many_{i}(int x) {{ return x * {i + 3} + {i}; }}\n")
    lib = os.path.join(tmp, "libmany.so")
    run(["gcc", "-O1", "-shared", "-fPIC", "-o", lib, src])
    rc, out, err = resolve(tool, [lib], ["/^many_/"])
    check("regex limit", (rc, out, err),
          (0, [f"nomatch\t1\t300 functions match '/^many_/' in {lib}, more than 256: "
               "narrow the expression", "end"], ""))


def test_lammps(tool):
    """A stripped C++ library of the field: its exported methods by MODULE:NAME (Debian's
    liblammps.so.0, when installed)."""
    name = "LAMMPS_NS::PairLJCut::compute(int, int)"
    line = next(line for line in run(["nm", "-D", "-C", "-S", "--defined-only", LAMMPS]).splitlines()
                if line.endswith(" " + name))
    addr, size = int(line.split()[0], 16), int(line.split()[1], 16)
    rc, out, err = resolve(tool, [LAMMPS], ["liblammps.so:LAMMPS_NS::PairLJCut::compute"])
    check("LAMMPS: exit", (rc, err), (0, ""))
    check("LAMMPS", out, [match_line(LAMMPS, 1, 1, name, (addr, size, "-", 0), out[0]), "end"])


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tool = sys.argv[1]
    p = subprocess.run([tool, "--resolve"], input="", capture_output=True, text=True, timeout=60)
    if p.returncode == 1 and "no Zydis" in p.stderr:
        print("SKIPPED: pathscope-symbolize was built without Zydis (libzydis-dev)")
        return SKIPPED
    check("empty input", (p.returncode, p.stdout, p.stderr), (0, "end\n", ""))
    for compiler in ("gcc", "g++", "gfortran", "nm", "objdump", "strip"):
        if not shutil.which(compiler):
            print(f"SKIPPED: {compiler} not found")
            return SKIPPED
    with tempfile.TemporaryDirectory() as tmp:
        exe, lib, stripped, cxx, fortran = build(tmp)
        test_c(tool, exe, lib)
        test_stripped(tool, stripped, exe)
        test_cxx(tool, cxx)
        test_fortran(tool, fortran)
        test_asm(tool, exe)
        test_errors(tool, exe)
        test_regex_limit(tool, tmp)
    if os.path.exists(LAMMPS):
        test_lammps(tool)
    for f in failures:
        print("FAIL " + f)
    print(f"{len(failures)} failure(s)" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""The code that runs with only the general registers saved touches nothing else.

A probed function's entry takes a fast path (runtime/probe/enter.S -> ps_probe_enter_fast) and
its return runs the exit hook (unwind/thunk.c's hooked thunk -> ps_thunk_hooked_exit ->
ps_thunks_close -> the hook, ps_probe_exit) after saving the caller-saved general registers
only: no x87, SSE, AVX or AVX-512 state is saved, so none of that code may use it, and a caller
compiled with -fipa-ra may keep live values in any vector register across the probed call.
The C is compiled with -mgeneral-regs-only (which also keeps GCC from emitting vector code),
but a call to libc (memcpy, memset: AVX versions), a sanitizer hook or a function of another
file compiled normally would undo that.  So this reads the machine code of the built library:
every function reachable from those roots by direct calls and jumps must use no x87, MMX, SSE,
AVX or mask register, and call nothing outside the library but what is listed here, with the
reason."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOTS = ["ps_probe_enter_fast", "ps_thunk_hooked_exit", "ps_probe_exit", "ps_thunks_close"]
# (ps_now without an invariant TSC: glibc's clock_gettime only calls into the vDSO, which the
# kernel builds without FPU or vector code)
EXTERNAL_OK = {"clock_gettime"}
# indirect calls: the exit hook (ps_probe_exit, a root) and nothing else
INDIRECT_OK = {"ps_thunks_close", "ps_thunk_hooked_exit"}

VECTOR = re.compile(r"%(?:[xyz]mm\d+|st(?:\(\d\))?|mm\d|k[0-7])\b")
FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
INSN = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
TARGET = re.compile(r"<([^>+]+)(?:\+0x[0-9a-f]+)?>")


def disassemble(lib):
    """{function name: [instruction text]} of the library's .text."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-M", "att", str(lib)],
                         capture_output=True, text=True, check=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            cur = funcs.setdefault(m.group(2), [])
            continue
        m = INSN.match(line)
        if m and cur is not None:
            cur.append(m.group(2).strip())
    return funcs


def reachable(funcs, roots):
    """Functions reached from roots by direct call/jmp; problems found on the way."""
    seen, todo, problems = set(), list(roots), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in funcs:
            problems.append(f"{name}: not found in the library")
            continue
        for insn in funcs[name]:
            mnemonic = insn.split()[0]
            if VECTOR.search(insn) or mnemonic.startswith(("f", "xsave", "xrstor", "vzero",
                                                           "ldmxcsr", "stmxcsr", "emms")):
                problems.append(f"{name}: {insn}")
            if not mnemonic.startswith(("call", "jmp", "j")):
                continue
            if "*" in insn:
                if mnemonic.startswith("call") and name not in INDIRECT_OK:
                    problems.append(f"{name}: indirect call {insn}")
                elif mnemonic.startswith("jmp") and name not in INDIRECT_OK:
                    # (a switch's jump table stays inside the function: allowed)
                    pass
                continue
            m = TARGET.search(insn)
            if not m:
                continue
            target = m.group(1)
            if target.endswith("@plt"):
                if target[:-4] not in EXTERNAL_OK:
                    problems.append(f"{name}: calls {target}")
            elif target != name:
                todo.append(target)
    return seen, problems


def libraries():
    libs = [ROOT / "build" / b / "libpathscope.so" for b in ("openmpi", "mpich", "asan")]
    return [lib for lib in libs if lib.exists()]


@pytest.mark.parametrize("lib", libraries(), ids=lambda p: p.parent.name)
def test_fast_entry_and_exit_use_general_registers_only(lib):
    funcs = disassemble(lib)
    seen, problems = reachable(funcs, ROOTS)
    assert not problems, "\n".join(problems)
    # the analysis looked at the code it should have: the fast path reaches the thunk stack's
    # check, the exit its bookkeeping
    assert "ps_unwind_redirect_fast" in seen and "ps_probe_enter_fast" in seen


def test_the_check_finds_vector_code():
    """The same analysis on code known to use vector registers and libc."""
    funcs = {"root": ["push   %rbp", "call   1000 <helper>", "ret"],
             "helper": ["movdqa %xmm0,(%rdi)", "call   2000 <memcpy@plt>", "ret"]}
    seen, problems = reachable(funcs, ["root"])
    assert seen == {"root", "helper"}
    assert problems == ["helper: movdqa %xmm0,(%rdi)", "helper: calls memcpy@plt"]

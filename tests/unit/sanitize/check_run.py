#!/usr/bin/env python3
"""One end-to-end run under the sanitized runtime (ctest in the PS_SANITIZE=ON build).

usage: check_run.py BUILD_DIR NP PROGRAM [ARG...]

Runs BUILD_DIR/PROGRAM on NP ranks with mpirun (PS_MPIRUN, from the environment ctest sets),
with BUILD_DIR/libpathscope.so -- built with -fsanitize=address,undefined -- preloaded behind
the compiler's libasan (AddressSanitizer must be the first library loaded), a fresh profile
directory, and passes when the program exited 0, no sanitizer reported anything, and every
rank's text (its rank file, or its section of ranks.tsv) ended "complete" and tree.tsv is whole.  Leak checking is off: the MPI libraries keep their memory to the
end.  Exit 77 (skipped) when libasan cannot be found.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from profile_files import rank_texts  # noqa: E402  (tests/: a rank file, or ranks.tsv's section)

SKIPPED = 77


def libasan(cc):
    """The path of the shared libasan the compiler links, or None."""
    p = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True)
    path = p.stdout.strip()
    return os.path.realpath(path) if p.returncode == 0 and os.path.isabs(path) else None


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    build, np, prog, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    asan = libasan(os.environ.get("PS_CC", "gcc"))
    if not asan or not os.path.exists(asan):
        print("skipped: libasan.so not found")
        sys.exit(SKIPPED)
    out = build / "sanitize-out" / prog
    shutil.rmtree(out, ignore_errors=True)
    launcher = shlex.split(os.environ["PS_MPIRUN"])
    env = {
        "LD_PRELOAD": f"{asan}:{build / 'libpathscope.so'}",
        "PATHSCOPE_OUTPUT": str(out),
        "PATHSCOPE_QUIET": "on",
        # every rank's text, in ranks.tsv: its MPI-IO writers run sanitized too
        "PATHSCOPE_PER_RANK": "all",
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=98",
    }
    if "mpich" in launcher[0]:
        launcher += [a for k, v in env.items() for a in ("-genv", k, v)]
    else:
        launcher += [a for k, v in env.items() for a in ("-x", f"{k}={v}")]
    cmd = launcher + ["-np", np, str(build / prog)] + args
    # (given to the ranks only: the launcher itself runs without the sanitizer)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    problems = []
    if p.returncode != 0:
        problems.append(f"exit status {p.returncode}")
    for pattern in (r"ERROR: AddressSanitizer", r"runtime error:", r"ERROR: LeakSanitizer"):
        if re.search(pattern, p.stdout + p.stderr):
            problems.append(f"sanitizer report ({pattern})")
    texts = rank_texts(out)
    if sorted(texts) != list(range(int(np))):
        problems.append(f"rank texts of ranks {sorted(texts)} for {np} ranks")
    for rank, text in texts.items():
        status = re.search(r"^status\t(.*)$", text, re.M)
        if not status or status.group(1) != "complete":
            problems.append(f"rank {rank}: status {status.group(1) if status else 'missing'}")
    # (every run that reaches MPI_Finalize reduces its call trees: the merge ran sanitized)
    tree = out / "tree.tsv"
    if not tree.is_file() or not tree.read_text().endswith("\nend\n"):
        problems.append("tree.tsv missing or cut short")
    if problems:
        print(" ".join(shlex.quote(c) for c in cmd))
        print(p.stdout[-5000:])
        print(p.stderr[-20000:], file=sys.stderr)
        print("FAIL: " + "; ".join(problems))
        sys.exit(1)
    print(f"{prog} on {np} ranks: clean, {len(texts)} rank texts and tree.tsv complete")


if __name__ == "__main__":
    main()

"""`pathscope probe`: add, remove and list the probes of running processes, one process
(PID) or every process of a job on this node (--job DIR), through their control sockets.

    targets = job_targets("prof")                  # or [pid_target(1234)]
    results = probe_add(targets, "solve")          # resolved once per distinct module set
    print(format_results(results, several=True))

Rules kept here:
- --add resolves the SPEC with `pathscope-symbolize --resolve` against the modules mapped in
  the process (pathscope.modules) before any process is contacted; a SPEC that matches
  nothing in any process is one ResolveError with the resolver's own `nomatch` text.
- The `probe add` request is: the line `probe add`, the module and spec lines given to the
  resolver (so the runtime knows which module each MODULE_ID names), then the resolver's
  output lines verbatim without its `end` (live-contract.md, "The probe requests").
- A job's processes are those of this user on this node whose live segment names the job's
  output directory (its real path) and whose process is still the one that wrote it.
Nothing here prints or exits.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from typing import Optional

from pathscope.control import Target, check_socket, find_target, send_request
from pathscope.errors import LiveError, SymbolizerError
from pathscope.live import (list_entries, open_private_dir, private_dir_path, process_alive,
                            read_segment)
from pathscope.modules import Module, mapped_modules
from pathscope.report.layout import table
from pathscope.symbolize import find_symbolizer
from pathscope.tsv import format_line, unescape
from pathscope.units import format_time

RESOLVE_TIMEOUT_S = 300


class ResolveError(SymbolizerError):
    """A SPEC that matches nothing (the resolver's nomatch text)."""


@dataclass(frozen=True)
class RankTarget:
    target: Target
    rank: int                 # -1: not an MPI process, or a single PID was named
    host: str = ""

    @property
    def label(self) -> str:
        pid = self.target.process.pid
        return f"rank {self.rank} (pid {pid})" if self.rank >= 0 else f"pid {pid}"


@dataclass
class RankResult:
    rank: RankTarget
    lines: list[str] = field(default_factory=list)    # the reply, or what went wrong
    failed: bool = False                              # the process could not be asked


def pid_target(pid: int) -> RankTarget:
    """Process pid, checked to exist, to be ours (or we root) and to have its socket."""
    target = find_target(pid)
    check_socket(target)
    return RankTarget(target, -1)


def job_targets(directory: str) -> list[RankTarget]:
    """The running processes of the job writing to directory, on this node, by rank."""
    if not os.path.isdir(directory):
        raise LiveError(f"no such directory {directory}")
    outdir = os.path.realpath(directory)
    uid = os.geteuid()
    none = LiveError(f"no process of job {outdir} on this node (no live segment in "
                     f"{private_dir_path(uid)} names it)")
    if not os.path.lexists(private_dir_path(uid)):
        raise none
    dir_fd = open_private_dir(uid)
    found, gone = [], 0
    try:
        for entry, process, kind in list_entries(dir_fd):
            if kind != "live":
                continue
            try:
                segment = read_segment(dir_fd, entry, uid, private_dir_path(uid))
            except LiveError:
                continue            # another job's broken or half-written file
            if segment.header.outdir != outdir:
                continue
            if not process_alive(process):
                gone += 1
                continue
            found.append(RankTarget(Target(process, uid), segment.header.rank,
                                    segment.header.host))
    finally:
        os.close(dir_fd)
    if not found and gone:
        raise LiveError(f"job {outdir}: its {gone} process(es) on this node have ended "
                        f"(pathscope top --clean removes their files)")
    if not found:
        raise none
    return sorted(found, key=lambda t: (t.rank, t.target.process.pid))


# ---- resolving ------------------------------------------------------------------------------

def resolver_input(modules: list[Module], specs: list[str]) -> list[str]:
    """The resolver's stdin lines (without newlines)."""
    lines = [format_line(["module", i, m.path, m.build_id or "-"])[:-1]
             for i, m in enumerate(modules)]
    lines += [format_line(["spec", i, spec])[:-1] for i, spec in enumerate(specs)]
    return lines


def split_specs(text: str) -> list[str]:
    """A comma-separated SPEC list, as the runtime splits PATHSCOPE_PROBE (probe/source_probe.c:
    commas inside /REGEX/, <...> and (...) belong to the SPEC)."""
    specs, depth, regex, start = [], 0, False, 0
    for i, c in enumerate(text + ","):
        if c == "/" and (i == start or regex):
            regex = not regex
        elif not regex and c in "<(":
            depth += 1
        elif not regex and c in ">)" and depth:
            depth -= 1
        if c == "," and not depth and not regex or i == len(text):
            if text[start:i]:
                specs.append(text[start:i])
            start = i + 1
    return specs


def run_resolver(modules: list[Module], spec: str) -> list[str]:
    """The resolver's output lines for the SPECs of spec (a comma-separated list) in modules,
    without the final `end`.  ResolveError when a SPEC matches nothing (no `match` or
    `refused` line for it): its nomatch text."""
    executable = find_symbolizer()
    specs = split_specs(spec)
    stdin = "".join(line + "\n" for line in resolver_input(modules, specs))
    try:
        done = subprocess.run([str(executable), "--resolve"], input=stdin, capture_output=True,
                              text=True, encoding="utf-8", errors="replace", check=False,
                              timeout=RESOLVE_TIMEOUT_S)
    except OSError as e:
        raise SymbolizerError(f"cannot run {executable}: {e.strerror}") from e
    except subprocess.TimeoutExpired:
        raise SymbolizerError(f"{executable.name} --resolve did not answer within "
                              f"{RESOLVE_TIMEOUT_S} s") from None
    said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    if done.returncode != 0:
        raise SymbolizerError(f"{executable.name} --resolve failed (exit status "
                              f"{done.returncode})" + (f": {said[-1]}" if said else ""))
    lines = done.stdout.split("\n")
    if lines[-1] != "" or len(lines) < 2 or lines[-2] != "end":
        raise SymbolizerError(f"{executable.name} --resolve: output cut short (no end line)")
    lines = lines[:-2]
    for line in lines:
        if line.startswith("nomatch\t") and line.count("\t") >= 2:
            raise ResolveError(unescape(line.split("\t")[2]))
    if not any(line.startswith(("match\t", "refused\t")) for line in lines):
        raise ResolveError(f"'{spec}': no function matches")
    return lines


def _add_requests(targets: list[RankTarget], spec: str
                  ) -> tuple[dict[RankTarget, list[str]], dict[RankTarget, str]]:
    """The request of each target whose modules have a match, and the nomatch text of the
    others; resolved once per distinct module set.  ResolveError if none matches."""
    by_set: dict[tuple[Module, ...], list[RankTarget]] = {}
    for t in targets:
        by_set.setdefault(tuple(mapped_modules(t.target.process.pid)), []).append(t)
    requests: dict[RankTarget, list[str]] = {}
    unmatched: dict[RankTarget, str] = {}
    first_error: Optional[ResolveError] = None
    for modules, members in by_set.items():
        try:
            lines = run_resolver(list(modules), spec)
        except ResolveError as e:
            first_error = first_error or e
            unmatched.update((t, str(e)) for t in members)
            continue
        request = ["probe add"] + resolver_input(list(modules), split_specs(spec)) + lines
        requests.update((t, request) for t in members)
    if not requests:
        assert first_error is not None
        raise first_error
    return requests, unmatched


# ---- asking the processes -------------------------------------------------------------------

def _ask(target: RankTarget, request: list[str]) -> RankResult:
    try:
        return RankResult(target, send_request(target.target, request))
    except LiveError as e:
        return RankResult(target, [str(e)], failed=True)


def probe_add(targets: list[RankTarget], spec: str) -> list[RankResult]:
    requests, unmatched = _add_requests(targets, spec)
    results = []
    for t in targets:
        if t in unmatched:
            results.append(RankResult(t, [unmatched[t]], failed=True))
        else:
            results.append(_ask(t, requests[t]))
    return results


def probe_remove(targets: list[RankTarget], what: str) -> list[RankResult]:
    return [_ask(t, [f"probe remove\t{what}"]) for t in targets]


def probe_list(targets: list[RankTarget]) -> list[RankResult]:
    return [_ask(t, ["probe list"]) for t in targets]


def results_ok(results: list[RankResult], action: str) -> bool:
    """True when every process was asked, none answered `error`, and (add, remove) at least
    one probe was added or removed."""
    if any(r.failed or any(line.startswith("error") for line in r.lines) for r in results):
        return False
    if action in ("added", "removed"):
        return any(line.startswith(f"ok\t{action}\t") for r in results for line in r.lines)
    return True


# ---- showing the replies --------------------------------------------------------------------

def _number(text: str) -> int:
    return int(text) if text.isascii() and text.isdigit() else 0


def format_reply_line(line: str) -> str:
    """One reply line for a person."""
    f = line.split("\t")
    if f[0] == "ok" and len(f) >= 6 and f[1] == "added":
        return f"added probe {f[2]}: {f[3]} [{os.path.basename(f[4])}] {f[5]}"
    if f[0] == "ok" and len(f) >= 4 and f[1] == "removed":
        return f"removed probe {f[2]}: {f[3]}"
    if f[0] == "refused" and len(f) >= 5:
        return f"refused '{f[1]}': {f[2]} ({f[3]}): {f[4]}"
    if line.startswith("error"):      # `error<TAB>TEXT` (a source), `error TEXT` (the server)
        return f"error: {line[6:].replace(chr(9), ' ')}"
    return line.replace("\t", " ")


def format_list(lines: list[str]) -> str:
    rows = []
    for line in lines:
        f = line.split("\t")
        if f[0] != "probe" or len(f) < 9:
            continue
        rows.append([f[1], f[2], str(_number(f[3])), format_time(_number(f[4])),
                     format_time(_number(f[5])), f[6], os.path.basename(f[7]), f[8]])
    if not rows:
        return "no probes"
    return table(["id", "state", "calls", "incl", "excl", "name", "module", "file:line"],
                 rows, "llrrrlll", indent="")


def format_results(results: list[RankResult], action: str, several: bool) -> str:
    out = []
    for r in results:
        if r.failed:
            body = r.lines
        elif action == "list":
            extra = [format_reply_line(x) for x in r.lines if not x.startswith("probe\t")]
            body = ([] if extra and len(extra) == len(r.lines) else
                    format_list(r.lines).split("\n")) + extra
        else:
            body = [format_reply_line(x) for x in r.lines] or ["(no reply lines)"]
        if several:
            out.append(f"{r.rank.label}:")
            out.extend("  " + line for line in body)
        else:
            out.extend(body)
    return "\n".join(out) + "\n"

"""Fortran wrappers, emitted by gen_wrappers.py into the build tree (ps_fortran.c).

Why: Open MPI's Fortran bindings (mpi_send_ and friends in libmpi_mpifh) call the C PMPI_
functions directly, so the C wrappers never see a Fortran program's calls.  (MPICH's bindings
call the C MPI_ functions; there the Fortran wrapper records the call and the C wrapper it
reaches passes straight through, thanks to the per-thread re-entry guard.)

What: for every procedure that has a generated C wrapper and an F90 binding in the standard,
one wrapper exported under the four usual manglings (mpi_send_, mpi_send__, mpi_send,
MPI_SEND).  It
  1. forwards the call UNCHANGED to the MPI library's Fortran profiling entry point
     (pmpi_send_, pmpi_send__, pmpi_send or PMPI_SEND, resolved once with dlsym), hidden
     CHARACTER lengths included, so every Fortran sentinel (MPI_BOTTOM, MPI_IN_PLACE,
     MPI_ARGV_NULL, MPI_ERRCODES_IGNORE, MPI_UNWEIGHTED, ...) is handled by the library itself;
  2. substitutes our own status for MPI_STATUS_IGNORE where the hook needs the status (the
     only argument ever changed, and only from "ignore" to a real buffer);
  3. on success, calls the SAME hook expression as the C wrapper (mpi_semantics.FAMILIES or the
     default family) on the arguments converted to C: handles with PMPI_*_f2c (output handles
     after the call, handles read by pre-statements before it), INTEGER / LOGICAL scalars by
     value, INTEGER arrays as int arrays, datatype arrays element-wise, statuses with
     PMPI_Status_f2c, buffers as they are (volume.c knows the Fortran MPI_IN_PLACE address).
A family whose arguments cannot be converted safely (e.g. MPI_Comm_idup, whose hook keeps a
pointer to the new communicator until the request completes) falls back to the default family
(the call and its time on the first input communicator); fortran_coverage.txt lists them.

mpi_f08: the same wrappers under the mpi_f08 symbol mpi_<name>_f08_ for the procedures whose
mpi_f08 binding passes the same arguments the same way (Open MPI 4: all such procedures of the
families, MPICH 4: those without a choice buffer); see the comment above F08_EXTRA.

The request completion family (MPI_WAIT, MPI_TESTANY, MPI_START, MPI_REQUEST_FREE ...) is
generated from mpi_semantics.COMPLETION (completion_body), on the helpers of fortran_support.c.
The Init/Finalize/Abort/Pcontrol wrappers are hand-written in fortran_support.c, as their C
twins are.  Also written: fortran_coverage.txt next to ps_fortran.c, one line per procedure
(generated / family, default family only and why, not wrapped and why, mpi_f08).
"""
import os
import re
import sys

import mpi_semantics as sem

# C handle type -> (f2c function, null handle)
HANDLES = {
    "MPI_Comm": ("PMPI_Comm_f2c", "MPI_COMM_NULL"),
    "MPI_Datatype": ("PMPI_Type_f2c", "MPI_DATATYPE_NULL"),
    "MPI_Win": ("PMPI_Win_f2c", "MPI_WIN_NULL"),
    "MPI_File": ("PMPI_File_f2c", "MPI_FILE_NULL"),
    "MPI_Request": ("PMPI_Request_f2c", "MPI_REQUEST_NULL"),
    "MPI_Message": ("PMPI_Message_f2c", "MPI_MESSAGE_NULL"),
    "MPI_Group": ("PMPI_Group_f2c", "MPI_GROUP_NULL"),
    "MPI_Info": ("PMPI_Info_f2c", "MPI_INFO_NULL"),
    "MPI_Op": ("PMPI_Op_f2c", "MPI_OP_NULL"),
    "MPI_Errhandler": ("PMPI_Errhandler_f2c", "MPI_ERRHANDLER_NULL"),
}

# Fortran scalar type -> C lvalue type of the argument's storage
F_SCALARS = {
    "INTEGER": "MPI_Fint",
    "LOGICAL": "MPI_Fint",
    "INTEGER(KIND=MPI_ADDRESS_KIND)": "MPI_Aint",
    "INTEGER(KIND=MPI_OFFSET_KIND)": "MPI_Offset",
    "INTEGER(KIND=MPI_COUNT_KIND)": "MPI_Count",
}

# Datatype arrays: which elements the volume rule reads (runtime/mpi/volume.c), so that we
# convert exactly those and never read past the end of the caller's array (e.g. the send
# types of an in-place Alltoallw may be a one-element dummy).
#   volume rule -> {parameter: (number of elements, convert only if)}
TYPE_ARRAYS = {
    "ps_vol_alltoallw": {
        "sendtypes": ("ps_peer_count(ps_c_comm)", "!ps_f_is_in_place(f_sendbuf)"),
        "recvtypes": ("ps_peer_count(ps_c_comm)", "ps_f_is_in_place(f_sendbuf)"),
    },
    "ps_vol_neighbor_w": {
        "sendtypes": ("ps_out_degree(ps_c_comm)", "1"),
    },
}

PROLOGUE = r'''#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fortran.h"
#include "mpi_internal.h"
#include "wrap.h"
'''


def manglings(cname):
    low = cname.lower()
    return [low + "_", low + "__", low, cname.upper()]


def f90_text(proc):
    try:
        text = str(proc.express.f90)
    except Exception:
        return None
    text = text.strip()
    return None if not text or text == "None" else text


_FTYPE = re.compile(r"^(INTEGER\s*\(\s*KIND\s*=\s*\w+\s*\)|INTEGER|LOGICAL|CHARACTER\S*|"
                    r"DOUBLE PRECISION|REAL|EXTERNAL|<type>|TYPE\s*\([^)]*\))\s+(.*)$", re.I)


def f90_declarations(text):
    """{lowercase name: (Fortran type, is_array)} from the F90 binding's declaration lines."""
    decls = {}
    for line in text.splitlines()[1:]:
        m = _FTYPE.match(line.strip())
        if not m:
            continue
        ftype = re.sub(r"\s+", "", m.group(1)).upper() if m.group(1).upper().startswith(
            "INTEGER") else m.group(1).upper()
        depth, cur, parts = 0, "", []
        for ch in m.group(2):
            depth += ch == "("
            depth -= ch == ")"
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        for d in parts:
            d = d.strip()
            if d:
                decls[re.sub(r"\(.*", "", d).strip().lower()] = (ftype, "(" in d)
    return decls


def function_result(text):
    """For a function (MPI_WTIME), its C result type; None for a subroutine."""
    first = text.splitlines()[0].strip()
    if re.match(r"MPI_\w+\s*\(", first, re.I):
        return None
    if first.upper().startswith("DOUBLE PRECISION"):
        return "double"
    return "?"


_TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[A-Za-z_]\w*|.", re.S)


def rename(expr, mapping):
    """Replaces identifiers (outside string and character literals) by mapping[identifier]."""
    out = []
    for tok in _TOKEN.findall(expr):
        out.append(mapping.get(tok, tok) if re.match(r"[A-Za-z_]", tok) else tok)
    return "".join(out)


def used_names(expr, names):
    toks = set(t for t in _TOKEN.findall(expr) if re.match(r"[A-Za-z_]", t))
    return [n for n in names if n in toks]


def only_dereferenced(expr, name):
    """True if every use of name in expr is as *name (the hook reads the value, keeps no
    pointer to the caller's argument)."""
    toks = [t for t in _TOKEN.findall(expr) if not t.isspace()]
    for i, t in enumerate(toks):
        if t == name and (i == 0 or toks[i - 1] != "*"):
            return False
    return True


class Unsupported(Exception):
    pass


def plain(ctype):
    return ctype.replace("const", "").replace(" ", "")


def std_param_info(std_procs, cname):
    std = std_procs.get(cname)
    return {p["name"]: p for p in std[1]} if std else {}


def default_family(cname, names, ctypes, pinfo, fnames):
    """The C generator's default family, restricted to what Fortran can give us."""
    for want, hook in (("MPI_Comm", "ps_on_comm"), ("MPI_Win", "ps_on_win"),
                       ("MPI_File", "ps_on_file")):
        for n, t in zip(names, ctypes):
            if plain(t) == want and n in fnames:
                return "", f"{hook}(OP, DT, {n})"
    if names and names[0] == "a0":  # mpi.h and the standard disagree: use the standard's kinds
        for kind, want, hook in (("COMMUNICATOR", "MPI_Comm", "ps_on_comm"),
                                 ("WINDOW", "MPI_Win", "ps_on_win"), ("FILE", "MPI_File", "ps_on_file")):
            for n, p in pinfo.items():
                if p["kind"] == kind and p["param_direction"] == "in" and not p.get("length") \
                        and n in fnames:
                    return "", f"{hook}(OP, DT, {n})"
    return "", "ps_on_none(OP, DT)"


def c_family(cname, names, ctypes):
    base = cname[:-2] if cname.endswith("_c") and cname[:-2] in sem.FAMILIES else cname
    if base in sem.FAMILIES:
        return sem.FAMILIES[base], base
    return None, "default"


def convert(cname, pre, hook, names, ctypes, pinfo, fnames, decls, ign="ps_f_status_ignore"):
    """C code (before, after-on-success, cleanup) making ps_c_<name> for each parameter the
    expressions use, plus the hook guard; raises Unsupported."""
    pre = pre.replace(sem.STATUS, "").strip()
    if "STATUS_IGNORE" in pre:
        raise Unsupported("status pre-statement not understood")
    both = pre + " " + hook
    ctype_of = dict(zip(names, ctypes))
    before, after, cleanup, guards = [], [], [], []
    for n in used_names(both, names):
        if n not in fnames:
            raise Unsupported(f"{n} has no Fortran argument")
        t = plain(ctype_of[n])
        p = pinfo.get(n, {})
        direction = p.get("param_direction", "in")
        is_array = bool(p.get("length")) or decls.get(n, ("", False))[1]
        ftype = decls.get(n, ("INTEGER", False))[0]
        f = f"f_{n}"
        if t in HANDLES and not is_array:  # input handle, by value
            f2c, _ = HANDLES[t]
            before.append(f"{t} ps_c_{n} = {f2c}(*(MPI_Fint *){f});")
        elif t.endswith("*") and t[:-1] in HANDLES and not is_array:  # handle out / inout
            if not only_dereferenced(both, n):
                raise Unsupported(f"the hook keeps a pointer to {n}")
            h = t[:-1]
            f2c, null = HANDLES[h]
            if direction in ("in", "inout"):
                before.append(f"{h} ps_v_{n} = {f2c}(*(MPI_Fint *){f});")
            else:
                before.append(f"{h} ps_v_{n} = {null};")
            before.append(f"{h} *ps_c_{n} = &ps_v_{n};")
            if direction in ("out", "inout"):
                after.append(f"ps_v_{n} = {f2c}(*(MPI_Fint *){f});")
        elif t == "MPI_Datatype*" and is_array:
            rule = next((r for r in TYPE_ARRAYS if r + "(" in hook), None)
            if not rule or n not in TYPE_ARRAYS[rule]:
                raise Unsupported(f"datatype array {n} outside a known volume rule")
            length, cond = TYPE_ARRAYS[rule][n]
            before.append(f"MPI_Datatype ps_l_{n}[PS_F_LOCAL_TYPES], *ps_c_{n} = NULL;")
            after.append(f"if ({cond}) ps_ok = ps_ok && ps_f_types({f}, {length}, ps_l_{n}, "
                         f"PS_F_LOCAL_TYPES, &ps_c_{n});")
            cleanup.append(f"if (ps_c_{n} && ps_c_{n} != ps_l_{n}) free(ps_c_{n});")
            guards.append(n)
        elif t == "MPI_Status*" and not p.get("length"):  # one status: INTEGER(MPI_STATUS_SIZE)
            # our own status for MPI_STATUS_IGNORE, so that received bytes are known
            before.append(f"MPI_Fint ps_fst_{n}[PS_F_STATUS_SIZE + 2];")
            before.append(f"if ({f} == (void *){ign}()) {f} = ps_fst_{n};")
            before.append(f"MPI_Status ps_v_{n}, *ps_c_{n} = &ps_v_{n};")
            after.append(f"PMPI_Status_f2c((MPI_Fint *){f}, &ps_v_{n});")
        elif t in ("int", "MPI_Count", "MPI_Aint", "MPI_Offset") and not is_array:
            if ftype not in F_SCALARS:
                raise Unsupported(f"{n}: Fortran {ftype} for C {t}")
            val = f"*({F_SCALARS[ftype]} *){f}"
            if ftype == "LOGICAL":
                val = f"({val} != 0)"
            before.append(f"{t} ps_c_{n} = {val};")
        elif t == "int*" and not is_array:  # scalar output (e.g. the flag of MPI_Improbe)
            if ftype not in ("INTEGER", "LOGICAL"):
                raise Unsupported(f"{n}: Fortran {ftype} for C int*")
            val = f"*(MPI_Fint *){f}" + (" != 0" if ftype == "LOGICAL" else "")
            before.append(f"int ps_v_{n} = 0, *ps_c_{n} = &ps_v_{n};")
            if direction in ("in", "inout"):
                before.append(f"ps_v_{n} = {val};")
            if direction in ("out", "inout"):
                after.append(f"ps_v_{n} = {val};")
        elif t == "int*" and is_array:  # INTEGER (or default LOGICAL) array: same storage
            if ftype not in ("INTEGER", "LOGICAL"):
                raise Unsupported(f"{n}: Fortran {ftype} array for C int array")
            before.append(f"const int *ps_c_{n} = (const int *){f};")
        elif t == "void*" and p.get("kind", "BUFFER") in ("BUFFER", "C_BUFFER"):
            before.append(f"const void *ps_c_{n} = {f};")
        else:
            raise Unsupported(f"{n}: no Fortran conversion for C {ctype_of[n]}")
    return pre, before, after, cleanup, guards


def subst(expr, cname, mapping):
    expr = re.sub(r"\bOP\b", f"PS_OP_{cname}", expr)
    expr = re.sub(r"\bDT\b", "ps_dt", expr)
    expr = re.sub(r"\bLARGE\b", "0", expr)
    return rename(expr, mapping)


def emit_wrapper(cname, fnames, chars, names, ctypes, pinfo, decls, result, f08=False):
    """Returns (C text, family description).  f08: the mpi_f08 variant (mpi_send_f08_ ->
    pmpi_send_f08_ or the library's own mpi_send_f08_; OPTIONAL IERROR)."""
    fw = f"ps_fw{'08' if f08 else ''}_{cname}"
    ign = "ps_f08_status_ignore" if f08 else "ps_f_status_ignore"
    params = []
    for n in fnames:
        params.append("MPI_Fint *f_ierror" if n == "ierror" else f"void *f_{n}")
    hidden = [f"size_t ps_len{i}" for i, n in enumerate(x for x in fnames if x in chars)]
    decl = ", ".join(params + hidden) or "void"
    argl = ", ".join([f"f_{n}" for n in fnames] + [h.split()[1] for h in hidden])
    ptypes = ", ".join(["MPI_Fint *" if n == "ierror" else "void *" for n in fnames] +
                       ["size_t"] * len(hidden)) or "void"
    ret = result or "void"
    lname = cname[4:].lower()
    out = [] if f08 else [f"typedef {ret} (*ps_ft_{cname})({ptypes});"]
    fp = f"ps_fp{'08' if f08 else ''}_{cname}"
    out.append(f"static ps_ft_{cname} {fp};")

    fam, famname = c_family(cname, names, ctypes)
    fnameset = set(fnames)
    note = f"family {famname}"
    if result:
        fam = None
    try:
        if fam is None:
            raise Unsupported("")
        pre, before, after, cleanup, guards = convert(cname, fam[0], fam[1], names, ctypes,
                                                      pinfo, fnameset, decls, ign)
        hook = fam[1]
    except Unsupported as e:
        if str(e):
            note = f"default family only ({famname}: {e})"
        else:
            note = "family default"
        pre, hook = default_family(cname, names, ctypes, pinfo, fnameset)
        pre, before, after, cleanup, guards = convert(cname, pre, hook, names, ctypes, pinfo,
                                                      fnameset, decls, ign)
    mapping = {n: f"ps_c_{n}" for n in names}
    hook_c = subst(hook, cname, mapping)
    pre_c = subst(pre, cname, mapping) if pre else ""
    has_ierr = "ierror" in fnameset
    ok = "PS_F_OK(f_ierror)" if has_ierr else "1"

    out.append(f"static {ret} {fw}({decl})")
    out.append("{")
    if f08:
        out.append(f'    PS_F08_TARGET(ps_ft_{cname}, {fp}, "{lname}")')
        if "ierror" in fnames:
            # IERROR is OPTIONAL in mpi_f08: give the library one so that we know the outcome
            out.append("    MPI_Fint ps_ierr_local = MPI_SUCCESS;")
            out.append("    if (!f_ierror) f_ierror = &ps_ierr_local;")
    else:
        out.append(f'    PS_F_TARGET(ps_ft_{cname}, {fp}, "{lname}")')
    if result:
        out.append(f"    if (!ps_wrap_enter()) return fn({argl});")
    else:
        out.append(f"    if (!ps_wrap_enter()) {{ fn({argl}); return; }}")
    out += ["    " + b for b in before]
    if pre_c:
        out.append(f"    {pre_c}")
    out.append("    uint64_t ps_t0 = ps_now();")
    out.append(f"    {'double ps_r = ' if result else ''}fn({argl});")
    out.append("    uint64_t ps_dt = ps_now() - ps_t0;")
    if after or guards:
        out.append(f"    if ({ok}) {{")
        if guards:
            out.append("        int ps_ok = 1;")
        out += ["        " + a for a in after]
        if guards:
            _, dhook = default_family(cname, names, ctypes, pinfo, fnameset)
            out.append(f"        if (ps_ok) {hook_c};")
            out.append(f"        else {subst(dhook, cname, mapping)};")
        else:
            out.append(f"        {hook_c};")
        out.append("    } else {")
        out.append(f"        ps_on_none(PS_OP_{cname}, ps_dt);")
        out.append("    }")
    elif has_ierr:
        out.append(f"    if ({ok}) {hook_c};")
        out.append(f"    else ps_on_none(PS_OP_{cname}, ps_dt);")
    else:
        out.append(f"    {hook_c};")
    out += ["    " + c for c in cleanup]
    out.append("    ps_wrap_leave();")
    if result:
        out.append("    return ps_r;")
    out.append("}")
    syms = [f"mpi_{lname}_f08_"] if f08 else manglings(cname)
    for i, sym in enumerate(syms):
        out.append(f'extern {ret} {fw}_{i}({decl}) __asm__("{sym}")')
        out.append(f'    __attribute__((alias("{fw}"), visibility("default")));')
    return "\n".join(out), note


# ---------------------------------------------------------------------------------------------
# the request completion family (mpi_semantics.COMPLETION)
# ---------------------------------------------------------------------------------------------
def completion_body(cname, fnames):
    """C text of ps_fb_<cname>(fn, f08, Fortran arguments...): the wrapper of one operation of
    mpi_semantics.COMPLETION, behind both entry points (completion_entries).  It converts the
    requests before the call, substitutes our statuses for MPI_STATUS(ES)_IGNORE, times the
    call (sampled for a poll), then hands what completed to the helpers of fortran_support.c
    (fortran.h), which call the bookkeeping of completion.c."""
    kind, shape, params = sem.COMPLETION[cname]
    if list(fnames) != list(params) + ["ierror"]:
        raise SystemExit(f"gen_fortran: {cname}: the standard's Fortran parameters {fnames} "
                         f"are not mpi_semantics.COMPLETION's {list(params)} + ierror")
    args = ", ".join(f"f_{n}" for n in fnames)
    decl = ", ".join(f"MPI_Fint *f_{n}" for n in fnames)
    op = f"PS_OP_{cname}"
    ok = "PS_F_OK(f_ierror)"
    out = [f"typedef void (*ps_ft_{cname})({', '.join(['MPI_Fint *'] * len(fnames))});",
           f"static void ps_fb_{cname}(ps_ft_{cname} fn, int f08, {decl})", "{",
           f"    if (!ps_wrap_enter()) {{ fn({args}); return; }}"]
    if shape == "one":
        before, n = "ps_before", "1"
        out.append("    MPI_Request ps_before = PMPI_Request_f2c(*f_request);")
        first = "&ps_before"
    else:
        before, n = "ps_b.before", "ps_n"
        statuses = "&f_array_of_statuses" if "array_of_statuses" in params else "NULL"
        out += ["    ps_f_batch_t ps_b;",
                f"    int ps_n = *f_{params[0]};",
                f"    if (ps_f_batch_open(&ps_b, ps_n, f_array_of_requests, {statuses}, f08)) {{",
                "        ps_wrap_leave();",
                "        atomic_fetch_add(&ps_counters.alloc_failures, 1);",
                f"        fn({args});",
                "        return;",
                "    }"]
        first = "ps_b.before"
    if "status" in params:  # ours for MPI_STATUS_IGNORE: received bytes are in the status
        out += ["    MPI_Fint ps_st[PS_F_STATUS_SIZE + 2];",
                "    if (f_status == ps_f_ign(f08)) f_status = ps_st;"]
    out.append(f"    int ps_comm = ps_first_comm({first}, {n});")
    if kind == "test":
        out += ["    int ps_timed = ps_poll_timed(); /* a poll: sampled timing (wrap.h) */",
                "    uint64_t ps_t0 = ps_timed ? ps_now() : 0;",
                f"    fn({args});",
                "    uint64_t ps_dt = ps_timed ? ps_poll_estimate(ps_t0, ps_now()) : 0;"]
    else:
        out += ["    uint64_t ps_t0 = ps_now();",
                f"    fn({args});",
                "    uint64_t ps_dt = ps_now() - ps_t0;"]
    done = f"{ok} && *f_flag" if "flag" in params else ok
    in_status = f"!{ok} && *f_ierror == MPI_ERR_IN_STATUS"
    record = f"    ps_record(ps_comm, {op}, ps_dt, 0, 0);"
    if kind in ("start", "free"):
        out.append(record)
        call = (f"ps_req_started({{}}, {op})" if kind == "start" else "ps_req_freed({})")
        if shape == "one":
            out.append(f"    if ({ok}) {call.format(before)};")
        else:
            out.append(f"    if ({ok})")
            out.append(f"        for (int ps_i = 0; ps_i < ps_n; ps_i++) "
                       f"{call.format(before + '[ps_i]')};")
    else:
        if shape == "one":
            out += [f"    if (!{ok}) ps_f_complete_failed({before}, f_request);",
                    "    else if (*f_flag) ps_f_complete(ps_before, f_status);" if "flag" in params
                    else "    else ps_f_complete(ps_before, f_status);"]
        elif shape == "all":
            out += [f"    if ({done}) ps_f_complete_all({before}, {n}, f_array_of_statuses);",
                    f"    else if ({in_status})",
                    f"        ps_f_complete_in_status({before}, {n}, f_array_of_statuses, NULL, "
                    f"0, {n});"]
        elif shape == "any":  # after an error, the index names the request that failed
            cond = f"!{ok} || *f_flag" if "flag" in params else None
            call = (f"ps_f_complete_index({before}, {n}, f_index, f_status, ps_f_index_base(f08), "
                    f"f_array_of_requests, {ok});")
            out.append(f"    if ({cond}) {call}" if cond else f"    {call}")
        elif shape == "some":
            out += [f"    if ({done} && *f_outcount != MPI_UNDEFINED)",
                    f"        ps_f_complete_some({before}, {n}, f_array_of_indices, "
                    f"ps_f_index_base(f08), *f_outcount, f_array_of_statuses);",
                    f"    else if ({in_status} && *f_outcount != MPI_UNDEFINED)",
                    f"        ps_f_complete_in_status({before}, {n}, f_array_of_statuses, "
                    f"f_array_of_indices, ps_f_index_base(f08), *f_outcount);"]
        else:
            raise SystemExit(f"gen_fortran: {cname}: unknown completion shape {shape}")
        out.append(record)
    if shape != "one":
        out.append("    ps_f_batch_close(&ps_b);")
    out += ["    ps_wrap_leave();", "}"]
    return "\n".join(out)


def completion_entries(cname, fnames, f08):
    """The exported entry points of ps_fb_<cname>: the four manglings (F90, mpif.h), or the
    mpi_f08 one (IERROR OPTIONAL: we pass one of ours when it is absent, to learn the
    outcome)."""
    lname = cname[4:].lower()
    fw = f"ps_fw{'08' if f08 else ''}_{cname}"
    fp = f"ps_fp{'08' if f08 else ''}_{cname}"
    decl = ", ".join(f"MPI_Fint *f_{n}" for n in fnames)
    args = ", ".join(f"f_{n}" for n in fnames)
    out = [f"static ps_ft_{cname} {fp};", f"static void {fw}({decl})", "{"]
    if f08:
        out += [f'    PS_F08_TARGET(ps_ft_{cname}, {fp}, "{lname}")',
                "    MPI_Fint ps_ierr_local = MPI_SUCCESS;",
                "    if (!f_ierror) f_ierror = &ps_ierr_local;"]
    else:
        out.append(f'    PS_F_TARGET(ps_ft_{cname}, {fp}, "{lname}")')
    out += [f"    ps_fb_{cname}(fn, {1 if f08 else 0}, {args});", "}"]
    syms = [f"mpi_{lname}_f08_"] if f08 else manglings(cname)
    for i, sym in enumerate(syms):
        out.append(f'extern void {fw}_{i}({decl}) __asm__("{sym}")')
        out.append(f'    __attribute__((alias("{fw}"), visibility("default")));')
    return "\n".join(out)


# mpi_f08.  Open MPI 4: every mpi_f08 procedure (mpi_send_f08_ ...) calls the C PMPI_
# functions directly, like its mpif.h ones; its profiling twin is pmpi_send_f08_.  MPICH 4: the
# procedures with a choice buffer are mpi_send_f08ts_ ... and call the C MPI_ functions (the C
# wrappers see them), the others (mpi_comm_split_f08_, mpi_wait_f08_, mpi_init_f08_ ...) call
# the C PMPI_ functions directly and have no profiling twin: we forward to the library's own
# symbol (dlsym RTLD_NEXT).  Both pass TYPE(MPI_Comm) etc. as the address of their one INTEGER
# and TYPE(MPI_Status) with the layout of the INTEGER status array, so the F90 conversions apply;
# Open MPI 4 passes mpi_f08 choice buffers as plain addresses (ignore-TKR, "mpi_f08 subarrays:
# no"), so MPI_IN_PLACE is recognised as in F90.  IERROR is OPTIONAL.
# Wrapped: every procedure with a family in mpi_semantics.FAMILIES plus F08_EXTRA, provided its
# mpi_f08 binding has the F90 binding's parameters and only INTEGER / LOGICAL / handle /
# status / choice-buffer arguments (no CHARACTER: hidden lengths may differ from the F90
# binding; no PROCEDURE, TYPE(C_PTR) or assumed-shape arrays).  Other mpi_f08 procedures are
# not seen under Open MPI and under MPICH unless they have a choice buffer.
F08_EXTRA = {"MPI_Comm_rank", "MPI_Comm_size", "MPI_Get_count", "MPI_Probe", "MPI_Iprobe",
             "MPI_Cancel", "MPI_Type_commit", "MPI_Type_free", "MPI_Type_size",
             "MPI_Wtime", "MPI_Wtick"}


def f08_problem(proc, fnames):
    """(None if the mpi_f08 binding can be wrapped like the F90 one, else why not; whether it
    has a choice buffer)."""
    try:
        text = str(proc.express.f08).strip()
    except Exception:
        return "no mpi_f08 binding", False
    lines = text.splitlines()
    if lines and re.match(r"DOUBLE PRECISION\s+MPI_\w+\s*\(\s*\)\s*$", lines[0], re.I):
        return (None, False) if not fnames else ("mpi_f08 parameters differ from F90", False)
    m = re.match(r"\s*MPI_\w+\s*\((.*)\)\s*$", lines[0]) if lines else None
    if not m:
        return "mpi_f08 function", False
    names = [n.strip().lower() for n in m.group(1).split(",") if n.strip()]
    if names != list(fnames):
        return "mpi_f08 parameters differ from F90", False
    for line in lines[1:]:
        t = line.split("::")[0].strip().upper()
        if t.startswith(("CHARACTER", "PROCEDURE", "USE", "TYPE(C_PTR)")) or "(:" in line:
            return f"mpi_f08 argument {t.split(',')[0]}", False
    return None, "TYPE(*)" in text


def emit(path, procs, std_procs, stamp, completion=()):
    """procs: [(C name, (F90 parameter names, CHARACTER parameters), the C wrapper's parameter
    names, their C types)] for every generated C wrapper with an F90 binding; completion:
    [(C name, (F90 parameter names, CHARACTER parameters))] for the operations of
    mpi_semantics.COMPLETION that mpi.h declares."""
    bodies, coverage, f08_bodies, f08_buffer, f08_names = [], [], [], [], []
    n_full = n_default = 0
    for cname, (fnames, chars), names, ctypes in procs:
        std = std_procs.get(cname)
        text = f90_text(std[0]) if std else None
        if not text:
            coverage.append(f"{cname}\tnot-wrapped\tno Fortran binding in the standard")
            continue
        result = function_result(text)
        if result == "?":
            coverage.append(f"{cname}\tnot-wrapped\tFortran function with a non-DOUBLE result")
            continue
        if result:
            fnames, chars = [], set()
        decls = f90_declarations(text)
        pinfo = std_param_info(std_procs, cname)
        body, note = emit_wrapper(cname, fnames, chars, names, ctypes, pinfo, decls, result)
        bodies.append(body)
        coverage.append(f"{cname}\tgenerated\t{note}")
        if cname in sem.FAMILIES or cname in F08_EXTRA:
            why, buffer = f08_problem(std[0], fnames)
            if why:
                coverage.append(f"{cname}\tf08-not-wrapped\t{why}")
            else:
                (f08_buffer if buffer else f08_bodies).append(
                    emit_wrapper(cname, fnames, chars, names, ctypes, pinfo, decls, result,
                                 f08=True)[0])
                f08_names.append((cname, buffer))
        if note.startswith("default family only"):
            n_default += 1
        else:
            n_full += 1
    completion_bodies, completion_f08 = [], []
    for cname, (fnames, _) in completion:
        kind, shape, _ = sem.COMPLETION[cname]
        completion_bodies.append(completion_body(cname, fnames) + "\n" +
                                 completion_entries(cname, fnames, f08=False))
        completion_f08.append(completion_entries(cname, fnames, f08=True))
        coverage.append(f"{cname}\tgenerated\tcompletion {kind}, {shape}")
        f08_names.append((cname, False))
    for name in sorted(sem.LIFECYCLE):
        coverage.append(f"{name}\thand-written\truntime/mpi/fortran_support.c")
    with open(path, "w") as f:
        f.write(stamp + PROLOGUE + "\n")
        f.write("\n\n".join(bodies) + "\n")
        f.write("\n/* ---- the request completion family (mpi_semantics.COMPLETION) ---- */\n")
        f.write("\n\n".join(completion_bodies) + "\n")
        f.write("\n/* ---- mpi_f08: procedures without a choice buffer (Open MPI 4, MPICH 4) ---- */\n")
        f.write("#if defined(PS_F08_OMPI) || defined(PS_F08_MPICH)\n")
        f.write("\n\n".join(f08_bodies + completion_f08) + "\n")
        f.write("\n/* ---- mpi_f08: procedures with a choice buffer (Open MPI 4; MPICH's\n"
                " * mpi_<name>_f08ts_ call the C MPI_ functions, which the C wrappers see) ---- */\n")
        f.write("#ifdef PS_F08_OMPI\n")
        f.write("\n\n".join(f08_buffer) + "\n#endif\n#endif\n")
    coverage += [f"{n}\tf08-generated\tmpi_{n[4:].lower()}_f08_ "
                 f"({'Open MPI 4' if b else 'Open MPI 4, MPICH 4'})" for n, b in f08_names]
    cov = os.path.join(os.path.dirname(path), "fortran_coverage.txt")
    with open(cov, "w") as f:
        f.write("# Fortran wrappers (4 manglings each)\n# operation\tstatus\tfamily\n")
        f.write("\n".join(coverage) + "\n")
    print(f"pathscope: {n_full + n_default} Fortran wrappers generated "
          f"({n_default} with the default family only), "
          f"{len(completion)} of the completion family, {len(sem.LIFECYCLE)} hand-written, "
          f"{len(f08_names)} mpi_f08",
          file=sys.stderr)

"""The `pathscope` command line: run, report, export, diff, sql, symbolize, probe, top.

This is the only module that prints errors or chooses an exit status: every PathscopeError
becomes one line `pathscope: <message>` on stderr and exit status 2; usage errors are one line
`pathscope <command>: <message> (try 'pathscope <command> --help')`, also status 2: an
unknown flag, a flag given twice (under any of its spellings), an empty value.  A value an
option does not accept is the runtime's message (`pathscope: invalid value ... for
PATHSCOPE_...`), whether it came from a flag or the environment.  Nothing is created before
the whole command line is checked (pathscope.launch.plan_launch).
`export` of a partial profile (missing, incomplete, unreadable ranks, stray files) is refused
with exit status 3 (EXIT_PARTIAL) unless --allow-partial; `report` shows what is missing.
The `run` flags come from the option table (runtime/core/options.def), so a new option there
gets its flag and its help text without a change here; the other commands do not read it.
Notes about a profile (e.g. symbols that could not be resolved) go to stderr as
`pathscope: note: <message>` and do not change the exit status.
"""
from __future__ import annotations

import argparse
import io
import math
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn, Optional, Sequence, TextIO

from pathscope import __version__
from pathscope.errors import OutputError, PartialProfileError, PathscopeError
from pathscope.home import MPI_FLAVOURS
from pathscope.options import Option, load_options
from pathscope.report.layout import table

if TYPE_CHECKING:
    from pathscope.reader import Profile

EXIT_USAGE = 2
EXIT_ERROR = 2
EXIT_PARTIAL = 3              # export refused: the profile is partial (see --allow-partial)
EXIT_REGRESSION = 4           # diff --fail-above: NEW is slower than BASE by more than PCT
# options.def fields the CLI sets itself instead of offering a flag
RUN_SETS_ITSELF = ("command", "pid")
SHORT_FLAGS = {"output": "-o"}
# options whose long flag is not --<field>, and its metavar
LONG_FLAGS = {"live": ("--live-interval", "MS")}
# one list each, in pathscope.export: the formats, the tables (export/tables.py) and the
# call-path metrics (pathscope.metrics)
from pathscope import export as _export  # noqa: E402
from pathscope.export import (CALL_PATH_METRICS, DEFAULT_FORMAT, DEFAULT_METRIC,  # noqa: E402
                              DEFAULT_TABLE)
TABLE_FORMATS = tuple(_export.FORMATS)
CALL_PATH_FORMATS = tuple(_export.CALL_PATH_FORMATS)
FILE_FORMATS = tuple(_export.FILE_FORMATS)
EXPORT_FORMATS = TABLE_FORMATS + CALL_PATH_FORMATS + FILE_FORMATS
EXPORT_TABLES = tuple(_export.TABLES)


class UsageError(Exception):
    """A command line that does not parse; carries the parser's prog for the message."""

    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and raises instead of exiting, and every flag
    may be given once, with a non-empty value (add_argument installs _Once actions)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if args and args[0].startswith("-") and kwargs.get("action") not in ("help", "version"):
            action = kwargs.pop("action", "store")
            kwargs["action"] = _OnceConst if action in ("store_const", "store_true") else _Once
            if action == "store_true":
                kwargs.update(const=True, default=False)
        return super().add_argument(*args, **kwargs)


def _flags(action: argparse.Action) -> str:
    return "/".join(action.option_strings)


class _Once(argparse.Action):
    """Stores a flag's value; a usage error when the flag was given before (under any of its
    names) or its value is empty.  nargs "?" with const: the flag alone means const."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        _mark_seen(parser, namespace, self)
        if values is None:
            values = self.const
        if isinstance(values, str) and not values.strip():
            parser.error(f"{_flags(self)}: empty value")
        setattr(namespace, self.dest, values)


class _OnceConst(argparse.Action):
    """store_const / store_true, once."""

    def __init__(self, option_strings: Sequence[str], dest: str, const: Any = None,
                 default: Any = None, help: Optional[str] = None, **_: Any):
        super().__init__(option_strings, dest, nargs=0, const=const, default=default,
                         help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        _mark_seen(parser, namespace, self)
        setattr(namespace, self.dest, self.const)


def _mark_seen(parser: argparse.ArgumentParser, namespace: argparse.Namespace,
               action: argparse.Action) -> None:
    seen = getattr(namespace, "_flags_seen", None)
    if seen is None:
        seen = set()
        setattr(namespace, "_flags_seen", seen)
    if action.dest in seen:
        parser.error(f"{_flags(action)} given twice")
    seen.add(action.dest)


def _count(text: str) -> int:
    """--rank and --thread: digits only (not `+1`, ` 1`, `1_0`)."""
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise ValueError(text)
    return int(text)


_count.__name__ = "non-negative integer"     # argparse names the type in its message


def _percent(text: str) -> float:
    """diff --fail-above and --floor: a finite number >= 0 (no nan, inf or sign)."""
    value = float(text)
    if not math.isfinite(value) or value < 0 or text.strip()[:1] in "+-":
        raise ValueError(text)
    return value


_percent.__name__ = "percentage"


# ---- run ---------------------------------------------------------------------------------------

# enum options whose flag may stand alone, and the value it then sets
BARE_FLAG_VALUE = {"kernel": "auto"}


def _flag_for(option: Option) -> tuple[list[str], dict[str, Any]]:
    """The argparse flag(s) and keyword arguments that set option."""
    dash = option.field.replace("_", "-")
    dest = f"option_{option.field}"
    if option.kind == "bool":
        value = "off" if option.default == "on" else "on"
        flag = f"--no-{dash}" if value == "off" else f"--{dash}"
        return [flag], dict(dest=dest, action="store_const", const=value,
                            help=f"{option.env}={value} (default {option.default}: {option.doc})")
    names = [LONG_FLAGS[option.field][0] if option.field in LONG_FLAGS else f"--{dash}"]
    if option.field in SHORT_FLAGS:
        names.insert(0, SHORT_FLAGS[option.field])
    kwargs: dict[str, Any] = dict(dest=dest, help=f"{option.env}: {option.doc}")
    if option.kind == "enum":
        kwargs["choices"] = option.accepted_values
        if option.field in BARE_FLAG_VALUE:   # `--kernel` alone means --kernel auto
            kwargs.update(nargs="?", const=BARE_FLAG_VALUE[option.field])
    elif option.field in LONG_FLAGS:
        kwargs["metavar"] = LONG_FLAGS[option.field][1]
    else:
        kwargs["metavar"] = "DIR" if option.field == "output" else "VALUE"
    return names, kwargs


def options_help(options: Sequence[Option]) -> str:
    """The environment-variable list of `pathscope run --help` (one table: options.def)."""
    lines = ["environment form (without the CLI): LD_PRELOAD=<build>/libpathscope.so (build/<mpi>/",
             "of a checkout, lib/pathscope/<mpi>/ of an installed prefix) and these variables;",
             "any other PATHSCOPE_* variable is an error:"]
    for o in options:
        default = o.default if o.default else "none"
        accepted = f"<{o.accepted}>" if o.kind == "path" else o.accepted
        lines.append(f"  {o.env}={accepted} (default: {default})")
        lines.append(f"      {o.doc}")
    lines.append("CLI only (removed from the program's environment): PATHSCOPE_LIB=<path> "
                 "preloads that library instead of <build>/libpathscope.so")
    return "\n".join(lines)


def _run_parser(sub: "argparse._SubParsersAction[_Parser]",
                options: Optional[Sequence[Option]]) -> argparse.ArgumentParser:
    """options None: without the option flags (only `run` itself needs them)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "run", help="run one rank of an MPI program under pathscope",
        usage="pathscope run [options] -- PROGRAM [ARGS...]",
        description="Run PROGRAM (one rank; put pathscope run after mpirun/mpiexec/srun) with "
                    "the pathscope runtime preloaded.  Everything is checked before the program "
                    "starts; then pathscope replaces itself with the program.",
        epilog=options_help(options) if options is not None else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mpi", choices=("auto",) + MPI_FLAVOURS, default="auto",
                        dest="library_mpi",
                        help="which runtime build to preload: <build>/libpathscope.so "
                             "(default auto: from the launcher's environment, else ldd PROGRAM)")
    for option in options or ():
        if option.field in RUN_SETS_ITSELF:
            continue
        names, kwargs = _flag_for(option)
        parser.add_argument(*names, **kwargs)
    return parser


def _split_program(argv: Sequence[str]) -> tuple[list[str], Optional[list[str]]]:
    """run's own arguments and the program's (after the first `--`; None if there is none)."""
    if "--" in argv:
        i = list(argv).index("--")
        return list(argv[:i]), list(argv[i + 1:])
    return list(argv), None


def _command_run(parser: argparse.ArgumentParser, argv: Sequence[str],
                 options: Sequence[Option]) -> int:
    from pathscope import launch

    own, program = _split_program(argv)
    args, extra = parser.parse_known_args(own)
    if extra:
        unknown = [a for a in extra if a.startswith("-")]
        if unknown or program is not None:
            parser.error(f"unrecognized arguments: {' '.join(unknown or extra)}")
        parser.error(f"missing '--' before the program (usage: {parser.usage})")
    if program is None:
        parser.error(f"missing '-- PROGRAM' (usage: {parser.usage})")
    if not program:
        parser.error(f"no program after '--' (usage: {parser.usage})")
    settings = {}
    output = None
    for option in options:
        value = getattr(args, f"option_{option.field}", None)
        if value is None:
            continue
        if option.field == "output":
            output = value
        else:
            settings[option.env] = value
    plan = launch.plan_launch(program, options, os.environ, output, args.library_mpi, settings)
    launch.execute(plan)
    return 0  # not reached: execute() replaces this process or raises


# ---- report, export, symbolize -----------------------------------------------------------------

def _print_notes(notes: Sequence[str]) -> None:
    for note in notes:
        print(f"pathscope: note: {note}", file=sys.stderr)


def _directory(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    if not args.directory.strip():
        parser.error("DIR: empty value")
    return str(args.directory)


def _command_report(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pathscope.reader import load_profile
    from pathscope.report import render

    if args.html or args.output is not None:
        return _report_html(parser, args)
    text = render(load_profile(_directory(parser, args)), "text", call_sites=args.call_sites)
    if sys.stdout.isatty():       # colours on a terminal; a pipe or a file gets plain text
        from pathscope.report.terminal import show
        show(text, sys.stdout)
    else:
        sys.stdout.write(text)
    return 0


def _report_html(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """report --html -o FILE: the page is built whole (plotly.js checked first) before FILE
    is opened, so a failure leaves no partial file."""
    from pathscope.frames import open as open_frames
    from pathscope.report.html import load_plotly, render_html

    if not args.html:
        parser.error("-o/--output applies to --html")
    if args.output is None:
        parser.error("--html needs -o FILE")
    directory = _directory(parser, args)
    plotly = load_plotly()
    frames = open_frames(directory)
    _print_notes(frames.symbols.notes)
    _write_page(args.output, render_html(frames, plotly, call_sites=args.call_sites))
    return 0


def _write_page(path: str, page: str) -> None:
    """A page built whole, written to path ('-': stdout; a failure to open it leaves no
    file)."""
    if path == "-":
        sys.stdout.write(page)
        return
    out = _open_output(path)
    try:
        with out:
            out.write(page)
    except OSError as e:
        raise OutputError(f"cannot write '{path}': {e.strerror}") from e


def _check_partial(profile: "Profile", allow: bool) -> None:
    """PartialProfileError (exit 3) for a partial profile unless allow; with allow a warning
    line on stderr."""
    problems = profile.problems()
    if not problems:
        return
    what = f"incomplete profile {profile.path}: {'; '.join(problems)}"
    if not allow:
        raise PartialProfileError(f"{what}; nothing exported (pathscope report shows the "
                                  f"details; --allow-partial exports what there is)")
    print(f"pathscope: warning: {what}; exported what there is", file=sys.stderr)


def _open_output(path: str) -> TextIO:
    try:
        return open(path, "w", encoding="utf-8", newline="")
    except OSError as e:
        raise OutputError(f"cannot write '{path}': {e.strerror}") from e


def _check_export_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Flags that do not apply to the chosen format are usage errors, not silently ignored."""
    if args.format in FILE_FORMATS:
        for flag, value in (("--table", args.table), ("--metric", args.metric),
                            ("--rank", args.rank), ("--thread", args.thread)):
            if value is not None:
                parser.error(f"{flag} does not apply to --format {args.format} (it holds "
                             f"every {'metric' if args.format == 'pprof' else 'table'})")
        if args.output is None or args.output == "-":
            parser.error(f"--format {args.format} needs -o "
                         f"{'FILE' if args.format == 'pprof' else 'DIR'}"
                         f"{'' if args.output is None else ' (it cannot go to stdout)'}")
        return
    if args.format in CALL_PATH_FORMATS:
        if args.table is not None:
            parser.error(f"--table applies to --format {' or '.join(TABLE_FORMATS)}, "
                         f"not {args.format}")
        return
    for flag, value in (("--metric", args.metric), ("--rank", args.rank),
                        ("--thread", args.thread)):
        if value is not None:
            parser.error(f"{flag} applies to --format {' or '.join(CALL_PATH_FORMATS)}, "
                         f"not {args.format}")


def _command_export(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pathscope.export import export, export_call_paths
    from pathscope.reader import load_profile

    _check_export_flags(parser, args)
    profile = load_profile(_directory(parser, args))
    _check_partial(profile, args.allow_partial)
    if args.format in FILE_FORMATS:
        from pathscope.export import export_file
        from pathscope.frames import ProfileFrames

        frames = ProfileFrames(profile)
        _print_notes(frames.symbols.notes if frames.tree is not None else [])
        export_file(frames, args.format, args.output)
        return 0
    if args.format in CALL_PATH_FORMATS:
        from pathscope.calltree import check_selection
        from pathscope.symbolize import resolve_symbols

        from pathscope.export.stacks import check_metric

        ranks = check_selection(profile, args.rank, args.thread)
        check_metric(profile, args.metric or DEFAULT_METRIC, ranks)
        symbols = resolve_symbols(profile)
        _print_notes(symbols.notes)
        text = io.StringIO()        # complete before anything is written (no partial file)
        export_call_paths(profile, args.format, text, symbols, args.metric or DEFAULT_METRIC,
                          args.rank, args.thread)

        def write(out: TextIO) -> None:
            out.write(text.getvalue())
    else:
        def write(out: TextIO) -> None:
            export(profile, args.table or DEFAULT_TABLE, args.format, out)
    if args.output is None or args.output == "-":
        write(sys.stdout)
        return 0
    out = _open_output(args.output)
    try:
        with out:
            write(out)
    except OSError as e:
        raise OutputError(f"cannot write '{args.output}': {e.strerror}") from e
    return 0


def _command_sql(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pathscope.sql import print_table, query, write_csv

    for directory in args.directories:
        if not directory.strip():
            parser.error("DIR: empty value")
    if not args.query.strip():
        parser.error("QUERY: empty value")
    columns, rows = query(args.directories, args.query,
                          lambda message: print(f"pathscope: warning: {message}",
                                                file=sys.stderr))
    if columns:
        (write_csv if args.csv else print_table)(columns, rows, sys.stdout)
    return 0


def _command_diff(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import pathscope
    from pathscope import diff

    if not args.base.strip() or not args.new.strip():
        parser.error("BASE and NEW: empty value")
    plotly = _check_diff_html(parser, args)
    d = diff.diff(pathscope.open(args.base, runtime_threads=False),
                  pathscope.open(args.new, runtime_threads=False))
    found = (diff.regressions(d, args.fail_above, args.floor)
             if args.fail_above is not None else None)
    if args.format == "csv":
        diff.write_csv(d, sys.stdout)
    elif args.format == "json":
        diff.write_json(d, sys.stdout, found)
    elif args.format == "html":
        from pathscope.report.html_diff import render_diff_html
        _write_page(args.output, render_diff_html(d, plotly, found, args.fail_above, args.floor))
    else:
        diff.write_table(d, sys.stdout, diff.DEFAULT_TOP if args.top is None else args.top)
    if found is None:
        return 0
    for line in found:
        print(f"pathscope: regression: {line}", file=sys.stderr)
    if found:
        print(f"pathscope: {len(found)} regression(s) above {args.fail_above:g}% "
              f"(exit status {EXIT_REGRESSION})", file=sys.stderr)
        return EXIT_REGRESSION
    return 0


def _check_diff_html(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Optional[str]:
    """diff --html's flags; plotly.js (checked before the profiles are read), None without
    --html."""
    if args.format != "html":
        if args.output is not None:
            parser.error("-o/--output applies to --html")
        return None
    if args.output is None:
        parser.error("--html needs -o FILE")
    if args.top is not None:
        parser.error("--top applies to the table, not to --html (the page has every row)")
    from pathscope.report.html import load_plotly
    return load_plotly(needed_by="diff --html")


def _command_symbolize(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pathscope.calltree import check_selection
    from pathscope.reader import load_profile
    from pathscope.symbolize import symbolize

    profile = load_profile(_directory(parser, args))
    check_selection(profile)
    result = symbolize(profile)
    if result.written is None:
        print(f"no code addresses to resolve in {profile.path}")
        return 0
    resolved = sum(m.resolved for m in result.modules)
    total = resolved + sum(m.unresolved for m in result.modules)
    print(f"wrote {result.written}: {resolved} of {total} addresses resolved")
    rows = [[m.path, m.build_id or "-", m.status, str(m.resolved), str(m.unresolved)]
            for m in result.modules]
    print(table(["module", "build id", "status", "resolved", "unresolved"], rows, "lllrr"))
    return 0


# ---- probe, top ------------------------------------------------------------------------------

def _pid(text: str) -> int:
    """A process id: digits only, 1 to 2^22."""
    if not text.isascii() or not text.isdigit() or len(text) > 7 or not 0 < int(text) <= 1 << 22:
        raise ValueError(text)
    return int(text)


_pid.__name__ = "process id"


def _command_probe(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pathscope import probes
    from pathscope.errors import LiveError

    if (args.pid is None) == (args.job is None):
        parser.error("name one process (PID) or one job (--job DIR)")
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        parser.error("one of --add SPEC, --remove SPEC|ID, --list")
    targets = ([probes.pid_target(args.pid)] if args.pid is not None
               else probes.job_targets(args.job))
    if args.add:
        results, done = probes.probe_add(targets, args.add), "added"
    elif args.remove:
        results, done = probes.probe_remove(targets, args.remove), "removed"
    else:
        results, done = probes.probe_list(targets), "list"
    if args.pid is not None and results[0].failed:
        raise LiveError(results[0].lines[0])
    sys.stdout.write(probes.format_results(results, done, several=args.job is not None))
    return 0 if probes.results_ok(results, done) else EXIT_ERROR


def _top_selection(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    from pathscope.top import Selection

    if args.target is not None and args.job is not None:
        parser.error("name DIR, PID or --job DIR, not two of them")
    target = args.job if args.job is not None else args.target
    if target is None:
        return Selection()
    if args.job is None and target.isascii() and target.isdigit():
        return Selection(pid=_pid(target))
    if not os.path.isdir(target):
        from pathscope.errors import LiveError
        raise LiveError(f"no such directory {target}")
    return Selection(outdir=os.path.realpath(target))


def _command_top(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import json

    from pathscope.top import LiveView, clean_stale, render_text

    if args.clean:
        if args.target is not None or args.job is not None or args.once or args.format:
            parser.error("--clean takes no other argument")
        removed = clean_stale(os.geteuid())
        for path in removed:
            print(f"removed {path}")
        if not removed:
            print("nothing to remove")
        return 0
    if args.format is not None and not args.once:
        parser.error("--format applies to --once")
    view = LiveView(_top_selection(parser, args))
    if args.once:
        doc = view.snapshot().to_json()
        if (args.format or "text") == "json":
            sys.stdout.write(json.dumps(doc, indent=1) + "\n")
        else:
            sys.stdout.write(render_text(doc))
        return 0
    view.snapshot()      # a selection that names nothing fails here, before the screen
    try:
        from pathscope.topui import run_ui
    except ImportError as e:
        from pathscope.errors import LiveError
        raise LiveError(f"the terminal UI needs textual ({e}): pip install 'pathscope[top]' "
                        f"(scripts/setup.sh installs it into .venv), or use --once") from None
    return run_ui(view)


# ---- entry point -------------------------------------------------------------------------------

def build_parser(options: Optional[Sequence[Option]]) -> tuple[
        argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and the commands' parsers by name; options None: run without its
    option flags."""
    parser = _Parser(prog="pathscope", description="pathscope: MPI profiler, per communicator "
                                                   "and call path.")
    parser.add_argument("--version", action="version", version=f"pathscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = _run_parser(sub, options)
    report = sub.add_parser("report", help="print the text report of a profile directory",
                            description="Print the text report of a profile directory.")
    report.add_argument("directory", metavar="DIR")
    report.add_argument("--html", action="store_true",
                        help="write the interactive HTML report (one self-contained file: "
                             "icicle, communicators, imbalance, heap, system calls) to -o FILE")
    report.add_argument("-o", "--output", metavar="FILE", help="with --html: the file to write")
    report.add_argument("--call-sites", action="store_true",
                        help="keep each call site of a function a line of its own in the call "
                             "tree and the hot path, and a tile of its own with --html "
                             "(default: one per function)")
    table_phrases = [f.phrase for f in _export.FORMATS.values()]
    path_phrases = [f.phrase for f in _export.CALL_PATH_FORMATS.values()]
    file_phrases = [f.phrase for f in _export.FILE_FORMATS.values()]
    for_tables, for_paths = " and ".join(TABLE_FORMATS), " and ".join(CALL_PATH_FORMATS)
    export = sub.add_parser(
        "export", help=f"write a table ({', '.join(table_phrases)}), the call paths "
                       f"({', '.join(CALL_PATH_FORMATS)}) or the whole profile "
                       f"({', '.join(FILE_FORMATS)})",
        description=f"Write one table of a profile as {' or '.join(table_phrases)}, or its "
                    f"call paths as {' or '.join(path_phrases)} (stdout unless -o), or the "
                    f"whole profile as {' or '.join(file_phrases)}.  "
                    f"Tables: {_export.tables_help()}.  "
                    f"Exit status 3: the profile is partial and --allow-partial was not "
                    f"given (nothing is written).")
    export.add_argument("directory", metavar="DIR")
    export.add_argument("--format", choices=EXPORT_FORMATS, default=DEFAULT_FORMAT,
                        help=f"default: {DEFAULT_FORMAT}")
    export.add_argument("--table", choices=EXPORT_TABLES,
                        help=f"{for_tables}: the table (default: {DEFAULT_TABLE})")
    export.add_argument("--metric", choices=CALL_PATH_METRICS,
                        help=f"{for_paths}: the value of a path (default: "
                             f"{DEFAULT_METRIC}; times in microseconds)")
    export.add_argument("--rank", type=_count, metavar="R",
                        help=f"{for_paths}: only world rank R (default: all, summed)")
    export.add_argument("--thread", type=_count, metavar="T",
                        help=f"{for_paths}: only thread index T (0: the main thread; "
                             f"default: all, summed)")
    export.add_argument("-o", "--output", metavar="FILE",
                        help="write to FILE instead of stdout ('-': stdout; parquet: a "
                             "directory)")
    export.add_argument("--allow-partial", action="store_true",
                        help="export a partial profile (missing, incomplete or unreadable "
                             "ranks, stray files) with a warning on stderr; without it such "
                             "an export is refused with exit status 3")
    diff = sub.add_parser(
        "diff", help="compare two profiles per call path, communicator and operation",
        description="Compare NEW with BASE: per call path (matched by its frame names), "
                    "communicator and MPI operation, the change in time, bytes and calls, "
                    "by impact (the absolute change in time first); with --html -o FILE as one "
                    "self-contained page (a differential icicle and the tables).  Exit status "
                    f"{EXIT_REGRESSION} with --fail-above PCT when the total time, or the "
                    "time of a path holding at least --floor % of BASE's total, grew by more "
                    "than PCT % (each such regression is named on stderr); 0 otherwise, 2 on "
                    "errors.")
    diff.add_argument("base", metavar="BASE")
    diff.add_argument("new", metavar="NEW")
    machine = diff.add_mutually_exclusive_group()
    machine.add_argument("--csv", dest="format", action="store_const", const="csv",
                         help="every row as CSV (times in ns) instead of the table")
    machine.add_argument("--json", dest="format", action="store_const", const="json",
                         help="every row and the totals as JSON instead of the table")
    machine.add_argument("--html", dest="format", action="store_const", const="html",
                         help="write the two-profile view (one self-contained page: a "
                              "differential icicle, every row, the communicators) to -o FILE "
                              "instead of the table")
    diff.add_argument("-o", "--output", metavar="FILE", help="with --html: the file to write")
    diff.add_argument("--fail-above", type=_percent, metavar="PCT",
                      help=f"exit with status {EXIT_REGRESSION} when a time grew by more than "
                           f"PCT percent")
    diff.add_argument("--floor", type=_percent, metavar="PCT", default=1.0,
                      help="--fail-above judges only paths with at least PCT %% of BASE's "
                           "total time in BASE or NEW (default: 1)")
    diff.add_argument("--top", type=_count, metavar="N",
                      help="rows of the table (default: 30)")
    sql = sub.add_parser(
        "sql", help="run a DuckDB query over the tables of one or more profiles",
        description="Run an SQL query (DuckDB) over the tables of one or more profile "
                    "directories or Parquet exports of them: every export table with `_` for "
                    "`-` (comm_ops, heap_timeline, ...), nodes, metrics and node_stats.  Each "
                    "view starts with a column `profile` (the DIR as given) and has the rows "
                    "of every DIR, e.g. SELECT profile, sum(calls) FROM comm_ops GROUP BY "
                    "profile.  Prints a table, or CSV with --csv.")
    sql.add_argument("directories", metavar="DIR", nargs="+")
    sql.add_argument("query", metavar="QUERY")
    sql.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    symbolize = sub.add_parser(
        "symbolize", help="(re)write DIR/symbols.tsv, the names of the call-path addresses",
        description="Ask the symbolizer (pathscope-symbolize; $PATHSCOPE_SYMBOLIZER overrides "
                    "it) for the names, files and lines of every call-path address of the "
                    "profile, write them to DIR/symbols.tsv, and print how many were resolved "
                    "per module.  report and export do this themselves when symbols.tsv is "
                    "missing; run this after the modules changed or became readable.")
    symbolize.add_argument("directory", metavar="DIR")
    probe = sub.add_parser(
        "probe", help="add, remove or list the probes of a running process or job",
        usage="pathscope probe (PID | --job DIR) (--add SPEC | --remove SPEC|ID | --list)",
        description="Talk to the control socket of a process started under pathscope run, "
                    "or of every process on this node of the job writing to DIR.  --add "
                    "resolves SPEC (NAME, NAME(PARAMS), /REGEX/, FILE:LINE, MODULE:SPEC) "
                    "against the process's modules first; a SPEC matching nothing is an "
                    "error and no process is contacted.  Other nodes: run this once per node "
                    "(docs/user-guide.md).")
    probe.add_argument("pid", metavar="PID", nargs="?", type=_pid)
    probe.add_argument("--job", metavar="DIR", help="every process of the job writing to DIR "
                                                     "on this node")
    probe.add_argument("--add", metavar="SPEC", help="probe the functions SPEC matches")
    probe.add_argument("--remove", metavar="SPEC|ID",
                       help="remove probe ID, or every probe added for SPEC")
    probe.add_argument("--list", action="store_true", help="list the probes")
    top = sub.add_parser(
        "top", help="live view of a running job on this node",
        usage="pathscope top [DIR | PID | --job DIR] [--once [--format json|text]] | --clean",
        description="Show the live segments of a job's processes on this node, aggregated "
                    "over its ranks (sum, and min/mean/max per rank with the ranks at min "
                    "and max): hot paths, MPI by communicator and operation, probes, heap, "
                    "system calls, ranks.  DIR: the job's output directory; PID: the job of "
                    "that process (a number is a PID: write ./123 for a directory); neither: "
                    "the only job of this user on this node.  Keys: Tab or 1-6 views, a adds "
                    "a probe to every rank, r removes the selected probe, q quits.")
    top.add_argument("target", metavar="DIR|PID", nargs="?")
    top.add_argument("--job", metavar="DIR", help="the job writing to DIR")
    top.add_argument("--once", action="store_true",
                     help="print one snapshot and exit (no terminal UI)")
    top.add_argument("--format", choices=("json", "text"),
                     help="with --once: text (default) or json (docs/user-guide.md has its "
                          "schema)")
    top.add_argument("--clean", action="store_true",
                     help="remove this user's live segments and sockets of processes that "
                          "are gone, and say which")
    return parser, {"run": run, "report": report, "export": export, "diff": diff, "sql": sql,
                    "symbolize": symbolize,
                    "probe": probe, "top": top}


def _dispatch(argv: Sequence[str]) -> int:
    if argv and argv[0] == "run":
        options = load_options()
        _parser, commands = build_parser(options)
        return _command_run(commands["run"], argv[1:], options)
    parser, commands = build_parser(None)
    args = parser.parse_args(argv)
    if args.command == "report":
        return _command_report(commands["report"], args)
    if args.command == "export":
        return _command_export(commands["export"], args)
    if args.command == "diff":
        return _command_diff(commands["diff"], args)
    if args.command == "sql":
        return _command_sql(commands["sql"], args)
    if args.command == "symbolize":
        return _command_symbolize(commands["symbolize"], args)
    if args.command == "probe":
        return _command_probe(commands["probe"], args)
    if args.command == "top":
        return _command_top(commands["top"], args)
    parser.error("missing command: run, report, export, diff, sql, symbolize, probe or top")


# The analysis side's libraries (pyproject.toml's dependencies): `run` needs none of them, the
# other commands say which one is missing instead of a traceback.
ANALYSIS_LIBRARIES = ("pandas", "pyarrow", "numpy", "rich", "duckdb", "google")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(argv)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in ANALYSIS_LIBRARIES:
            raise
        command = argv[0] if argv else "pathscope"
        print(f"pathscope: {command} needs the Python package {e.name.split('.')[0]}, which "
              f"{sys.executable} does not have: install the analysis side's libraries into "
              f"the Python that runs pathscope (python3 -m pip install 'pandas>=2.2' "
              f"'pyarrow>=15' 'rich>=13' 'protobuf>=4.21,<5' 'duckdb>=1.1', or pip install "
              f"the project; `pathscope run` needs none of them)", file=sys.stderr)
        return EXIT_ERROR
    except UsageError as e:
        print(f"{e.prog}: {e} (try '{e.prog} --help')", file=sys.stderr)
        return EXIT_USAGE
    except PartialProfileError as e:
        print(f"pathscope: {e}", file=sys.stderr)
        return EXIT_PARTIAL
    except PathscopeError as e:
        print(f"pathscope: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # the reader of our output went away (e.g. `pathscope report DIR | head`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130

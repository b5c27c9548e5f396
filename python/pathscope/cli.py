"""The `pathscope` command line: run, report, export.

This is the only module that prints errors or chooses an exit status: every PathscopeError
becomes one line `pathscope: <message>` on stderr and exit status 2; usage errors are one line
`pathscope <command>: <message> (try 'pathscope <command> --help')`, also status 2.
The `run` flags come from the option table (runtime/core/options.def), so a new option there
gets its flag and its help text without a change here.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn, Optional, Sequence, TextIO

from pathscope import __version__
from pathscope.errors import OutputError, PathscopeError
from pathscope.home import MPI_FLAVOURS
from pathscope.options import Option, load_options

EXIT_USAGE = 2
EXIT_ERROR = 2
# options.def fields the CLI sets itself instead of offering a flag
RUN_SETS_ITSELF = ("command",)
SHORT_FLAGS = {"output": "-o"}
EXPORT_TABLES = ("comm-ops", "ops", "comms", "ranks")
EXPORT_FORMATS = ("csv", "json")


class UsageError(Exception):
    """A command line that does not parse; carries the parser's prog for the message."""

    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and raises instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


# ---- run ---------------------------------------------------------------------------------------

def _flag_for(option: Option) -> tuple[list[str], dict[str, Any]]:
    """The argparse flag(s) and keyword arguments that set option."""
    dash = option.field.replace("_", "-")
    dest = f"option_{option.field}"
    if option.kind == "bool":
        value = "off" if option.default == "on" else "on"
        flag = f"--no-{dash}" if value == "off" else f"--{dash}"
        return [flag], dict(dest=dest, action="store_const", const=value,
                            help=f"{option.env}={value} (default {option.default}: {option.doc})")
    names = [f"--{dash}"]
    if option.field in SHORT_FLAGS:
        names.insert(0, SHORT_FLAGS[option.field])
    kwargs: dict[str, Any] = dict(dest=dest, help=f"{option.env}: {option.doc}")
    if option.kind == "enum":
        kwargs["choices"] = option.accepted_values
    else:
        kwargs["metavar"] = "DIR" if option.field == "output" else "VALUE"
    return names, kwargs


def options_help(options: Sequence[Option]) -> str:
    """The environment-variable list of `pathscope run --help` (one table: options.def)."""
    lines = ["environment form (without the CLI): LD_PRELOAD=<repo>/build/<mpi>/libpathscope.so",
             "and these variables; any other PATHSCOPE_* variable is an error:"]
    for o in options:
        default = o.default if o.default else "none"
        accepted = f"<{o.accepted}>" if o.kind == "path" else o.accepted
        lines.append(f"  {o.env}={accepted} (default: {default})")
        lines.append(f"      {o.doc}")
    lines.append("CLI only (removed from the program's environment): PATHSCOPE_LIB=<path> "
                 "preloads that library instead of build/<mpi>/libpathscope.so")
    return "\n".join(lines)


def _run_parser(sub: "argparse._SubParsersAction[_Parser]",
                options: Sequence[Option]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "run", help="run one rank of an MPI program under pathscope",
        usage="pathscope run [options] -- PROGRAM [ARGS...]",
        description="Run PROGRAM (one rank; put pathscope run after mpirun/mpiexec/srun) with "
                    "the pathscope runtime preloaded.  Everything is checked before the program "
                    "starts; then pathscope replaces itself with the program.",
        epilog=options_help(options), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mpi", choices=("auto",) + MPI_FLAVOURS, default="auto",
                        dest="library_mpi",
                        help="which runtime build to preload: build/<mpi>/libpathscope.so "
                             "(default auto: from the launcher's environment, else ldd PROGRAM)")
    for option in options:
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


# ---- report and export -------------------------------------------------------------------------

def _command_report(args: argparse.Namespace) -> int:
    from pathscope.reader import load_profile
    from pathscope.report import render

    sys.stdout.write(render(load_profile(args.directory), "text"))
    return 0


def _open_output(path: str) -> TextIO:
    try:
        return open(path, "w", encoding="utf-8", newline="")
    except OSError as e:
        raise OutputError(f"cannot write '{path}': {e.strerror}") from e


def _command_export(args: argparse.Namespace) -> int:
    from pathscope.export import export
    from pathscope.reader import load_profile

    profile = load_profile(args.directory)
    if args.output is None:
        export(profile, args.table, args.format, sys.stdout)
        return 0
    out = _open_output(args.output)
    try:
        with out:
            export(profile, args.table, args.format, out)
    except OSError as e:
        raise OutputError(f"cannot write '{args.output}': {e.strerror}") from e
    return 0


# ---- entry point -------------------------------------------------------------------------------

def build_parser(options: Sequence[Option]) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    parser = _Parser(prog="pathscope", description="pathscope: MPI profiler, per communicator.")
    parser.add_argument("--version", action="version", version=f"pathscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = _run_parser(sub, options)
    report = sub.add_parser("report", help="print the text report of a profile directory",
                            description="Print the text report of a profile directory.")
    report.add_argument("directory", metavar="DIR")
    export = sub.add_parser(
        "export", help="write one table of a profile as CSV or JSON",
        description="Write one table of a profile as CSV or JSON (stdout unless -o).  Tables: "
                    "comm-ops (per communicator and operation), ops (per operation, over all "
                    "communicators), comms (communicators), ranks.")
    export.add_argument("directory", metavar="DIR")
    export.add_argument("--table", choices=EXPORT_TABLES, default="comm-ops",
                        help="default: comm-ops")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="csv", help="default: csv")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    return parser, run


def _dispatch(argv: Sequence[str]) -> int:
    options = load_options()
    parser, run_parser = build_parser(options)
    if argv and argv[0] == "run":
        return _command_run(run_parser, argv[1:], options)
    args = parser.parse_args(argv)
    if args.command == "report":
        return _command_report(args)
    if args.command == "export":
        return _command_export(args)
    parser.error("missing command: run, report or export")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(argv)
    except UsageError as e:
        print(f"{e.prog}: {e} (try '{e.prog} --help')", file=sys.stderr)
        return EXIT_USAGE
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

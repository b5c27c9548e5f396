"""The exceptions of the pathscope package.

Library code raises these and never exits; the CLI (pathscope.cli.main) turns each into one
line `pathscope: <message>` on stderr and exit status 2 (3 for PartialProfileError).  Messages are complete sentences
without the `pathscope: ` prefix."""


class PathscopeError(Exception):
    """Base class of every error pathscope reports to the user."""


class ProfileError(PathscopeError):
    """A profile directory is missing, unreadable or malformed."""


class PartialProfileError(ProfileError):
    """An export of a profile with missing, incomplete or unreadable ranks or stray files,
    without --allow-partial (the CLI exits with status 3)."""


class FormatVersionError(ProfileError):
    """A profile was written in a newer major format version than this reader understands."""


class OptionError(PathscopeError):
    """A PATHSCOPE_* variable is unknown or has a value its option does not accept."""


class LaunchError(PathscopeError):
    """`pathscope run` cannot start the program (output directory, program, runtime library)."""


class OutputError(PathscopeError):
    """A result file cannot be written."""


class SymbolizerError(PathscopeError):
    """The symbolizer executable is missing, failed, or answered something malformed."""


class LiveError(PathscopeError):
    """A running process cannot be reached or read: no such process, not started under
    pathscope, permission, a malformed live segment, a refused control socket."""


class QueryError(PathscopeError):
    """`pathscope sql`: the query does not parse, names an unknown table or fails in DuckDB."""

"""The run-time options, read from the one table runtime/core/options.def.

That file is C (PS_OPTION(...) lines, included by the runtime); this module parses the same
lines so that `pathscope run --help`, the user guide's option list and the CLI's validation
all come from it.  Validation messages are word for word the runtime's (core/lifecycle.c), so
a user sees the same line whether the CLI or the preloaded library finds the problem."""
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from pathscope.errors import OptionError
from pathscope.home import options_def_path

KINDS = {"PS_KIND_PATH": "path", "PS_KIND_BOOL": "bool", "PS_KIND_ENUM": "enum",
         "PS_KIND_INT": "int", "PS_KIND_LIST": "list"}
ENV_PREFIX = "PATHSCOPE_"

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_LINE = re.compile(
    r'PS_OPTION\(\s*(\w+)\s*,\s*"([^"]*)"\s*,\s*(\w+)\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,'
    r'\s*"([^"]*)"\s*\)')


@dataclass(frozen=True)
class Option:
    field: str      # the C struct field, e.g. "output"
    env: str        # the environment variable, e.g. "PATHSCOPE_OUTPUT"
    kind: str       # "path", "bool", "enum", "int" or "list"
    default: str    # "" when there is none
    accepted: str   # bool/enum "a|b|c"; int "0|10-20000" (numbers and inclusive ranges);
                    # list "k1|k2=v1|v2" (comma-separated key=value items); path: a description
    doc: str

    @property
    def accepted_values(self) -> Optional[tuple[str, ...]]:
        """The values the runtime accepts, or None when any text is accepted (paths)."""
        if self.kind in ("path", "int", "list"):
            return None
        return tuple(self.accepted.split("|"))


def parse_options(text: str, source: str = "options.def") -> list[Option]:
    """Parses the PS_OPTION lines of an options.def text, in table order."""
    options = []
    for match in _LINE.finditer(_COMMENT.sub("", text)):
        field, env, kind, default, accepted, doc = match.groups()
        if kind not in KINDS:
            raise OptionError(f"{source}: unknown option kind {kind} for {env}")
        options.append(Option(field, env, KINDS[kind], default, accepted, doc))
    if not options:
        raise OptionError(f"{source}: no PS_OPTION lines found")
    return options


def load_options(path: Optional[Path] = None) -> list[Option]:
    """Reads runtime/core/options.def (of $PATHSCOPE_HOME, else of this checkout)."""
    path = path or options_def_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise OptionError(f"cannot read the option table {path}: {e.strerror}") from e
    return parse_options(text, str(path))


def _int_accepted(accepted: str, value: str) -> bool:
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        return False
    number = int(value)
    for alternative in accepted.split("|"):
        low, _, high = alternative.partition("-")
        if int(low) <= number <= int(high or low):
            return True
    return False


def _list_accepted(accepted: str, value: str) -> bool:
    keys, _, values = accepted.partition("=")
    if not value:
        return True
    for item in value.split(","):
        key, sep, val = item.partition("=")
        if not sep or key not in keys.split("|") or val not in values.split("|"):
            return False
    return True


def check_value(option: Option, value: str) -> None:
    """Raises OptionError (the runtime's message) if value is not accepted by option."""
    if option.kind == "int":
        ok = _int_accepted(option.accepted, value)
    elif option.kind == "list":
        ok = _list_accepted(option.accepted, value)
    else:
        accepted = option.accepted_values
        ok = accepted is None or value in accepted
    if not ok:
        raise OptionError(f"invalid value '{value}' for {option.env} (accepted: {option.accepted})")


def validate_environment(environ: Mapping[str, str], options: Sequence[Option],
                         ignore: Sequence[str] = ()) -> None:
    """Checks every PATHSCOPE_* variable of environ the way the runtime does at start-up:
    values of known options first (in table order), then unknown names.  Names in ignore
    (the CLI's own variables, which the CLI removes before starting the program) pass."""
    for option in options:
        if option.env in environ:
            check_value(option, environ[option.env])
    known = {o.env for o in options}
    for name in environ:
        if name.startswith(ENV_PREFIX) and name not in known and name not in ignore:
            listing = ", ".join(o.env for o in options)
            raise OptionError(f"unknown option {name} (known: {listing})")


def markdown_table(options: Sequence[Option]) -> str:
    """The option list of docs/user-guide.md (kept equal to this by a unit test)."""
    def cell(text: str) -> str:
        # a table cell may not hold a bare '|'; '<program>' would be read as an HTML tag
        return text.replace("|", "\\|").replace("<", "\\<").replace(">", "\\>")

    lines = ["| variable | values | default | meaning |", "|---|---|---|---|"]
    for o in options:
        values = o.accepted if o.kind == "path" else f"`{o.accepted}`"
        default = f"`{o.default}`" if o.default else "none"
        lines.append(f"| `{o.env}` | {cell(values)} | {cell(default)} | {cell(o.doc)} |")
    return "\n".join(lines)

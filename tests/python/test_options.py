"""pathscope.options: the one option table (runtime/core/options.def) and its validation."""
import re

import pytest

from pathscope.errors import OptionError
from pathscope.options import Option, check_value, load_options, parse_options, \
    validate_environment

TABLE = '''/* header comment mentioning PS_OPTION(field, "ENV_NAME", kind, "d", "a", "doc") */
PS_OPTION(output, "PATHSCOPE_OUTPUT", PS_KIND_PATH, "", "a directory path", "where")
PS_OPTION(mpi,    "PATHSCOPE_MPI",    PS_KIND_BOOL, "on", "on|off", "measure MPI")
// PS_OPTION(old, "PATHSCOPE_OLD", PS_KIND_BOOL, "on", "on|off", "commented out")
PS_OPTION(mode,   "PATHSCOPE_MODE",   PS_KIND_ENUM, "fast", "fast|slow|off", "a mode, with a comma")
'''


def test_parse_options():
    options = parse_options(TABLE)
    assert options == [
        Option("output", "PATHSCOPE_OUTPUT", "path", "", "a directory path", "where"),
        Option("mpi", "PATHSCOPE_MPI", "bool", "on", "on|off", "measure MPI"),
        Option("mode", "PATHSCOPE_MODE", "enum", "fast", "fast|slow|off",
               "a mode, with a comma")]
    assert options[0].accepted_values is None
    assert options[2].accepted_values == ("fast", "slow", "off")


def test_parse_options_rejects_unknown_kind_and_empty():
    with pytest.raises(OptionError, match="unknown option kind PS_KIND_FLOAT"):
        parse_options('PS_OPTION(n, "PATHSCOPE_N", PS_KIND_FLOAT, "1", "1|2", "n")')
    with pytest.raises(OptionError, match="no PS_OPTION lines"):
        parse_options("/* nothing */")


def by_env_default(options, env):
    return {o.env: o for o in options}[env].default


def test_repository_table():
    """The real table: every option the runtime knows, in its order."""
    options = load_options()
    assert [o.env for o in options] == ["PATHSCOPE_OUTPUT", "PATHSCOPE_FORCE", "PATHSCOPE_MPI",
                                        "PATHSCOPE_SIGNALS",
                                        "PATHSCOPE_POLL_TIMING", "PATHSCOPE_COMM_KEEP", "PATHSCOPE_PER_RANK", "PATHSCOPE_PATHS",
                                        "PATHSCOPE_SAMPLE_RATE", "PATHSCOPE_SAMPLE_CLOCK", "PATHSCOPE_SAMPLE_TIMER",
                                        "PATHSCOPE_UNWIND", "PATHSCOPE_HEAP", "PATHSCOPE_TRAVERSAL",
                                        "PATHSCOPE_TRAVERSAL_CHECK", "PATHSCOPE_PYTHON_FRAMES", "PATHSCOPE_KERNEL",
                                        "PATHSCOPE_KERNEL_PERIOD", "PATHSCOPE_PROBE", "PATHSCOPE_PROBE_METRICS", "PATHSCOPE_QUIET", "PATHSCOPE_PID",
                                        "PATHSCOPE_COMMAND", "PATHSCOPE_CONTROL", "PATHSCOPE_LIVE"]
    assert by_env_default(options, "PATHSCOPE_SAMPLE_RATE") == "200"
    assert by_env_default(options, "PATHSCOPE_SAMPLE_CLOCK") == "cpu"
    assert by_env_default(options, "PATHSCOPE_POLL_TIMING") == "sampled"
    by_env = {o.env: o for o in options}
    assert by_env["PATHSCOPE_MPI"].default == "on"
    assert by_env["PATHSCOPE_QUIET"].accepted_values == ("on", "off")
    assert all(o.doc for o in options)


def test_check_value_message():
    mpi = parse_options(TABLE)[1]
    check_value(mpi, "off")
    with pytest.raises(OptionError) as e:
        check_value(mpi, "x")
    assert str(e.value) == "invalid value 'x' for PATHSCOPE_MPI (accepted: on|off)"


def test_validate_environment_messages():
    options = parse_options(TABLE)
    validate_environment({"PATHSCOPE_MPI": "on", "PATHSCOPE_OUTPUT": "any/thing", "HOME": "/"},
                         options)
    with pytest.raises(OptionError) as e:
        validate_environment({"PATHSCOPE_VERBOSE": "1"}, options)
    assert str(e.value) == ("unknown option PATHSCOPE_VERBOSE (known: PATHSCOPE_OUTPUT, "
                            "PATHSCOPE_MPI, PATHSCOPE_MODE)")
    with pytest.raises(OptionError) as e:
        validate_environment({"PATHSCOPE_MODE": "medium"}, options)
    assert str(e.value) == "invalid value 'medium' for PATHSCOPE_MODE (accepted: fast|slow|off)"
    # values are checked before names, as the runtime does
    with pytest.raises(OptionError, match="invalid value"):
        validate_environment({"PATHSCOPE_ZZZ": "1", "PATHSCOPE_MPI": "yes"}, options)
    validate_environment({"PATHSCOPE_LIB": "x"}, options, ignore=("PATHSCOPE_LIB",))


def test_user_guide_option_table_is_generated_from_options_def():
    """docs/user-guide.md lists exactly the options of runtime/core/options.def."""
    from pathlib import Path

    from pathscope.options import markdown_table

    guide = (Path(__file__).resolve().parents[2] / "docs" / "user-guide.md").read_text()
    block = guide.split("<!-- options:begin")[1].split("-->", 1)[1]
    block = block.split("<!-- options:end -->")[0].strip()
    assert block == markdown_table(load_options())


@pytest.mark.parametrize("env, value, ok", [
    ("PATHSCOPE_SAMPLE_RATE", "0", True), ("PATHSCOPE_SAMPLE_RATE", "10", True),
    ("PATHSCOPE_SAMPLE_RATE", "20000", True), ("PATHSCOPE_SAMPLE_RATE", "9", False),
    ("PATHSCOPE_SAMPLE_RATE", "20001", False), ("PATHSCOPE_SAMPLE_RATE", "-5", False),
    ("PATHSCOPE_SAMPLE_RATE", "", False), ("PATHSCOPE_SAMPLE_RATE", "1e3", False),
    ("PATHSCOPE_UNWIND", "", True), ("PATHSCOPE_UNWIND", "env=path", True),
    ("PATHSCOPE_UNWIND", "all=count,p2p=path", True), ("PATHSCOPE_UNWIND", "env", False),
    ("PATHSCOPE_UNWIND", "env=path,", False), ("PATHSCOPE_UNWIND", "mpi=path", False),
    ("PATHSCOPE_UNWIND", "env=yes", False),
])
def test_int_and_list_options(env, value, ok):
    """The integer and list kinds accept exactly what the runtime accepts (lifecycle.c)."""
    option = {o.env: o for o in load_options()}[env]
    if ok:
        check_value(option, value)
    else:
        with pytest.raises(OptionError, match=re.escape(
                f"invalid value '{value}' for {env} (accepted: {option.accepted})")):
            check_value(option, value)

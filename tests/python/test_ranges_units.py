"""pathscope.ranges (rank lists, host lists) and pathscope.units (human-friendly numbers)."""
import pytest

from pathscope import ranges
from pathscope.units import format_bytes, format_percent, format_time, hist_bin_label


@pytest.mark.parametrize("text, ranks", [
    ("-", []),
    ("0", [0]),
    ("0-3,6,8-9", [0, 1, 2, 3, 6, 8, 9]),
    ("0-1|2-3", [0, 1, 2, 3]),
    ("4|-", [4]),
    ("-32766", [-32766]),
    ("0,-32766,-32766", [0, -32766, -32766]),
    ("0-3,6,8...", [0, 1, 2, 3, 6]),          # cut in profile.tsv: last item may be partial
    ("0-3,10-1...", [0, 1, 2, 3]),
    ("0-6:2,7-8,12", [0, 2, 4, 6, 7, 8, 12]),   # (format 2.11) every s-th rank from a to b
    ("1-13:4|0-12:4", [1, 5, 9, 13, 0, 4, 8, 12]),
    ("0-126:2,130-1...", list(range(0, 127, 2))),
])
def test_expand(text, ranks):
    assert ranges.expand(text) == ranks


@pytest.mark.parametrize("text", ["a", "0-", "3-1", "0,,1", "1-2-3", "0:2", "0-4:", "0-4:2:2",
                                  "0-4:-2"])
def test_expand_malformed(text):
    with pytest.raises(ValueError):
        ranges.expand(text)


@pytest.mark.parametrize("text, message", [
    ("0-5:2", "malformed rank list '0-5:2': range 0-5:2 does not end on its step"),
    ("0-4:1", "malformed rank list '0-4:1': range 0-4:1 does not end on its step"),
    ("0-4:0", "malformed rank list '0-4:0': range 0-4:0 does not end on its step"),
    ("4-0:2", "malformed rank list '4-0:2': range 4-0:2 goes down"),
])
def test_step_errors(text, message):
    with pytest.raises(ValueError) as e:
        ranges.parse(text)
    assert str(e.value) == message


@pytest.mark.parametrize("ranks, text", [
    # the runtime's ps_fmt_ranges (tests/unit/test_fmt.c) writes the same
    ([0, 2, 4, 6, 7, 8, 12], "0-6:2,7-8,12"), ([1, 5, 9, 13], "1-13:4"), ([0, 3, 4, 5], "0,3-5"),
    ([-32766, 0, 32766, 65532], "-32766,0-65532:32766"), ([8, 6, 4, 2], "8,6,4,2"),
    ([0, 4, 8, 9, 13, 17, 21], "0-8:4,9-21:4"), ([0, 2], "0,2"), (list(range(1, 128, 2)), "1-127:2"),
])
def test_compress_steps(ranks, text):
    assert ranges.compress(ranks, steps=True) == text
    assert ranges.expand(text) == ranks


@pytest.mark.parametrize("a, b, united", [
    ("0-6:2", "1-7:2", ("0-7", 8, 0)),
    ("0-8:4", "2-10:4", ("0-10:2", 6, 0)),
    ("0-12:4|1", "16|3-11:4", ("0-16:4|1,3-11:4", 5, 4)),
    ("0-4:2,5...", "6", ("0-6:2...", 4, 0)),     # the cut list's last item may be partial
])
def test_unite_members_steps(a, b, united):
    from pathscope.merge import unite_members
    assert unite_members(a, b) == united

@pytest.mark.parametrize("ranks, text", [
    ([], "-"), ([5], "5"), ([0, 1, 2, 3, 6, 8, 9], "0-3,6,8-9"), ([3, 2], "3,2"),
    ([0, 2, 4], "0,2,4"), ([-32766, 0, 1], "-32766,0-1"),
])
def test_compress(ranks, text):
    assert ranges.compress(ranks) == text
    if text != "-":
        assert ranges.expand(text) == ranks


@pytest.mark.parametrize("hosts, text", [
    ([], "-"),
    (["vm"], "vm"),
    (["vm", "vm", "vm"], "vm"),
    (["vm3", "vm0", "vm1", "vm2"], "vm[0-3]"),
    (["node01", "node02", "node03", "node07"], "node[01-03,07]"),
    (["login", "vm1", "vm2", "gpu5"], "gpu5,login,vm[1-2]"),
    (["a9", "a10", "a11"], "a[9-11]"),
])
def test_compress_hosts(hosts, text):
    assert ranges.compress_hosts(hosts) == text


@pytest.mark.parametrize("ns, text", [
    (0, "0 ns"), (999, "999 ns"), (1000, "1.00 µs"), (26910, "26.9 µs"),
    (7_231_086, "7.23 ms"), (112_000_000, "112 ms"), (2_500_000_000, "2.50 s"),
])
def test_format_time(ns, text):
    assert format_time(ns) == text


@pytest.mark.parametrize("count, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (819200, "800 KiB"),
    (3 * 2**20, "3.00 MiB"), (5 * 2**30, "5.00 GiB"),
])
def test_format_bytes(count, text):
    assert format_bytes(count) == text


@pytest.mark.parametrize("b, text", [
    (0, "0 B"), (1, "1 B"), (2, "[2 B,4 B)"), (11, "[1 KiB,2 KiB)"), (21, "[1 MiB,2 MiB)"),
    (47, ">=64 TiB"),
])
def test_hist_bin_label(b, text):
    assert hist_bin_label(b) == text


def test_format_percent():
    assert format_percent(0.5) == "50.0%"
    assert format_percent(0.0349) == "3.5%"
    assert format_percent(0.0002) == "<0.1%"
    assert format_percent(0) == "0.0%"

"""Human-friendly numbers: times (ns, µs, ms, s), sizes (B, KiB, MiB, ...), histogram bins."""

_TIME_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"))
_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
LAST_HIST_BIN = 47


def _three_digits(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def format_time(ns: float) -> str:
    """12 -> `12 ns`; 26910 -> `26.9 µs`; 7231086 -> `7.23 ms`; 2.5e9 -> `2.50 s`."""
    for scale, unit in _TIME_UNITS:
        if ns >= scale:
            return f"{_three_digits(ns / scale)} {unit}"
    return f"{ns:.0f} ns"


def format_bytes(count: float) -> str:
    """512 -> `512 B`; 819200 -> `800 KiB`; 1536 -> `1.50 KiB`."""
    value = float(count)
    for unit in _SIZE_UNITS:
        if value < 1024 or unit == _SIZE_UNITS[-1]:
            return f"{count} B" if unit == "B" else f"{_three_digits(value)} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _power_of_two(exponent: int) -> str:
    unit = 0
    while exponent >= 10 and unit < len(_SIZE_UNITS) - 1:
        exponent -= 10
        unit += 1
    return f"{2 ** exponent} {_SIZE_UNITS[unit]}"


def hist_bin_label(b: int) -> str:
    """The message sizes of histogram bin b (docs/format.md): 0 -> `0 B`, 1 -> `1 B`,
    11 -> `[1 KiB,2 KiB)` (1024 to 2047 bytes), 47 -> `>=64 TiB` (open-ended)."""
    if b <= 0:
        return "0 B"
    if b == 1:
        return "1 B"
    if b >= LAST_HIST_BIN:
        return f">={_power_of_two(LAST_HIST_BIN - 1)}"
    return f"[{_power_of_two(b - 1)},{_power_of_two(b)})"


def format_percent(fraction: float) -> str:
    """0.5 -> `50.0%`; 0.0002 -> `<0.1%` (small but not nothing); 0 -> `0.0%`."""
    if 0 < fraction < 0.0005:
        return "<0.1%"
    return f"{100 * fraction:.1f}%"


def seconds(ns: float) -> float:
    """A time in ns as seconds for the export tables, to the ns."""
    return round(ns / 1e9, 9)

"""The report's stack-walk section: the traversal mode of each rank and how often a walk
reused the previous one (the `traversal` and `walks` lines, format 2.1)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from pathscope.reader import Profile
from pathscope.report.layout import INDENT
from pathscope.units import format_percent

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames


def sections(frames: "ProfileFrames") -> list[str]:
    walks = _walks(frames.profile)
    return [walks] if walks else []


def _walks(profile: Profile) -> str:
    modes, refused, walks, reused, checks, agree = set(), set(), 0, 0, 0, 0
    for paths in profile.callpaths.values():
        if paths.traversal is None:
            continue
        modes.add(paths.traversal[0])
        if paths.traversal[2]:
            refused.add(paths.traversal[2])
        for thread in paths.threads.values():
            if thread.walks is not None:
                walks += thread.walks.walks
                reused += thread.walks.reused
                checks += thread.walks.checks
                agree += thread.walks.agree
    if not modes:
        return ""
    checked = (f"{checks:,} repeated as a full walk: {agree:,} agree "
               f"({format_percent(agree / checks)})" if checks else "none repeated as a full walk")
    lines = [f"Stack walks\n{INDENT}mode {', '.join(sorted(modes))}: {walks:,} walks, "
             f"{format_percent(reused / walks) if walks else '-'} reused the previous walk; "
             f"{checked}"]
    lines += [f"{INDENT}asked for: {r}" for r in sorted(refused)]
    return "\n".join(lines)

"""`python -m bench --check`: each measured ratio against the one recorded in
docs/performance.md ("Recorded ratios"), failing on a row more than 20 % worse.

Worse means higher for a ratio whose target is `<=` (a cost against its floor) and
lower for one whose target is `>=` (a speed against its ideal). A row with no recorded
ratio is reported and passes (record it); a recorded row the run did not measure (a case
left out with --only) is not judged; a recorded row whose case failed fails.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .common import Row

PERFORMANCE_MD = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
SECTION = "## Recorded ratios"
TOLERANCE = 0.20
#: A ratio may also move by this much in absolute terms, whichever is larger: the
#: start-up rows compare a ~30 ms process with a ~1 s floor, and the kernel's CPU
#: accounting of a short process moves by ~10 ms between runs (0.029x to 0.046x for
#: `sd --help` in one quiet session), far more than 20 % of 0.03x.
ABSOLUTE_SLACK = 0.015
#: The cases `.ci/run` checks (`python -m bench --check --quick`): about two minutes.
QUICK_CASES = ("a", "c", "e", "r")

_RATIO = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*[x×]\s*$")


def recorded_ratios(path: Path = PERFORMANCE_MD) -> dict[str, float]:
    """The `| case | ratio | … |` rows of the "Recorded ratios" section, by case."""
    text = path.read_text(encoding="utf-8")
    start = text.find(f"\n{SECTION}")
    if start < 0:
        raise SystemExit(f"{path}: no '{SECTION}' section to check against")
    section = text[start + 1 :]
    end = section.find("\n## ")
    out: dict[str, float] = {}
    for line in (section if end < 0 else section[:end]).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 2:
            match = _RATIO.match(cells[1])
            if match:
                out[cells[0].strip("`")] = float(match.group(1))
    if not out:
        raise SystemExit(f"{path}: the '{SECTION}' section holds no `| case | ratio |` rows")
    return out


def shown(ratio: float) -> str:
    return f"{ratio:.3f}x" if ratio < 0.1 else f"{ratio:.2f}x"


@dataclass
class Verdict:
    case: str
    recorded: float | None
    measured: float | None
    limit: float | None
    passed: bool
    why: str


def judge(rows: Sequence[Row], recorded: dict[str, float], tolerance: float = TOLERANCE) -> list[Verdict]:
    out: list[Verdict] = []
    for row in rows:
        if row.case not in recorded:
            if row.ratio is not None:
                out.append(Verdict(row.case, None, row.ratio, None, True, "not recorded"))
            continue
        was = recorded[row.case]
        higher_is_better = row.target.strip().startswith(">=")
        slack = max(was * tolerance, ABSOLUTE_SLACK)
        limit = was - slack if higher_is_better else was + slack
        if row.ratio is None:
            out.append(Verdict(row.case, was, None, limit, False, f"not measured: {row.note or row.measured}"))
            continue
        worse = row.ratio < limit if higher_is_better else row.ratio > limit
        relation = ("<" if worse else ">=") if higher_is_better else (">" if worse else "<=")
        out.append(Verdict(row.case, was, row.ratio, limit, not worse, f"{shown(row.ratio)} {relation} {shown(limit)}"))
    return out


def failed_cases(verdicts: Sequence[Verdict]) -> list[str]:
    """The case letters ("a", "e") of the rows judged worse."""
    return sorted({v.case.split(".", 1)[0] for v in verdicts if not v.passed})


def best_of(first: Sequence[Row], again: Sequence[Row]) -> list[Row]:
    """`first` with each row replaced by its measurement in `again` when that one is
    better in the row's direction (lower for a `<=` target, higher for `>=`). A second
    run of a case confirms a regression (it shows twice) and clears a slow spell of the
    shared host (it does not)."""
    by_case = {row.case: row for row in again if row.ratio is not None}
    out: list[Row] = []
    for row in first:
        other = by_case.get(row.case)
        if other is None or other.ratio is None:
            out.append(row)
            continue
        if row.ratio is None:
            out.append(other)
            continue
        higher_is_better = row.target.strip().startswith(">=")
        better = other.ratio > row.ratio if higher_is_better else other.ratio < row.ratio
        out.append(other if better else row)
    return out


def report(verdicts: Sequence[Verdict]) -> bool:
    """Print the verdicts; True when none failed."""
    print(f"bench --check: each ratio against docs/performance.md ({SECTION}), {TOLERANCE:.0%} tolerance "
          f"(or {ABSOLUTE_SLACK}x, whichever is larger)")
    for v in verdicts:
        was = "-" if v.recorded is None else shown(v.recorded)
        status = "ok" if v.passed else "WORSE"
        if v.why == "not recorded":
            status = "new"
        print(f"  {status:5s} {v.case}: recorded {was}, {v.why}")
    failed = [v for v in verdicts if not v.passed]
    print(f"bench --check: {len(failed)} of {len(verdicts)} rows worse than recorded" if failed
          else f"bench --check: {len(verdicts)} rows within {TOLERANCE:.0%} of the recorded ratios")
    return not failed

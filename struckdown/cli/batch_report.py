"""What `sd batch` adds for 0.x users: `--head N` with a projection, `--compare`, and
answer columns that never overwrite an input column.

- `--head N` runs the first N rows, then projects time, tokens and cost for all the
  rows from the ones that ran, at the same `-j`: the head ran min(N, -j) rows at a time,
  all the rows would run min(rows, -j) at a time, and time scales with rows / rows at a
  time (with N < -j the N rows ran side by side, so all rows take rows / -j row times,
  not rows / N).
  Cost is known when the usage carries one (`usage.cost`, from model prices).
- An answer named like an input column is written as `<name>_answer` (then
  `_answer2`, …), with one warning, so the input is never overwritten.
- `--compare COLUMN[=SLOT]` scores the answers against a column (`compare.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

SUFFIX = "_answer"


def head_rows(rows: list[dict[str, Any]], head: int | None) -> tuple[list[dict[str, Any]], int]:
    """The rows to run, and how many rows the inputs hold."""
    if head is None:
        return rows, len(rows)
    return rows[:head], len(rows)


def answer_columns(input_columns: Sequence[str], keys: Sequence[str], warn: Callable[[str], None]) -> dict[str, str]:
    """answer key → its output column, for the keys that clash with an input column."""
    taken = set(input_columns) | set(keys)
    renames: dict[str, str] = {}
    for key in keys:
        if key not in input_columns:
            continue
        name, n = f"{key}{SUFFIX}", 2
        while name in taken:
            name, n = f"{key}{SUFFIX}{n}", n + 1
        taken.add(name)
        renames[key] = name
    if renames:
        listed = ", ".join(f"{k!r} as {v!r}" for k, v in renames.items())
        warn(f"answers named like input columns are written beside them, not over them: {listed}")
    return renames


def projection(entries: Sequence[Mapping[str, Any]], elapsed: float, total: int, jobs: int) -> str | None:
    """`--head`: the rows that ran, and what all `total` rows would take, or None when none ran."""
    ran = len(entries)
    if not ran or total <= 0:
        return None
    tokens = sum(int(e.get("usage", {}).get("total_tokens", 0) or 0) for e in entries)
    costs = [e.get("usage", {}).get("cost") for e in entries]
    known = all(isinstance(c, (int, float)) for c in costs)
    cost = sum(float(c) for c in costs if isinstance(c, (int, float)))
    scale = total / ran
    time_scale = scale * min(jobs, ran) / max(1, min(jobs, total))  # rows at a time: the head's and all rows'
    head = f"--head {ran}: {ran} of {total:,} rows in {_duration(elapsed)}, {tokens:,} tokens"
    head += f", ${cost:.4f}" if known else ", cost unknown"
    whole = f"projection for all {total:,} rows at -j {jobs}: ~{_duration(elapsed * time_scale)}"
    whole += f" · ~{round(tokens * scale):,} tokens"
    whole += f" · ~${cost * scale:.2f}" if known else " · cost unknown (no prices for this model)"
    return f"{head}\n{whole}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"

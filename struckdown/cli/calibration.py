"""`sd batch --compare` for a slot with `confidence=` (SPEC §27): how far its confidences
can be trusted, and the threshold to escalate below.

- Expected calibration error over 10 equal-width bins of confidence: the rows' share in
  each bin times the gap between its accuracy and its mean confidence, summed; with the
  reliability table it comes from. Only rows answered by the first model count (an
  escalated row's confidence belongs to an answer the table no longer holds).
- Accuracy of the accepted rows (not escalated) and of the escalated rows.
- `--target-accuracy A`: the lowest threshold whose accepted rows reach accuracy A, i.e.
  the one that escalates fewest rows (the cheapest: each escalation is one more request
  on a larger model, or a person's time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

BINS = 10


@dataclass(frozen=True)
class Scored:
    """One compared row: its confidence, whether its answer was right, whether it escalated."""

    confidence: float | None
    correct: bool
    escalated: bool


@dataclass(frozen=True)
class Bin:
    low: float
    high: float
    rows: int
    mean_confidence: float
    accuracy: float


@dataclass(frozen=True)
class Calibration:
    rows: int  # rows answered by the first model, with a confidence
    ece: float
    bins: tuple[Bin, ...]  # the bins that hold rows
    accepted: tuple[int, float | None]  # (rows, accuracy)
    escalated: tuple[int, float | None]
    threshold: tuple[float, int, float] | None = None  # (min_confidence, rows it escalates, accepted accuracy)
    target: float | None = None


def _accuracy(rows: Sequence[Scored]) -> float | None:
    return sum(r.correct for r in rows) / len(rows) if rows else None


def calibrate(scored: Sequence[Scored], target: float | None = None) -> Calibration:
    measured = [r for r in scored if r.confidence is not None and not r.escalated]
    total = len(measured)
    bins: list[Bin] = []
    ece = 0.0
    for index in range(BINS):
        low, high = index / BINS, (index + 1) / BINS
        inside = [r for r in measured if low <= r.confidence < high or (index == BINS - 1 and r.confidence == 1.0)]  # type: ignore[operator]
        if not inside:
            continue
        mean = sum(r.confidence for r in inside) / len(inside)  # type: ignore[misc]
        accuracy = sum(r.correct for r in inside) / len(inside)
        ece += len(inside) / total * abs(accuracy - mean)
        bins.append(Bin(low, high, len(inside), mean, accuracy))
    accepted = [r for r in scored if not r.escalated]
    escalated = [r for r in scored if r.escalated]
    return Calibration(
        rows=total, ece=ece, bins=tuple(bins),
        accepted=(len(accepted), _accuracy(accepted)), escalated=(len(escalated), _accuracy(escalated)),
        threshold=cheapest_threshold(measured, target) if target is not None else None, target=target,
    )


def cheapest_threshold(rows: Sequence[Scored], target: float) -> tuple[float, int, float] | None:
    """(threshold, rows below it, accuracy of the rows at or above it): the lowest
    threshold whose accepted rows reach `target`; None when no threshold does."""
    for threshold in sorted({0.0, *(r.confidence for r in rows if r.confidence is not None)}):
        kept = [r for r in rows if r.confidence is not None and r.confidence >= threshold]
        accuracy = _accuracy(kept)
        if accuracy is not None and accuracy >= target:
            return threshold, len(rows) - len(kept), accuracy
    return None


def _share(part: tuple[int, float | None]) -> str:
    rows, accuracy = part
    return f"{rows} rows, accuracy {accuracy:.3f}" if accuracy is not None else "0 rows"


def calibration_report(result: Calibration) -> str:
    lines = [
        f"  calibration over {result.rows} rows: expected calibration error {result.ece:.3f} ({BINS} bins)",
        "  confidence    rows  mean conf  accuracy",
    ]
    for b in result.bins:
        lines.append(f"  {b.low:.1f}–{b.high:.1f}  {b.rows:8d}  {b.mean_confidence:9.3f}  {b.accuracy:8.3f}")
    lines.append(f"  accepted: {_share(result.accepted)} · escalated: {_share(result.escalated)}")
    if result.target is not None:
        if result.threshold is None:
            lines.append(f"  no threshold reaches accuracy {result.target:.3f} on the accepted rows")
        else:
            threshold, below, accuracy = result.threshold
            threshold = math.floor(threshold * 1000 + 1e-9) / 1000  # shown rounded down: it still accepts the same rows
            lines.append(
                f"  --target-accuracy {result.target:.3f}: min_confidence={threshold:.3f} escalates {below} of "
                f"{result.rows} rows; the accepted rows' accuracy is {accuracy:.3f}"
            )
    return "\n".join(lines)

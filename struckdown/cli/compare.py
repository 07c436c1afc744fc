"""`sd batch --compare COLUMN[=SLOT]`: a batch's answers against a ground-truth column.

For each comparison: accuracy, per-class precision, recall and F1 (with support),
macro and weighted F1, and Cohen's kappa, computed by scikit-learn (the `stats`
extra: `pip install 'struckdown[stats]'`), over the rows that have both a label and
an answer. Values are compared as labels: trimmed and case-folded, and for a bool
slot `yes/no/true/false/1/0` all read as true or false. Without `=SLOT` the slot is
the one named like the column, else the template's only pick/bool slot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import CliError

#: Slot types whose answers are labels (a kappa means something for them).
LABEL_TYPES = frozenset({"pick", "bool", "boolean", "decide"})
_TRUE = frozenset({"true", "yes", "y", "t", "1"})
_FALSE = frozenset({"false", "no", "n", "f", "0"})


@dataclass(frozen=True)
class Comparison:
    column: str
    slot: str
    slot_type: str


@dataclass(frozen=True)
class Scores:
    rows: int  # rows compared (a label and an answer)
    left_out: int  # rows without a label or without an answer (failed rows included)
    accuracy: float
    macro_f1: float
    weighted_f1: float
    kappa: float | None  # None when fewer than two classes occur
    classes: tuple[tuple[str, float, float, float, int], ...]  # (label, precision, recall, F1, support)


def comparisons(specs: Sequence[str], program: Any, columns: Sequence[str]) -> list[Comparison]:
    """The `--compare` values, checked against the template's slots and the input columns."""
    slots = {slot.key: slot for slot in program.slots() if not slot.is_guard}
    labelled = [s for s in slots.values() if s.type_name in LABEL_TYPES and s.quantifier is None]
    out: list[Comparison] = []
    for spec in specs:
        column, _, slot_key = (part.strip() for part in spec.partition("="))
        if not column:
            raise CliError(f"--compare {spec!r}: give a column, or COLUMN=SLOT")
        if columns and column not in columns:
            raise CliError(f"--compare {column!r}: no such input column (columns: {', '.join(columns)})")
        if not slot_key:
            if column in slots:
                slot_key = column
            elif len(labelled) == 1:
                slot_key = labelled[0].key
            else:
                choices = ", ".join(slots) or "none"
                raise CliError(f"--compare {column!r}: say which slot with {column}=SLOT (slots: {choices})")
        if slot_key not in slots:
            raise CliError(f"--compare {spec!r}: no slot {slot_key!r} in the template (slots: {', '.join(slots)})")
        out.append(Comparison(column, slot_key, slots[slot_key].type_name))
    return out


def kept_cells(
    compared: Sequence[Comparison], row: Mapping[str, Any], entry: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a finished row keeps for the scores: its compared columns, and its answers (with
    their confidences and escalations, SPEC §27, which the calibration reads)."""
    cells = {c.column: row.get(c.column) for c in compared}
    kept: dict[str, Any] = {"ok": entry.get("ok"), "answers": {c.slot: entry.get("answers", {}).get(c.slot) for c in compared}}
    for part in ("confidence", "escalated"):
        if part in entry:
            kept[part] = {c.slot: entry[part].get(c.slot) for c in compared}
    return cells, kept


def label(value: Any, as_bool: bool) -> str | None:
    """A value as a label for comparison; None for a missing one."""
    if value is None:
        return None
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    else:
        text = str(value)
    text = " ".join(text.split()).casefold()
    if not text:
        return None
    if as_bool and text in _TRUE:
        return "true"
    if as_bool and text in _FALSE:
        return "false"
    return text


def score(comparison: Comparison, rows: Sequence[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]]) -> Scores:
    """Compare one slot's answers with one column over the finished rows."""
    as_bool = comparison.slot_type in ("bool", "boolean") or comparison.slot_type == "decide"
    truth: list[str] = []
    answers: list[str] = []
    left_out = 0
    for row, entry in zip(rows, entries):
        expected = label(row.get(comparison.column), as_bool)
        got = label(entry.get("answers", {}).get(comparison.slot), as_bool) if entry.get("ok") else None
        if expected is None or got is None:
            left_out += 1
            continue
        truth.append(expected)
        answers.append(got)
    if not truth:
        raise CliError(f"--compare {comparison.column}: no row has both a label and an answer to compare")
    metrics = _sklearn()
    classes = sorted(set(truth) | set(answers))
    precision, recall, f1, support = metrics.precision_recall_fscore_support(
        truth, answers, labels=classes, zero_division=0
    )
    kappa = float(metrics.cohen_kappa_score(truth, answers)) if len(classes) > 1 else None
    return Scores(
        rows=len(truth),
        left_out=left_out,
        accuracy=float(metrics.accuracy_score(truth, answers)),
        macro_f1=float(metrics.f1_score(truth, answers, labels=classes, average="macro", zero_division=0)),
        weighted_f1=float(metrics.f1_score(truth, answers, labels=classes, average="weighted", zero_division=0)),
        kappa=kappa,
        classes=tuple(
            (name, float(p), float(r), float(f), int(n)) for name, p, r, f, n in zip(classes, precision, recall, f1, support)
        ),
    )


def _sklearn() -> Any:
    try:
        from sklearn import metrics
    except ImportError:
        raise CliError("--compare needs scikit-learn: pip install 'struckdown[stats]'") from None
    return metrics


def report(comparison: Comparison, scores: Scores) -> str:
    """The scores as plain lines (for the terminal and for logs)."""
    kappa = "n/a (one class)" if scores.kappa is None else f"{scores.kappa:.3f}"
    lines = [
        f"compare {comparison.column} with answer {comparison.slot} ({comparison.slot_type}): "
        f"{scores.rows} rows" + (f", {scores.left_out} left out (no label or no answer)" if scores.left_out else ""),
        f"  accuracy {scores.accuracy:.3f} · macro F1 {scores.macro_f1:.3f} · weighted F1 {scores.weighted_f1:.3f} "
        f"· Cohen's kappa {kappa}",
    ]
    width = max(len("class"), *(len(name) for name, *_ in scores.classes))
    lines.append(f"  {'class':<{width}}  precision  recall     F1  support")
    for name, precision, recall, f1, support in scores.classes:
        lines.append(f"  {name:<{width}}  {precision:9.3f}  {recall:6.3f}  {f1:5.3f}  {support:7d}")
    return "\n".join(lines)


def calibration(
    comparison: Comparison, rows: Sequence[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]],
    target: float | None,
) -> str | None:
    """SPEC §27: the calibration of a slot with `confidence=` (None for one without)."""
    from .calibration import Scored, calibrate, calibration_report

    as_bool = comparison.slot_type in ("bool", "boolean", "decide")
    scored: list[Scored] = []
    for row, entry in zip(rows, entries):
        expected = label(row.get(comparison.column), as_bool)
        got = label(entry.get("answers", {}).get(comparison.slot), as_bool) if entry.get("ok") else None
        if expected is None or got is None:
            continue
        confidence = (entry.get("confidence") or {}).get(comparison.slot)
        escalated = (entry.get("escalated") or {}).get(comparison.slot) is not None
        scored.append(Scored(confidence, expected == got, escalated))
    if not any(s.confidence is not None for s in scored):
        return None
    return calibration_report(calibrate(scored, target))


def compare_report(
    specs: Sequence[str], program: Any, rows: Sequence[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]],
    columns: Sequence[str], target: float | None = None,
) -> str:
    """Every `--compare`'s report, one after another (with its calibration, for a slot with
    `confidence=`)."""
    parts = []
    for comparison in comparisons(specs, program, columns):
        parts.append(report(comparison, score(comparison, rows, entries)))
        calibrated = calibration(comparison, rows, entries, target)
        if calibrated is not None:
            parts.append(calibrated)
        elif target is not None:
            parts.append(f"  --target-accuracy: slot {comparison.slot!r} has no confidence (add confidence=logprobs or vote:N)")
    return "\n".join(parts)

"""Template tests and evals (SPEC §23): `sd eval` and `struckdown.evaluate`.

cases.py reads the eval file (positioned errors), expect.py checks answers, runner.py runs
case × model × repeat through the batch, report.py holds the report (JSON, JUnit,
`--baseline`), stats.py the Wilson interval and McNemar test, blame.py `--blame`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .cases import EvalCase, EvalFileError, EvalSuite, load_suite
from .report import CaseReport, Comparison, EvalReport, RunOutcome
from .runner import evaluate_async

__all__ = [
    "CaseReport", "Comparison", "EvalCase", "EvalFileError", "EvalReport", "EvalSuite", "RunOutcome", "evaluate",
    "evaluate_async", "load_suite",
]


def evaluate(
    template: Any,
    cases: Any,
    *,
    models: Any = None,
    repeat: int | None = None,
    concurrency: int = 8,
    min_pass: float = 1.0,
    baseline: Mapping[str, Any] | None = None,
    blame: bool = False,
    judge_models: Mapping[str, Any] | None = None,
    max_runs: int | None = 10_000,
    **run_options: Any,
) -> EvalReport:
    """Run every case × model × repeat of an eval and report pass rates (SPEC §23).

    `template`: a `.sd` path, template text, a Program, or None for the eval file's
    `template:`. `cases`: an eval file's path, a mapping as the file holds, or a list of
    cases. `models`: a list of models (or a mapping label → model); default the file's
    `models:`, else `model=`. `repeat`: default the file's (else 1). `baseline`: a saved
    `to_json()` (parsed) to compare with; `blame=True` re-runs failing cases with gold answers
    put in place. `judge_models`: judge `model:` names → models. `max_runs`: more cases ×
    models × repeats than this is an `InputError` before anything runs (None: no limit).
    Other keywords are run options (`cache` is False unless given).
    """
    from ..sync import run_sync

    return run_sync(lambda: evaluate_async(
        template, cases, models=models, repeat=repeat, concurrency=concurrency, min_pass=min_pass,
        baseline=baseline, blame=blame, judge_models=judge_models, max_runs=max_runs, **run_options,
    ))

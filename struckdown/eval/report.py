"""The eval report (SPEC §23): per case and model the pass rate over repeats with its
Wilson interval, flaky cases, per-slot accuracy, cost and time; JSON and JUnit forms.

Its shape follows pydantic-evals' `EvaluationReport` (cases with named assertions, each a
pass/fail with a reason, and their durations), which cannot be installed beside the pinned
pydantic-ai; `to_json()` is what `--baseline` reads back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .stats import mcnemar, wilson

FORMAT = "struckdown-eval/1"
RUN_ASSERTIONS = ("tools", "halted", "usage")


@dataclass(frozen=True)
class RunOutcome:
    """One run: a case on a model, one repeat."""

    case: str
    model: str
    repeat: int
    assertions: dict[str, str | None]  # assertion → None (passed) or why it failed
    answers: dict[str, Any] = field(default_factory=dict)
    cost: float = 0.0
    judge_cost: float = 0.0
    seconds: float = 0.0
    requests: int = 0
    error: str | None = None  # the run failed (or was not run: the budget was spent)

    @property
    def passed(self) -> bool:
        return self.error is None and all(reason is None for reason in self.assertions.values())


@dataclass(frozen=True)
class CaseReport:
    name: str
    model: str
    runs: int
    passed: int
    assertions: dict[str, tuple[int, int]]  # assertion → (passed, runs)
    failures: tuple[dict[str, Any], ...]
    cost: float
    judge_cost: float
    seconds: float
    runs_detail: tuple[RunOutcome, ...] = ()

    @property
    def pass_rate(self) -> float:
        return self.passed / self.runs if self.runs else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.passed, self.runs)

    @property
    def flaky(self) -> bool:
        return 0 < self.passed < self.runs

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "name": self.name, "model": self.model, "runs": self.runs, "passed": self.passed,
            "pass_rate": round(self.pass_rate, 6), "interval": [round(low, 6), round(high, 6)], "flaky": self.flaky,
            "assertions": {k: {"passed": p, "runs": n} for k, (p, n) in self.assertions.items()},
            "failures": list(self.failures), "cost": round(self.cost, 8), "judge_cost": round(self.judge_cost, 8),
            "seconds": round(self.seconds, 6),
            "runs_detail": [
                {"repeat": r.repeat, "passed": r.passed, "answers": r.answers, "error": r.error, "requests": r.requests,
                 "cost": round(r.cost, 8), "seconds": round(r.seconds, 6)}
                for r in self.runs_detail
            ],
        }


@dataclass(frozen=True)
class Comparison:
    """`--baseline`: each case × model against a saved report (passing = at least min_pass)."""

    changes: dict[tuple[str, str], str]  # (case, model) → regressed | fixed | unchanged | new
    regressed: int
    fixed: int
    p_value: float
    baseline_models: tuple[str, ...] = ()  # the models of the saved report

    @property
    def new(self) -> int:
        """Case × model pairs the baseline does not have (compared with nothing)."""
        return sum(change == "new" for change in self.changes.values())

    def line(self) -> str:
        """`2 regressed, 5 fixed, p = 0.45`; the pairs not in the baseline are counted, and a
        baseline that matches none (saved under another model name) says so, naming the models."""
        if self.changes and self.new == len(self.changes):
            theirs = ", ".join(self.baseline_models) or "none"
            ours = ", ".join(sorted({model for _, model in self.changes}))
            return f"nothing to compare: no case of this run is in the baseline (its models: {theirs}; this run's: {ours})"
        new = f", {self.new} new (not in the baseline)" if self.new else ""
        return f"{self.regressed} regressed, {self.fixed} fixed{new}, p = {self.p_value:.2f}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "regressed": self.regressed, "fixed": self.fixed, "new": self.new, "p_value": round(self.p_value, 6),
            "cases": [{"name": c, "model": m, "change": v} for (c, m), v in self.changes.items()],
        }


@dataclass
class EvalReport:
    template: str
    models: tuple[str, ...]
    repeat: int
    outcomes: list[RunOutcome]
    min_pass: float = 1.0
    slots: tuple[str, ...] = ()  # the template's slot keys, in order (per-slot accuracy reads them)
    budget_stopped: bool = False
    baseline: Comparison | None = None
    blame: Any = None  # blame.BlameReport, with --blame
    cases: list[CaseReport] = field(init=False)

    def __post_init__(self) -> None:
        self.cases = _case_reports(self.outcomes)

    @property
    def pass_rate(self) -> float:
        """The share of every run (case × model × repeat) that passed."""
        return sum(o.passed for o in self.outcomes) / len(self.outcomes) if self.outcomes else 0.0

    @property
    def by_slot(self) -> dict[str, tuple[int, int]]:
        """Per slot, over every model: (runs whose answer passed its checks, runs checked)."""
        return self.slot_accuracy(None)

    def slot_accuracy(self, model: str | None) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for outcome in self.outcomes:
            if model is not None and outcome.model != model:
                continue
            for key, reason in outcome.assertions.items():
                if key in RUN_ASSERTIONS:
                    continue
                counts = out.setdefault(key, [0, 0])
                counts[0] += reason is None and outcome.error is None
                counts[1] += 1
        rank = {k: i for i, k in enumerate(self.slots)}
        return {k: (v[0], v[1]) for k, v in sorted(out.items(), key=lambda kv: rank.get(kv[0], len(rank)))}

    def failing(self) -> list[CaseReport]:
        """Cases that pass less often than `min_pass` (the CLI exits 1 on any)."""
        return [c for c in self.cases if c.pass_rate < self.min_pass - 1e-12]

    def summary(self, model: str) -> dict[str, Any]:
        mine = [c for c in self.cases if c.model == model]
        runs = [o for o in self.outcomes if o.model == model]
        return {
            "cases": len(mine), "passing": sum(c.pass_rate >= self.min_pass - 1e-12 for c in mine),
            "flaky": sum(c.flaky for c in mine), "runs": len(runs), "passed_runs": sum(o.passed for o in runs),
            "cost": round(sum(o.cost for o in runs), 8), "judge_cost": round(sum(o.judge_cost for o in runs), 8),
            "seconds": round(sum(o.seconds for o in runs), 6),
            "by_slot": {k: {"passed": p, "runs": n} for k, (p, n) in self.slot_accuracy(model).items()},
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT, "template": self.template, "models": list(self.models), "repeat": self.repeat,
            "min_pass": self.min_pass, "pass_rate": round(self.pass_rate, 6), "budget_stopped": self.budget_stopped,
            "cases": [c.to_dict() for c in self.cases],
            "by_slot": {k: {"passed": p, "runs": n} for k, (p, n) in self.by_slot.items()},
            "summary": {m: self.summary(m) for m in self.models},
        }
        if self.baseline is not None:
            out["baseline"] = self.baseline.to_dict()
        if self.blame is not None:
            out["blame"] = self.blame.to_dict()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"

    def to_junit(self) -> str:
        """JUnit XML: one testcase per case × model (a failure below `min_pass`, flaky ones noted)."""
        import xml.etree.ElementTree as ET

        failing = {(c.name, c.model) for c in self.failing()}
        root = ET.Element("testsuites", name="sd eval", tests=str(len(self.cases)), failures=str(len(failing)))
        for model in self.models:
            mine = [c for c in self.cases if c.model == model]
            suite = ET.SubElement(
                root, "testsuite", name=f"{self.template} [{model}]", tests=str(len(mine)),
                failures=str(sum((c.name, c.model) in failing for c in mine)), errors="0", skipped="0",
                time=f"{sum(c.seconds for c in mine):.3f}",
            )
            for case in mine:
                element = ET.SubElement(suite, "testcase", classname=f"{self.template}.{model}", name=case.name,
                                        time=f"{case.seconds:.3f}")
                low, high = case.interval
                note = f"passed {case.passed}/{case.runs} (95 % CI {low:.2f}–{high:.2f})"
                if (case.name, case.model) in failing:
                    failure = ET.SubElement(element, "failure", message=f"{note}, below min-pass {self.min_pass:g}")
                    failure.text = "\n".join(
                        f"repeat {f['repeat']}: {f['assertion']}: {f['reason']}" for f in case.failures
                    )
                out = ET.SubElement(element, "system-out")
                out.text = note + (" flaky" if case.flaky else "")
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _case_reports(outcomes: Sequence[RunOutcome]) -> list[CaseReport]:
    groups: dict[tuple[str, str], list[RunOutcome]] = {}
    for outcome in outcomes:
        groups.setdefault((outcome.case, outcome.model), []).append(outcome)
    reports: list[CaseReport] = []
    for (name, model), runs in groups.items():
        runs = sorted(runs, key=lambda o: o.repeat)
        assertions: dict[str, tuple[int, int]] = {}
        failures: list[dict[str, Any]] = []
        for run in runs:
            if run.error is not None:
                failures.append({"repeat": run.repeat, "assertion": "run", "reason": run.error})
            for key, reason in run.assertions.items():
                passed, total = assertions.get(key, (0, 0))
                assertions[key] = (passed + (reason is None and run.error is None), total + 1)
                if reason is not None:
                    failures.append({"repeat": run.repeat, "assertion": key, "reason": reason})
        reports.append(CaseReport(
            name, model, len(runs), sum(r.passed for r in runs), assertions, tuple(failures),
            sum(r.cost for r in runs), sum(r.judge_cost for r in runs), sum(r.seconds for r in runs), tuple(runs),
        ))
    return reports


def compare(report: EvalReport, old: Mapping[str, Any]) -> Comparison:
    """Regressed / fixed / unchanged per case × model against a saved `to_json()`; the exact
    McNemar test over the pairs found in both (a case only in the new run is `new`)."""
    if old.get("format") != FORMAT or not isinstance(old.get("cases"), list):
        raise ValueError(f"not a saved `sd eval --json` report (format {FORMAT})")
    before: dict[tuple[str, str], bool] = {}
    for item in old["cases"]:
        before[(str(item["name"]), str(item["model"]))] = float(item["pass_rate"]) >= report.min_pass - 1e-12
    changes: dict[tuple[str, str], str] = {}
    regressed = fixed = 0
    for case in report.cases:
        now = case.pass_rate >= report.min_pass - 1e-12
        was = before.get((case.name, case.model))
        if was is None:
            changes[(case.name, case.model)] = "new"
        elif was and not now:
            changes[(case.name, case.model)] = "regressed"
            regressed += 1
        elif now and not was:
            changes[(case.name, case.model)] = "fixed"
            fixed += 1
        else:
            changes[(case.name, case.model)] = "unchanged"
    models = tuple(str(m) for m in old.get("models") or ()) or tuple(sorted({str(i["model"]) for i in old["cases"]}))
    return Comparison(changes, regressed, fixed, mcnemar(regressed, fixed), models)

"""`sd eval TEMPLATE…`: run a template's tests (`NAME.eval.yaml` beside it) and report (SPEC §23).

Exit codes: 0 every case passes at least `--min-pass` of its repeats, 1 one does not (or a
run failed, or the budget stopped the eval), 2 bad input (the eval file, the template, a
flag), found before any request.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..wording import counted
from .errors import EXIT_ERROR, EXIT_OK, CliError, reporting_errors
from .options import RUN_COMMAND_FLAGS, run_flags

EVAL_FLAGS = tuple(name for name in RUN_COMMAND_FLAGS if name != "no_cache") + ("max_requests",)


def cases_file(template: Path) -> Path:
    """`triage.sd` → `triage.eval.yaml` beside it (`.eval.yml` also)."""
    for suffix in (".eval.yaml", ".eval.yml"):
        candidate = template.with_name(template.stem + suffix)
        if candidate.exists():
            return candidate
    raise CliError(f"{template}: no {template.stem}.eval.yaml beside it; write one (docs/eval.md) or give --cases FILE")


@run_flags(*EVAL_FLAGS)
def command(
    templates: Annotated[list[Path], typer.Argument(help="The .sd templates to test.", show_default=False)],
    cases: Annotated[
        Optional[Path], typer.Option("--cases", metavar="FILE", help="The eval file (default: NAME.eval.yaml beside "
                                     "the template; one template only).", show_default=False)
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Runs at once.")] = 8,
    repeat: Annotated[
        Optional[int], typer.Option("--repeat", min=1, help="Run every case N times (default: the file's, else 1).",
                                    show_default=False)
    ] = None,
    min_pass: Annotated[
        float, typer.Option("--min-pass", min=0.0, max=1.0, help="Exit 1 when a case passes less often than this.")
    ] = 1.0,
    json_out: Annotated[
        Optional[Path], typer.Option("--json", metavar="FILE", help="Write the report as JSON (what --baseline reads).",
                                     show_default=False)
    ] = None,
    junit: Annotated[
        Optional[Path], typer.Option("--junit", metavar="FILE", help="Write JUnit XML: one testcase per case × model.",
                                     show_default=False)
    ] = None,
    baseline: Annotated[
        Optional[Path], typer.Option("--baseline", metavar="OLD.json",
                                     help="Compare with a saved --json report: regressed / fixed / unchanged, McNemar.",
                                     show_default=False)
    ] = None,
    blame: Annotated[
        bool, typer.Option("--blame", help="Re-run failing cases with gold answers put in place of earlier slots.")
    ] = False,
    cache: Annotated[bool, typer.Option("--cache", help="Use the response cache (off by default: repeats must ask).")] = False,
    approve: Annotated[
        Optional[str], typer.Option("--approve", metavar="all|none", show_default=False, help=(
            "Decide every tool call that needs approval: all allows, none denies. Default: such a call fails "
            "its run (a paused run is not an answer)."))
    ] = None,
    max_runs: Annotated[
        int, typer.Option("--max-runs", min=1, metavar="N",
                          help="Refuse an eval of more runs (cases × models × repeats) than this, before any call.")
    ] = 10_000,
    *,
    flags: dict[str, Any],
) -> None:
    """Test templates against their eval files: pass rates over repeats, baselines, per-slot blame."""
    with reporting_errors():
        from .approval_cmd import approve_flag

        decided = approve_flag(approve)  # all | none, before any request
        code = run_eval(templates, cases, jobs, repeat, min_pass, json_out, junit, baseline, blame, cache, flags,
                        max_runs, approve=decided)  # fmt: skip
    raise typer.Exit(code)


def run_eval(
    templates: list[Path], cases: Path | None, jobs: int, repeat: int | None, min_pass: float, json_out: Path | None,
    junit: Path | None, baseline: Path | None, blame: bool, cache: bool, flags: dict[str, Any],
    max_runs: int = 10_000, approve: bool | None = None,
) -> int:
    from ..eval import load_suite
    from ..eval.cases import check_slots, count_runs
    from . import loading
    from .io import load_mapping_file
    from .keywords import run_keywords

    if not templates:
        raise CliError("give a template: sd eval triage.sd")
    if len(templates) > 1 and (cases or json_out or junit or baseline):
        raise CliError("--cases, --json, --junit and --baseline take one template; run sd eval once per template")
    # everything checked before any request: the files, the templates, the slots named
    plans = []
    for template in templates:
        eval_file = cases if cases is not None else cases_file(template)
        suite = load_suite(eval_file)
        program = loading.load_program(template, tuple(flags.get("include_path") or ()))
        check_slots(suite, program.keys, template.name)
        model_count = 1 if flags.get("model") else len(suite.models) or 1
        count_runs(suite, model_count, repeat or suite.repeat, max_runs)  # SPEC §30: before any call
        plans.append((template, suite, program, _models(suite, flags, eval_file)))
    old = load_mapping_file(baseline) if baseline is not None else None
    if old is not None:
        from ..eval.report import FORMAT

        if old.get("format") != FORMAT or not isinstance(old.get("cases"), list):
            raise CliError(f"--baseline {baseline}: not a report written by sd eval --json (format {FORMAT})")
    keywords = run_keywords(flags)
    keywords["cache"] = cache
    if approve is not None:  # SPEC §12: --approve all|none decides every call that needs approval
        keywords["approve"] = approve
    code = EXIT_OK
    for template, suite, program, models in plans:
        report = _run_one(template, suite, program, models, jobs, repeat, min_pass, old, blame, keywords, max_runs)
        sys.stdout.write(render(report))
        if json_out is not None:
            from .io import write_text_file

            write_text_file(json_out, report.to_json())
        if junit is not None:
            from .io import write_text_file

            write_text_file(junit, report.to_junit())
        if report.failing() or report.budget_stopped:
            code = EXIT_ERROR
    return code


def _models(suite: Any, flags: dict[str, Any], eval_file: Path) -> dict[str, Any]:
    """The models under test (label → model string, None for the default), each resolved now
    with the judges' models: a model that cannot be used is one input error before any
    request (exit 2), not a failure in every run."""
    from ..environment import default_environment
    from ..errors import ConfigurationError

    names = [flags["model"]] if flags.get("model") else list(suite.models) or [None]
    judges = {e.judge[1] for case in suite.cases for e in case.expect.values() if e.judge is not None} - {None}
    environment = default_environment()
    under_test = "--model: " if flags.get("model") else f"{eval_file}: models: " if suite.models else ""
    for where, chosen in ((under_test, names), (f"{eval_file}: judge model: ", sorted(judges))):
        for model in chosen:
            try:
                environment.resolve_model(model)
            except ConfigurationError as exc:
                raise CliError(f"{where}{exc}") from None
    return {name or "default": name for name in names}


def _run_one(
    template: Path, suite: Any, program: Any, models: dict[str, Any], jobs: int, repeat: int | None,
    min_pass: float, old: Any, blame: bool, keywords: dict[str, Any], max_runs: int = 10_000,
) -> Any:
    from ..eval.runner import evaluate_async
    from ..sync import run_sync
    from .display import make_console
    from .progress import BatchProgress

    keywords = {k: v for k, v in keywords.items() if k != "model"}
    console = make_console(sys.stderr)
    progress: list[Any] = []

    def start(total: int) -> None:
        progress.append(BatchProgress(console, total, 0, label="eval", unit="runs").__enter__())

    def row(ok: bool) -> None:
        progress[0].advance(ok)

    try:
        return run_sync(lambda: evaluate_async(
            program, suite, models=models, repeat=repeat, concurrency=jobs, min_pass=min_pass, baseline=old,
            blame=blame, on_start=start, on_row=row, template_path=str(template), max_runs=max_runs, **keywords,
        ))
    finally:
        if progress:
            progress[0].__exit__(None, None, None)


def render(report: Any) -> str:
    """The report as text: per model its cases (pass rate, interval, cost, time, failures),
    per-slot accuracy and a one-line summary; then the baseline and blame."""
    lines: list[str] = []
    failing = {(c.name, c.model) for c in report.failing()}
    width = max((len(c.name) for c in report.cases), default=4)
    for model in report.models:
        lines.append(f"{report.template} · {model}")
        for case in (c for c in report.cases if c.model == model):
            mark = "✗" if (case.name, model) in failing else ("~" if case.flaky else "✓")
            low, high = case.interval
            flaky = "  flaky" if case.flaky else ""
            lines.append(
                f"  {mark} {case.name:<{width}}  {case.passed}/{case.runs}  {case.pass_rate * 100:3.0f} %  "
                f"[{low * 100:.0f}–{high * 100:.0f} %]  ${case.cost:.4f}  {case.seconds:.2f} s{flaky}"
            )
            if (case.name, model) in failing or case.flaky:
                for failure in case.failures:
                    lines.append(f"      repeat {failure['repeat']}: {failure['assertion']}: {failure['reason']}")
        accuracy = report.slot_accuracy(model)
        if accuracy:
            lines.append("  slots: " + ", ".join(
                f"{key} {p}/{n} ({p * 100 / n:.0f} %)" for key, (p, n) in accuracy.items() if n
            ))
        s = report.summary(model)
        judge = f" (judge ${s['judge_cost']:.4f})" if s["judge_cost"] else ""
        lines.append(
            f"{model}: {s['passing']}/{s['cases']} cases pass, {s['flaky']} flaky, {s['passed_runs']}/{s['runs']} runs, "
            f"${s['cost']:.4f}{judge}, {s['seconds']:.2f} s"
        )
    if report.budget_stopped:
        lines.append("the budget was spent: runs not started count as failed")
    if any(str(run.error or "").startswith("Paused: ") for run in report.outcomes):
        lines.append("a run paused for a tool call that needs approval (it failed): --approve all|none decides them")
    if report.baseline is not None:
        lines.append(f"baseline: {report.baseline.line()}")
        for (name, model), change in report.baseline.changes.items():
            if change in ("regressed", "fixed"):
                lines.append(f"  {change}: {name} ({model})")
    if report.blame is not None:
        lines.append("blame:" if report.blame.wrong else "blame: no failing case with gold for more than one slot")
        lines.extend(f"  {line}" for line in report.blame.lines())
        skipped = f", {report.blame.skipped} not run: the budget was spent" if report.blame.skipped else ""
        skipped += f", {report.blame.failed} failed" if report.blame.failed else ""
        lines.append(
            f"  {counted(report.blame.reruns, 're-run')}, {counted(report.blame.requests, 'request')}, "
            f"${report.blame.cost:.4f}{skipped}"
        )
    return "\n".join(lines) + "\n"

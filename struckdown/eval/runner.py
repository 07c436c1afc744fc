"""`sd.evaluate`: every case × model × repeat through the batch (SPEC §23).

The runs of one model are one `complete_batch_iter_async` (its concurrency, its request
limiter and its budget). The models of the matrix run beside each other, sharing the
concurrency; with `max_cost` they run one after another, each with what is left of it.
The response cache is off unless `cache=` says otherwise (a cached answer would make every
repeat the same). A guard's halt is an outcome here (`on_halt="return"`), so
`halted:` can be checked. Judges run after the answers, beside each other, and their cost
is kept apart from the template's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cases import MAX_RUNS, EvalCase, EvalSuite, check_slots, count_runs, load_suite, suite_from_data
from .expect import MISSING, check_answer, check_halted, check_tools, check_usage
from .report import EvalReport, RunOutcome, compare

JUDGE_TEMPLATE = """You grade one answer against a rubric. Reply only with the verdict.

Rubric: {{ rubric }}

Answer:
{{ answer }}

Does the answer meet the rubric? [[bool:passes]]
"""
NOT_RUN = "not run: the budget was spent"


@dataclass(frozen=True)
class Target:
    """One model of the matrix: its label in the report and what `model=` gets."""

    label: str
    model: Any


def read_cases(cases: Any, base: Path | None = None) -> EvalSuite:
    """`cases=`: an eval file's path, an `EvalSuite`, a mapping as the file holds, or a list of cases."""
    if isinstance(cases, EvalSuite):
        return cases
    if isinstance(cases, (str, Path)):
        return load_suite(Path(cases))
    if isinstance(cases, (Mapping, list, tuple)):
        return suite_from_data(cases, base)
    raise TypeError(f"cases= takes an eval file's path, a mapping or a list of cases, not {type(cases).__name__}")


def targets(models: Any, suite: EvalSuite, default: Any) -> list[Target]:
    """The model matrix: `models=` (a list, or a mapping label → model), else the file's, else the run's."""
    if models is None:
        models = list(suite.models) or [default]
    if isinstance(models, Mapping):
        return [Target(str(label), model) for label, model in models.items()]
    if isinstance(models, (str, bytes)) or not isinstance(models, Sequence):
        models = [models]
    out = [Target(_label(model), model) for model in models]
    labels = [t.label for t in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"models= holds two models named alike ({labels}); give a mapping label → model")
    return out


def _label(model: Any) -> str:
    if model is None:
        return "default"
    if isinstance(model, str):
        return model
    return str(getattr(model, "model_name", None) or type(model).__name__)


async def evaluate_async(
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
    on_start: Callable[[int], Any] | None = None,
    on_row: Callable[[bool], Any] | None = None,
    environment: Any = None,
    max_runs: int | None = MAX_RUNS,
    **options: Any,
) -> EvalReport:
    """Run every case × model × repeat and report (see `struckdown.evaluate`)."""
    from ..environment import default_environment

    env = environment or default_environment()
    suite = read_cases(cases)
    program, name = _program(env, template, suite, options)
    check_slots(suite, program.keys, name)
    count = suite.repeat if repeat is None else repeat
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"repeat= must be a whole number of at least 1, not {count!r}")
    if not 0 <= min_pass <= 1:
        raise ValueError(f"min_pass= must be between 0 and 1, not {min_pass!r}")
    options.setdefault("cache", False)
    options.setdefault("on_halt", "return")
    matrix = targets(models, suite, options.pop("model", None))
    count_runs(suite, len(matrix), count, max_runs)  # SPEC §30: before any run is even listed
    budget = options.pop("max_cost", None)
    if on_start is not None:
        on_start(len(matrix) * len(suite.cases) * count)
    jobs = [(case, r) for case in suite.cases for r in range(1, count + 1)]
    outcomes: list[RunOutcome] = []
    results: dict[tuple[str, str, int], Any] = {}
    stopped = False
    spent = 0.0
    contexts = [case.context for case, _ in jobs]

    async def run_model(target: Target, share: int, left: float | None) -> None:
        nonlocal stopped, spent
        keywords: dict[str, Any] = {**options, "model": target.model}
        if left is not None:
            keywords["max_cost"] = left
        rows = env.complete_batch_iter_async(program, contexts, concurrency=share, **keywords)
        pending: list[tuple[EvalCase, int, Any]] = []
        async for index, outcome in rows:
            case, r = jobs[index]
            pending.append((case, r, outcome))
            if on_row is not None:
                on_row(not isinstance(outcome, BaseException))
        judged = await _judge_all(env, pending, target, judge_models or {}, share, options)
        for (case, r, outcome), judge_reasons in zip(pending, judged):
            run = _outcome(case, target.label, r, outcome, judge_reasons)
            stopped = stopped or run.error == NOT_RUN
            spent += run.cost + run.judge_cost
            results[(case.name, target.label, r)] = outcome
            outcomes.append(run)

    if budget is None and len(matrix) > 1:  # the models beside each other, sharing -j
        import anyio

        async with anyio.create_task_group() as tg:
            for target in matrix:
                tg.start_soon(run_model, target, max(1, concurrency // len(matrix)), None)
    else:  # one budget: the models one after another, each with what is left of it
        for target in matrix:
            await run_model(target, concurrency, None if budget is None else max(0.0, budget - spent))
    outcomes.sort(key=lambda o: ([t.label for t in matrix].index(o.model), _case_rank(suite, o.case), o.repeat))
    report = EvalReport(name, tuple(t.label for t in matrix), count, outcomes, min_pass, tuple(program.keys), stopped)
    if baseline is not None:
        report.baseline = compare(report, baseline)
    if blame:
        from .blame import blame_failures

        left = None if budget is None else max(0.0, budget - spent)
        report.blame = await blame_failures(env, program, suite, report, results, matrix, options, concurrency, left)
    return report


def _case_rank(suite: EvalSuite, name: str) -> int:
    return next(i for i, case in enumerate(suite.cases) if case.name == name)


def _program(env: Any, template: Any, suite: EvalSuite, options: dict[str, Any]) -> tuple[Any, str]:
    """The Program to test and its name in the report: `template` (a path, text or Program), else the file's."""
    from ..plan import Program

    if template is None:
        if suite.template is None:
            raise ValueError("no template: give one, or `template:` in the eval file")
        template = suite.template
    if isinstance(template, Program):
        given = options.get("template_path")
        return template, Path(given).name if given else "<template>"
    path = Path(template) if isinstance(template, Path) or (isinstance(template, str) and "\n" not in template
                                                             and template.endswith(".sd")) else None
    if path is not None:
        from ..errors import InputError

        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{path}: cannot read the template: {exc.strerror or exc}") from None
        options.setdefault("template_path", str(path))
        return env.program(text, options), path.name
    return env.program(template, options), "<template>"


def _outcome(case: EvalCase, model: str, repeat: int, outcome: Any, judged: Mapping[str, str | None]) -> RunOutcome:
    from ..errors import BudgetExceeded, describe_error

    if isinstance(outcome, BaseException):
        partial = outcome.results if isinstance(outcome, BudgetExceeded) else None
        usage = partial.usage if partial is not None else None
        never_ran = isinstance(outcome, BudgetExceeded) and outcome.scope == "batch"
        error = NOT_RUN if never_ran else describe_error(outcome)
        return RunOutcome(case.name, model, repeat, {k: error for k in case.expect}, {}, _cost(usage), 0.0, 0.0,
                          int(getattr(usage, "requests", 0) or 0), error)
    result = outcome
    usage = result.usage
    seconds = sum(slot.elapsed_ms for slot in result.results.values()) / 1000
    calls = [call for slot in result.results.values() for call in slot.tool_calls]
    assertions: dict[str, str | None] = {}
    for key, expectation in case.expect.items():
        if key == "tools":
            assertions[key] = check_tools(expectation, calls)
        elif key == "halted":
            assertions[key] = check_halted(expectation, result.halted)
        elif key == "usage":
            assertions[key] = check_usage(expectation, usage.requests, usage.cost, seconds)
        else:
            answer = result[key] if key in result.results else MISSING
            reason = check_answer(expectation, answer)
            assertions[key] = reason if reason is not None else judged.get(key)
    judge_cost = float(judged.get("__cost__") or 0.0)
    return RunOutcome(case.name, model, repeat, assertions, result.to_dict(), _cost(usage), judge_cost, seconds,
                      usage.requests)


def _cost(usage: Any) -> float:
    cost = getattr(usage, "cost", None)
    return float(cost) if cost is not None else 0.0


async def _judge_all(
    env: Any, pending: Sequence[tuple[EvalCase, int, Any]], target: Target, judge_models: Mapping[str, Any],
    concurrency: int, options: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Each run's judge verdicts (key → None or why not), beside each other; `__cost__` their cost."""
    import anyio

    verdicts: list[dict[str, Any]] = [{} for _ in pending]
    work = [
        (i, key, expectation.judge)
        for i, (case, _, outcome) in enumerate(pending) if not isinstance(outcome, BaseException)
        for key, expectation in case.expect.items()
        if expectation.judge is not None and key in outcome.results and check_answer(expectation, outcome[key]) is None
    ]  # a judge is asked only when the answer passes the expectation's other checks
    if not work:
        return verdicts
    limiter = anyio.CapacityLimiter(concurrency)
    program = env.parse(JUDGE_TEMPLATE)

    async def judge(i: int, key: str, rubric: str, model_name: str | None) -> None:
        from ..codec import jsonable

        answer = pending[i][2][key]
        model = target.model if model_name is None else judge_models.get(model_name, model_name)
        text = answer if isinstance(answer, str) else str(jsonable(answer))
        try:
            async with limiter:
                result = await env.complete_async(
                    program, {"rubric": rubric, "answer": text}, model=model, cache=options.get("cache", False),
                )
        except Exception as exc:  # noqa: BLE001 - the judge's failure fails this check, not the eval
            from ..errors import describe_error
            from ..run.accounting import usage_of

            # the judge's template is ours, not the user's: its slot is not named
            verdicts[i][key] = f"the judge ({_label(model)}) failed: {describe_error(exc, name_slot=False)}"
            verdicts[i]["__cost__"] = float(verdicts[i].get("__cost__") or 0.0) + _cost(usage_of(exc))
            return
        verdicts[i][key] = None if result["passes"] is True else f"the judge ({_label(model)}) says it does not meet: {rubric}"
        verdicts[i]["__cost__"] = float(verdicts[i].get("__cost__") or 0.0) + _cost(result.usage)

    async with anyio.create_task_group() as tg:
        for i, key, (rubric, model_name) in (item for item in work if item[2] is not None):
            tg.start_soon(judge, i, key, rubric, model_name)
    return verdicts

"""The run-level side of budgets and usage (SPEC §13, issue 23 "usage that is the bill"):
what is checked before a run's first model call, and what a failed run hands back."""

from __future__ import annotations

from typing import Any

from ..errors import BudgetExceeded, StruckdownError
from ..results import Result, Usage
from ..run_options import option_value
from ..syntax.nodes import JinjaValue

#: The attribute a run's error carries its usage in: every request the run made.
USAGE_ATTR = "struckdown_usage"


def check_run(run: Any) -> None:
    """Before any model call: with `max_cost`, every model the run may use (its default
    and the slots' static `model=`) has a price."""
    program = run.program
    models: list[Any] = []
    for plan in program.plans.values():
        model = plan.settings.get("model")
        if isinstance(model, str) and not isinstance(model, JinjaValue):
            models.append(model)
    ledger = run.ledger
    if ledger.budget is not None and ledger.budget.max_cost is not None:
        ledger.check_prices([run.model_for(None), *(run.model_for(name) for name in _distinct(models))])


def so_far(run: Any, error: BaseException) -> Result:
    """The Result of a run that failed: the slots that finished, and in its usage every
    request the run made (those of slots the error cut off included). A `BudgetExceeded`
    keeps it as `.results`; struckdown's other errors carry its usage as `struckdown_usage`."""
    cut_off = run.ledger.cut_off()
    result = Result(run.results, run.program.keys, discarded=cut_off)
    if isinstance(error, BudgetExceeded):
        error.keep(run.results, run.program.keys, cut_off)
    elif isinstance(error, StruckdownError):  # a foreign error passes through as it is (a note only)
        setattr(error, USAGE_ATTR, result.usage)
    return result


def usage_of(outcome: Any) -> Usage | None:
    """A run's usage from its outcome: a Result's, or what its error carries (None if nothing)."""
    if isinstance(outcome, Result):
        return outcome.usage
    if isinstance(outcome, BudgetExceeded):
        return outcome.results.usage
    usage = getattr(outcome, USAGE_ATTR, None)
    return usage if isinstance(usage, Usage) else None


def batch_budget(environment: Any, program: Any, options: Any, batch_limits: Any) -> tuple[Any, Any]:
    """A local batch's shared account (None without a batch budget) and the options its rows
    get: `max_cost` of `complete_batch` is the whole batch's, not each row's. With
    `max_cost`, every model the batch may use must have a known price (before any row)."""
    from .ledger import BatchLedger, Budget

    budget, rows = Budget.for_batch(options, batch_limits)
    if budget is None:
        return None, options
    check_batch_prices(environment, program, options, budget)
    return BatchLedger(budget), rows


def check_batch_prices(environment: Any, program: Any, options: Any, budget: Any, *, here: bool = False) -> None:
    """With a batch's `max_cost`, every model its rows may use (the default and the slots'
    static `model=`) must have a known price: a `ConfigurationError` before any row. The
    same check on a Dask worker (`distributed.worker.probe_prices`), whose environment
    resolves the model; `here=True` (the caller of a Dask batch, before its cluster starts)
    checks only the models this process can resolve and leaves the rest to the workers."""
    from ..models.pricing import Pricing
    from .ledger import RunLedger

    if budget.max_cost is None or not program.needs_model:
        return
    prices = option_value("prices", options, environment.defaults)
    ledger = RunLedger(_no_events, budget=budget, pricing=Pricing(prices))
    models = [option_value("model", options, environment.defaults)]
    models += [p.settings["model"] for p in program.plans.values() if isinstance(p.settings.get("model"), str)]
    resolved = []
    for name in _distinct(models):
        try:
            resolved.append(environment.resolve_model(name))
        except Exception:
            if not here:
                raise
    ledger.check_prices(resolved)


async def _no_events(event: Any) -> None:
    return None


def _distinct(items: list[Any]) -> list[Any]:
    """In order, each object once (models need not be hashable)."""
    seen: set[int] = set()
    return [x for x in items if not (id(x) in seen or seen.add(id(x)))]  # type: ignore[func-returns-value]

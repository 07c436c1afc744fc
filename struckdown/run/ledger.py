"""The usage ledger (SPEC §13): every model request a run makes, metered once.

`MeteredModel` is the innermost wrapper around the provider model: the response
cache sits outside it (a hit never reaches it), and so do retries and fallback,
so each attempt they make is one request here. For each request it

* checks the run's request limit *before* sending (so it is never exceeded),
* prices the response (`pricing.Pricing`), adds it to the slot's and the run's
  account (and the batch's, for a batch row), yields `ModelResponded`,
* checks the token and cost limits *after* the response.

A run's `RunLedger` holds one `SlotMeter` per slot run; the meter of the slot run in
progress is the `meter` of its `SlotRun` (run/slot_run.py, set around `agent.run`, like
the tool and cache state), and `run/wrappers/metered.MeteredModel` meters with it. A
slot cut off by a halt, an error or a cancellation keeps its meter, so its requests
still count in the run's usage ("usage that is the bill").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic_ai.messages import ModelResponse

from ..errors import BudgetExceeded, ConfigurationError
from ..incremental import ModelResponded
from ..models import note_served_name
from ..models.pricing import Pricing, format_cost
from ..results import Usage
from ..wording import counted

Emit = Callable[[Any], Awaitable[None]]

#: The names of the limits a budget may set, as `BudgetExceeded.limit` reports them.
TOKEN_LIMITS = ("input_tokens_limit", "output_tokens_limit", "total_tokens_limit")


@dataclass(frozen=True)
class Budget:
    """Run-wide or batch-wide limits: those of a `UsageLimits`, plus `max_cost` in USD."""

    request_limit: int | None = None
    tool_calls_limit: int | None = None
    input_tokens_limit: int | None = None
    output_tokens_limit: int | None = None
    total_tokens_limit: int | None = None
    max_cost: float | None = None

    @classmethod
    def for_run(cls, options: Mapping[str, Any]) -> Budget | None:
        """A run's budget: `run_limits=` and `max_cost=` of its (merged) options."""
        return cls.of(options.get("run_limits"), options.get("max_cost"), "run_limits")

    @classmethod
    def for_batch(cls, options: Mapping[str, Any], batch_limits: Any) -> tuple[Budget | None, dict[str, Any]]:
        """A batch call's budget and the options each row runs with. `max_cost=` given to a
        batch is the whole batch's, as `batch_limits=` is (SPEC §13), so the rows do not get
        it: the one place that tells a batch's `max_cost` from a run's (local rows, `--workers`
        and Dask alike)."""
        rows = {k: v for k, v in options.items() if k != "max_cost"}
        return cls.of(batch_limits, options.get("max_cost"), "batch_limits"), rows

    @classmethod
    def of(cls, limits: Any, max_cost: Any, what: str) -> Budget | None:
        """`run_limits=`/`batch_limits=` (a pydantic-ai `UsageLimits`) and `max_cost=`; None when neither is set."""
        if limits is None and max_cost is None:
            return None
        cost = _usd(max_cost, "max_cost")
        if limits is not None:
            for name in ("request_limit", "tool_calls_limit", *TOKEN_LIMITS):
                if not hasattr(limits, name):
                    raise ConfigurationError(f"{what}= must be a pydantic_ai.usage.UsageLimits, not {type(limits).__name__}")
            limit_cost = _usd(getattr(limits, "cost_limit", None), f"{what}.cost_limit")
            if limit_cost is not None:
                cost = limit_cost if cost is None else min(cost, limit_cost)
        return cls(
            getattr(limits, "request_limit", None),
            getattr(limits, "tool_calls_limit", None),
            getattr(limits, "input_tokens_limit", None),
            getattr(limits, "output_tokens_limit", None),
            getattr(limits, "total_tokens_limit", None),
            cost,
        )


def _usd(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)) or not value >= 0:
        raise ConfigurationError(f"{what} must be a non-negative number of US dollars, not {value!r}")
    return float(value)


@dataclass
class Account:
    """Running totals (mutable); `unpriced` counts responses whose price is unknown."""

    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_saved: float | None = None

    def add(self, input_tokens: int, output_tokens: int, cost: float | None, cache: Usage | None = None) -> None:
        """One response's tokens and price (its request was counted when it was sent); `cache`:
        its prompt-cache tokens and saving (SPEC §24)."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if cost is None:
            self.unpriced += 1
        else:
            self.cost += cost
        if cache is not None:
            self.cache_read_tokens += cache.cache_read_tokens
            self.cache_write_tokens += cache.cache_write_tokens
            if cache.cache_saved is not None:
                self.cache_saved = (self.cache_saved or 0.0) + cache.cache_saved

    def usage(self, *, tool_calls: int | None = None) -> Usage:
        """The totals as a `Usage` (`tool_calls`: counted elsewhere, e.g. by the slot's runs)."""
        cost = None if self.unpriced else self.cost
        return Usage(
            self.requests, self.tool_calls if tool_calls is None else tool_calls, self.input_tokens, self.output_tokens, cost,
            self.cache_read_tokens, self.cache_write_tokens, self.cache_saved,
        )

    def over(self, budget: Budget, *, spent: bool) -> tuple[str, str] | None:
        """The first limit these totals cross (`spent`: reach, for a batch), with its message."""
        def past(used: float, limit: float | None) -> bool:
            return limit is not None and (used >= limit if spent else used > limit)

        tokens = {
            "input_tokens_limit": (self.input_tokens, "input token"),
            "output_tokens_limit": (self.output_tokens, "output token"),
            "total_tokens_limit": (self.input_tokens + self.output_tokens, "token"),
        }
        if spent and past(self.requests, budget.request_limit):
            return "request_limit", f"the request_limit of {counted(budget.request_limit or 0, 'request')} is reached"
        if spent and past(self.tool_calls, budget.tool_calls_limit):
            return "tool_calls_limit", f"the tool_calls_limit of {counted(budget.tool_calls_limit or 0, 'tool call')} is reached"
        for name, (used, label) in tokens.items():
            limit = getattr(budget, name)
            if past(used, limit):
                if spent and used == limit:
                    return name, f"the {name} of {counted(limit, label)} is reached"
                return name, f"{counted(used, label)} used, over the {name} of {limit:,}"
        if budget.max_cost is not None and self.unpriced:  # a cost budget that cannot be counted stops
            unpriced = counted(self.unpriced, "response")
            return "max_cost", f"{unpriced} could not be priced, so max_cost cannot be counted"
        if past(self.cost, budget.max_cost):
            if spent and self.cost == budget.max_cost:
                return "max_cost", f"max_cost={budget.max_cost:g} USD is reached ({format_cost(self.cost)} spent)"
            return "max_cost", f"{format_cost(self.cost)}, over max_cost={budget.max_cost:g} USD"
        return None


class BatchLedger:
    """What the rows of one batch spent together; a row may start only while it is not spent."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.total = Account()

    def spent(self) -> BudgetExceeded | None:
        """The error an unstarted row gets once the budget is spent (None while it is not)."""
        over = self.total.over(self.budget, spent=True)
        if over is None:
            return None
        limit, message = over
        return BudgetExceeded(limit, f"batch budget spent: {message}; this row was not run", scope="batch")


class RunLedger:
    """One run's account: its slot meters, its limits, its prices."""

    def __init__(
        self,
        emit: Emit,
        *,
        budget: Budget | None = None,
        pricing: Pricing | None = None,
        batch: BatchLedger | None = None,
        requests: Any = None,
    ) -> None:
        self.emit = emit
        self.budget = budget
        #: The cap on requests in flight (`max_requests`: an anyio.CapacityLimiter shared by the
        #: run's, or the batch's, requests), held by the meter around each real request: a
        #: pydantic-ai capability would cost every row's run context a copy per hook.
        self.requests = requests
        self.pricing = pricing or _default_pricing()
        self.batch = batch
        self.total = Account()
        self.meters: list[SlotMeter] = []

    def carry(self, spent: Usage) -> None:
        """A resumed run: what its part before the pause spent counts against its budget."""
        total = self.total
        total.requests += spent.requests
        total.tool_calls += spent.tool_calls
        # a part priced before counts its cost; one that had no price (no prices= then) counts its
        # requests and tokens only: a max_cost first given at resume starts from there (docs/budgets.md)
        total.add(spent.input_tokens, spent.output_tokens, spent.cost if spent.cost is not None else 0.0, spent)

    def meter(self, slot: str) -> SlotMeter:
        meter = SlotMeter(self, slot)
        self.meters.append(meter)
        return meter

    def cut_off(self) -> Usage:
        """What the slot runs that never finished spent (a halt, an error, a cancellation)."""
        total = Usage()
        for meter in self.meters:
            if not meter.finished:
                total = total + meter.account.usage()
        return total

    def check_prices(self, models: list[Any]) -> None:
        """With `max_cost`, every model the run may use must have a known price (before any call)."""
        if self.budget is None or self.budget.max_cost is None:
            return
        for model in models:
            if not self.pricing.knows(model):
                raise ConfigurationError(
                    f"max_cost is set but the price of model {_name(model)!r} is unknown, so the budget cannot be "
                    f"enforced; give it with prices={{{_name(model)!r}: {{'input': USD, 'output': USD}}}} "
                    "(USD per million tokens; CLI --prices FILE)"
                )

    def _raise(self, over: tuple[str, str]) -> None:
        limit, message = over
        raise BudgetExceeded(limit, f"run budget spent: {message}")


_DEFAULT_PRICING: list[Pricing] = []


def _default_pricing() -> Pricing:
    """genai-prices alone, shared by every run without `prices=` (it remembers unknown models)."""
    if not _DEFAULT_PRICING:
        _DEFAULT_PRICING.append(Pricing())
    return _DEFAULT_PRICING[0]


def _name(model: Any) -> str:
    return str(getattr(model, "model_name", None) or type(model).__name__)


def _finish_reason(response: Any) -> str | None:
    reason = getattr(response, "finish_reason", None)
    return None if reason is None else str(reason)


@dataclass
class SlotMeter:
    """One slot run's share of the ledger."""

    ledger: RunLedger
    slot: str
    account: Account = field(default_factory=Account)
    finished: bool = False

    def before_request(self) -> None:
        """Reserve one request of the run's request limit, or raise if none is left."""
        ledger = self.ledger
        budget = ledger.budget
        if budget is not None and budget.request_limit is not None and ledger.total.requests >= budget.request_limit:
            ledger._raise(("request_limit", f"the request_limit of {budget.request_limit} requests is reached"))
        ledger.total.requests += 1
        self.account.requests += 1
        if ledger.batch is not None:
            ledger.batch.total.requests += 1

    def before_tool_call(self) -> None:
        ledger = self.ledger
        budget = ledger.budget
        limit = budget.tool_calls_limit if budget is not None else None
        if limit is not None and ledger.total.tool_calls >= limit:
            ledger._raise(("tool_calls_limit", f"the tool_calls_limit of {limit} tool calls is reached"))
        ledger.total.tool_calls += 1
        if ledger.batch is not None:
            ledger.batch.total.tool_calls += 1

    def record(self, response: ModelResponse | None, model: Any) -> tuple[Usage, float | None]:
        """Add a response's tokens and price to the slot's, the run's and the batch's
        accounts. A request cut off before its response (an error, a cancellation) is
        priced by the tokens it had reported: usually none."""
        if response is None:
            return Usage(requests=1, cost=0.0), 0.0
        usage = response.usage
        cost = self.ledger.pricing.cost(response, model)
        if cost is not None and usage.cost is None:
            usage.cost = Decimal(str(cost))  # pydantic-ai then reports our price too (spans, RunUsage)
        input_tokens, output_tokens = int(usage.input_tokens or 0), int(usage.output_tokens or 0)
        read, written = int(usage.cache_read_tokens or 0), int(usage.cache_write_tokens or 0)
        saved = self.ledger.pricing.saving(response, model, cost) if read or written else None
        line = Usage(1, 0, input_tokens, output_tokens, cost, read, written, saved)
        self.account.add(input_tokens, output_tokens, cost, line)
        self.ledger.total.add(input_tokens, output_tokens, cost, line)
        if self.ledger.batch is not None:
            self.ledger.batch.total.add(input_tokens, output_tokens, cost, line)
        return line, cost

    async def responded(self, response: ModelResponse, model: Any, elapsed_ms: float) -> None:
        usage, cost = self.record(response, model)
        name = response.model_name or _name(model)
        note_served_name(model, response.model_name)
        await self.ledger.emit(
            ModelResponded(self.slot, name, usage, cost, elapsed_ms, False, _finish_reason(response))
        )
        budget = self.ledger.budget
        if budget is not None:
            over = self.ledger.total.over(budget, spent=False)
            if over is not None:
                self.ledger._raise(over)

    async def served_from_cache(self, response: ModelResponse, elapsed_ms: float) -> None:
        """A response-cache hit: no request, no cost, still a line of the ledger."""
        await self.ledger.emit(
            ModelResponded(
                self.slot, response.model_name or "cached", Usage(cost=0.0), 0.0, elapsed_ms, True,
                _finish_reason(response),
            )
        )


# the meter's model layer is in run/wrappers/ with the others (MODEL_STACK); its old path still works
from .wrappers.metered import MeteredModel as MeteredModel  # noqa: E402

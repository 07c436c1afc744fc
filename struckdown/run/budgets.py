"""Per-tool call budgets of one slot (SPEC §13): `budget="search=3"`, capped by `tool_limits=`.

The template may lower the host's ceiling, never raise it (asking for more gets the
ceiling and a warning, as `max_iter` does, SPEC §3). The slot's tool wrapper asks
`ToolBudget.spend` before it runs a call that is not answered from the slot's tool
cache: a call past the budget does not run, and the model reads the refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from ..log import logger
from ..notices import warn


def refusal(name: str, budget: int) -> str:
    """What the model reads for a call past its tool's budget."""
    times = "time" if budget == 1 else "times"
    return f"Call budget exhausted: {name!r} may be called at most {budget} {times} in this slot."


def check_tool_limits(tool_limits: Any) -> dict[str, int]:
    """The host's `tool_limits={"search": 5}` as a plain dict; a bad one is a ConfigurationError."""
    if tool_limits is None:
        return {}
    if not isinstance(tool_limits, Mapping):
        raise ConfigurationError(f"tool_limits= must map tool names to call counts, not {type(tool_limits).__name__}")
    out: dict[str, int] = {}
    for name, count in tool_limits.items():
        if not isinstance(name, str) or isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigurationError(f"tool_limits= maps tool names to whole numbers of at least 0, not {name!r}: {count!r}")
        out[name] = count
    return out


def clamp_budget(asked: Mapping[str, int] | None, ceiling: Mapping[str, int], slot: str) -> dict[str, int]:
    """The slot's budgets: the host's ceilings, lowered (never raised) by the template's."""
    budgets = dict(ceiling)
    for name, count in (asked or {}).items():
        top = ceiling.get(name)
        if top is not None and count > top:
            message = f"template asked for budget {name}={count} but the caller's ceiling is {top}; using {top}"
            logger.warning("slot %s: %s", slot, message)
            warn(message)
            continue
        budgets[name] = count
    return budgets


@dataclass
class ToolBudget:
    """One slot run's per-tool budgets and what it has spent; `meter` also counts the
    call against the run-wide tool-call limit."""

    budgets: dict[str, int]
    meter: Any = None  # the slot's ledger meter (run/ledger.py), or None
    spent: dict[str, int] = field(default_factory=dict)

    def spend(self, name: str) -> str | None:
        """Before a call runs: None when it may run (its budget is spent by one), the
        refusal the model reads when it may not. Raises BudgetExceeded when the run's
        tool-call limit is reached."""
        budget = self.budgets.get(name)
        if budget is not None and self.spent.get(name, 0) >= budget:
            return refusal(name, budget)
        if self.meter is not None:
            self.meter.before_tool_call()
        self.spent[name] = self.spent.get(name, 0) + 1
        return None

    def returned(self) -> None:
        """A call gave the model a result (pydantic-ai's count of successful tool calls)."""
        if self.meter is not None:
            self.meter.account.tool_calls += 1


def budget_option(value: Any) -> dict[str, int] | None:
    """The `budget=` option as {tool: calls} (the plan keeps the checked text)."""
    if value is None or isinstance(value, dict):
        return value
    from ..slot_options import check_option

    parsed: dict[str, int] = check_option("budget", value)
    return parsed


def slot_budget(asked: Any, ceiling: Mapping[str, int], meter: Any, slot: str) -> ToolBudget | None:
    """The budget object of one tool slot run (None when nothing is limited or counted)."""
    asked = budget_option(asked)
    budgets = clamp_budget(asked, ceiling, slot) if asked or ceiling else {}
    if not budgets and meter is None:
        return None
    return ToolBudget(budgets, meter)

"""A Dask batch's budget (SPEC §13): one shared account for the whole cluster.

The account is a `distributed.Variable` on the scheduler (the batch's totals as plain
data) updated under a `distributed.Lock`: a row checks it when it starts (once the
budget is spent it does not run, and comes back as `BudgetExceeded`), and adds what it
spent when it ends. Rows running when the budget runs out finish, as on one machine.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, fields
from typing import Any

import distributed

from ..results import Usage
from ..run.ledger import Account, BatchLedger, Budget


def open_budget(client: Any, budget: Budget | None) -> dict[str, Any] | None:
    """On the caller's side: the shared account of one batch (None without a budget: see
    `Budget.for_batch`). Blocking (called in a thread)."""
    if budget is None:
        return None
    name = f"struckdown-budget-{uuid.uuid4().hex[:12]}"
    distributed.Variable(name, client=client).set(asdict(Account()))
    return {"name": name, "budget": asdict(budget)}


def close_budget(client: Any, spec: dict[str, Any] | None) -> None:
    if spec is None:
        return
    try:
        distributed.Variable(spec["name"], client=client).delete()
    except Exception:  # noqa: BLE001 - the cluster may already be gone
        pass


def _ledger(spec: dict[str, Any], totals: dict[str, Any]) -> BatchLedger:
    ledger = BatchLedger(Budget(**spec["budget"]))
    known = {f.name for f in fields(Account)}
    ledger.total = Account(**{k: v for k, v in totals.items() if k in known})
    return ledger


async def row_may_start(spec: dict[str, Any]) -> Any:
    """On a worker, before a row runs: the BudgetExceeded it gets once the budget is spent, or None."""
    variable = distributed.Variable(spec["name"], client=distributed.get_client())
    return _ledger(spec, await variable.get()).spent()


async def row_spent(spec: dict[str, Any], usage: Usage | None) -> None:
    """On a worker, after a row: add what it spent to the batch's account."""
    if usage is None or not (usage.requests or usage.tool_calls):
        return
    variable = distributed.Variable(spec["name"], client=distributed.get_client())
    async with distributed.Lock(f"{spec['name']}-lock"):
        totals = dict(await variable.get())
        totals["requests"] += usage.requests
        totals["tool_calls"] += usage.tool_calls
        totals["input_tokens"] += usage.input_tokens
        totals["output_tokens"] += usage.output_tokens
        if usage.cost is None and usage.requests:
            totals["unpriced"] += 1
        else:
            totals["cost"] += usage.cost or 0.0
        await variable.set(totals)

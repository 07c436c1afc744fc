"""`SlotRun`: what the layers below a slot attempt read, behind one `ContextVar`.

The model wrappers (`run/wrappers/`) and the tool agents' toolset (`run/tools.py`) are
built once and shared by every run, so they hold no run state of their own: the slot
attempt in progress puts it here, in one object, with one `with`:

    with entered(meter=meter, tools=wrap, retries=retry_run, cache=cache_run):
        await agent.run(...)

The batch puts its row here the same way, around each row (`effect_row`, `batch_row`),
and the provider batch its request (`batch_request`), so a slot attempt inside a row
inherits them: `entered` copies the current `SlotRun` with the fields it is given
changed (pydantic-ai's per-run copies), and the `with` puts the previous one back.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any


class SlotRun:
    """One slot attempt's state, as the layers below it read it (None: not set here).

    Never changed once made: `entered` makes a copy with other fields."""

    __slots__ = ("meter", "retries", "cache", "tools", "effect_row", "batch_row", "batch_request", "flow")

    def __init__(
        self,
        meter: Any = None,
        retries: Any = None,
        cache: Any = None,
        tools: Any = None,
        effect_row: int | None = None,
        batch_row: Any = None,
        batch_request: Any = None,
        flow: Any = None,
    ) -> None:
        # the types live in the modules that read them (each imports this one): named, not imported
        self.meter = meter  # run/ledger.SlotMeter: the slot's share of the usage ledger (MeteredModel)
        self.retries = retries  # run/wrappers/retries.RetryRun: the attempt's retries (RetryingModel)
        self.cache = cache  # run/wrappers/cached.CacheRun: the attempt's response cache (CachedModel)
        self.tools = tools  # run/tools.ToolWrap: the slot's tool state (SlotToolset, WrapSlotTools)
        self.effect_row = effect_row  # SPEC §25: the batch row effect ids name (None: a single run)
        self.batch_row = batch_row  # batch/provider_state.BatchedRow: the provider-batched row (TrackedModel)
        self.batch_request = batch_request  # batch/provider_state.BatchedRequest being sent (the encode hook)
        self.flow = flow  # run/wrappers/flow.FlowRun: the run's private values (FlowGuardModel), set around a run

    def copy(self, changes: dict[str, Any]) -> SlotRun:
        run = SlotRun(
            self.meter, self.retries, self.cache, self.tools, self.effect_row, self.batch_row, self.batch_request,
            self.flow,
        )
        for name, value in changes.items():
            setattr(run, name, value)
        return run

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__ if getattr(self, n) is not None)
        return f"SlotRun({fields})"


NO_RUN = SlotRun()

#: The one ContextVar of a slot run: the model wrappers and the tool toolset are shared by
#: every run (built once, cached with their agents), and pydantic-ai calls them with no
#: argument of ours, so the attempt in progress can reach them only through the task's
#: context. Tasks a slot starts (a deadline's, parallel tool calls) copy it.
CURRENT: ContextVar[SlotRun] = ContextVar("struckdown_slot_run", default=NO_RUN)


def current() -> SlotRun:
    """The SlotRun of this task (`NO_RUN` outside any)."""
    return CURRENT.get()


class entered:  # noqa: N801 - used as a function: `with entered(meter=…):`
    """`with entered(**fields):` the current SlotRun with `fields` changed, until the block
    ends (a plain context manager, not a generator: it is entered once per attempt)."""

    __slots__ = ("changes", "token")

    def __init__(self, **changes: Any) -> None:
        self.changes = changes

    def __enter__(self) -> SlotRun:
        run = CURRENT.get().copy(self.changes)
        self.token: Token[SlotRun] = CURRENT.set(run)
        return run

    def __exit__(self, *exc: object) -> None:
        CURRENT.reset(self.token)


def enter_row(index: int) -> None:
    """A batch row's task: effect ids name row `index` from here on (SPEC §25). For a task
    of the row's own, so nothing needs putting back."""
    CURRENT.set(CURRENT.get().copy({"effect_row": index}))

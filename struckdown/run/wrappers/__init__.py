"""The slot's two stacks, each written once in order (SPEC §22; DESIGN "A stack written once").

**The model stack**, outermost first, around the provider model a slot attempt runs on:

    cache  →  retries  →  flow  →  meter  →  provider

* `cached.CachedModel`: a response-cache hit never reaches the layers below (agent slots
  are never served from the cache);
* `retries.RetryingModel`: a transient provider failure is sent again (SPEC §14);
* `flow.FlowGuardModel`: a request to a remote model holding a private value's text is
  blocked with `FlowError` (SPEC §33; not sent, so not metered);
* `run/ledger.MeteredModel`: every real request, each retry included, is counted, priced and
  checked against the budgets once;
* the provider model (or its provider-batch wrapper, `batch/provider_models.py`).

Fallback is not a layer: it restarts the whole slot on the next model (`run/resilience.py`).
`model_stack` builds it; `run/slot.py` calls nothing else.

**The tool stack**, outermost first, around each tool call of an agent slot
(`run/tools.SlotToolset` and pydantic-ai's deferred tools):

    approval  →  budget  →  single flight  →  effect journal  →  guard join  →  timeout  →  tool

* approval: a call that needs a person's yes is deferred (SPEC §12; `run/approval.py`);
* budget: a call past its `budget=` / `tool_limits=` does not run, the model reads why;
* single flight: identical calls of one slot run once and share the result;
* effect journal: with `journal=`, a call of a write tool is answered from the journal when
  it finished before, reconciled or held for approval when it was cut off, and else
  journaled as started and done around the layers below (SPEC §25; `run/effects.py`);
* guard join: a tool that is not `@readonly` waits for the pending guards' verdicts;
* timeout: `tool_timeout` ends the wait, the model reads the timeout message;
* the tool (a function, sync or async, or an MCP server's tool).
"""

from __future__ import annotations

from typing import Any

#: The model stack, outermost first (the docstring says what each layer does).
MODEL_STACK = ("cache", "retries", "flow", "meter", "provider")
#: The tool stack, outermost first.
TOOL_STACK = ("approval", "budget", "single flight", "effect journal", "guard join", "timeout", "tool")


def model_stack(caches: Any, model: Any, *, cached: bool) -> Any:
    """`model` wrapped in the layers of `MODEL_STACK`, innermost first (one wrapper per model
    and layer, from the Environment's caches, so agents are reused across runs; the stack
    itself is kept per model, so a slot run looks it up once)."""
    return caches.model_stack(model, cached, _build_stack)


def _build_stack(caches: Any, model: Any, cached: bool) -> Any:
    from .flow import FlowGuardModel

    served = caches.metered_model(model)
    served = FlowGuardModel(served)
    served = caches.retrying_model(served)
    return caches.cached_model(served) if cached else served

"""The slot's two stacks, each a list the code folds (SPEC §22; DESIGN "A stack written once").

**The model stack**, outermost first, around the provider model a slot attempt runs on:

    cache  →  retries  →  flow  →  meter  →  provider

* `cached.CachedModel`: a response-cache hit never reaches the layers below (agent slots
  are never served from the cache);
* `retries.RetryingModel`: a transient provider failure is sent again (SPEC §14);
* `flow.FlowGuardModel`: a request to a remote model holding a private value's text is
  blocked with `FlowError` (SPEC §33; not sent, so not metered);
* `metered.MeteredModel`: every real request, each retry included, is counted, priced and
  checked against the budgets once;
* the provider model (or its provider-batch wrapper, `batch/provider_models.py`).

`MODEL_STACK` lists the layers, outermost first, and `build_stack` folds it from the
innermost out (as Starlette builds its middleware stack); each layer's `wrap` puts it
around the model below, and the state it serves with is its field of the attempt's
`SlotRun` (`run/slot_run.py`). Fallback is not a layer: it restarts the whole slot on the
next model (`run/attempts.py`). `run/slot.py` calls `model_stack`, nothing else.

**The tool stack**, outermost first, around each tool call of an agent slot: the list
`run/tools.TOOL_STACK`, folded once into the chain `run/tools.SlotToolset` runs each
call through (with its `ToolStarted`/`ToolCompleted` events around it):

    approval  →  budget  →  single flight  →  effect journal  →  guard join  →  timeout  →  tool

* approval: a call that needs a person's yes is deferred (SPEC §12; `run/approval/`):
  pydantic-ai defers it before the toolset sees it (the toolset declares such tools
  'unapproved'); the layer defers any that reaches it undecided;
* budget: a call past its `budget=` / `tool_limits=` does not run, the model reads why;
* single flight: identical calls of one slot run once and share the result;
* effect journal: with `journal=`, a call of a write tool is answered from the journal when
  it finished before, reconciled or held for approval when it was cut off, and else
  journaled as done around the layers below, and as started when the tool begins (after
  the guard join: a call a guard stopped never shows as started) (SPEC §25; `run/durable/effects.py`);
* guard join: a tool that is not `@readonly` waits for the pending guards' verdicts;
* timeout: `tool_timeout` ends the wait, the model reads the timeout message;
* the tool (a function, sync or async, or an MCP server's tool).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic_ai.models import Model

from .cached import CachedModel
from .flow import FlowGuardModel
from .metered import MeteredModel
from .retries import RetryingModel


class ModelLayer(Protocol):
    def wrap(self, model: Model, *, cached: bool) -> Model: ...


#: The model stack, outermost first: the list `build_stack` folds.
MODEL_STACK: list[ModelLayer] = [CachedModel, RetryingModel, FlowGuardModel, MeteredModel]


def build_stack(model: Model, *, cached: bool, layers: Sequence[ModelLayer] = MODEL_STACK) -> Model:
    """`model` inside `layers` (the first outermost), each layer wrapped around the ones after it."""
    for layer in reversed(layers):
        model = layer.wrap(model, cached=cached)
    return model


def model_stack(caches: Any, model: Any, *, cached: bool) -> Any:
    """`model` in the layers of `MODEL_STACK`, kept per model and `cached` by the
    Environment's caches, so its agents are reused across runs and a slot run looks it
    up once."""
    return caches.model_stack(model, cached, build_stack)

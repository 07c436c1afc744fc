"""What the model wrappers of a slot run share: the response cache (`cached_model.py`),
the retries (`retries.py`) and the usage meter (`ledger.py`).

Each wrapper is stateless and cached per model (`caches.py`), so its agents are reused;
what the slot attempt in progress needs is a field of the `SlotRun` (`run/slot_run.py`)
set around `agent.run` (`part` names it). Outside a slot run the field is None and a
request, or a stream, goes straight to the wrapped model. Inside one, the wrapper serves
it (`serve`, `serve_stream`) with the run's state and the `Request` to send on, or again.
"""

from __future__ import annotations

from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from ..slot_run import CURRENT

StreamContext = AbstractAsyncContextManager[StreamedResponse]


@dataclass(slots=True)
class Request:
    """One model request as a wrapper received it."""

    messages: list[ModelMessage]
    settings: ModelSettings | None
    params: ModelRequestParameters
    run_context: Any = None  # the agent run's RunContext, for a stream

    def send(self, model: Model) -> Coroutine[Any, Any, ModelResponse]:
        return model.request(self.messages, self.settings, self.params)

    def open(self, model: Model) -> StreamContext:
        return model.request_stream(self.messages, self.settings, self.params, self.run_context)


def _request_stream(
    self: SlotRunWrapper,
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    model_request_parameters: ModelRequestParameters,
    run_context: Any = None,
) -> StreamContext:
    """`SlotRunWrapper.request_stream`: the wrapped model's stream outside a slot run, else
    the context manager `serve_stream` gives."""
    state = getattr(CURRENT.get(), self.part)
    if state is None:
        return self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context)
    return self.serve_stream(state, Request(messages, model_settings, model_request_parameters, run_context))


class SlotRunWrapper(WrapperModel):
    """A model wrapper that follows the slot run in progress (its `part` of the `SlotRun`), and passes
    requests through outside one.

    The wrappers are stacked on every request, so they add no layer of their own:
    `request` returns the coroutine it serves (the wrapped model's, or `serve`'s) and
    `request_stream` the context manager (the wrapped model's, or `serve_stream`'s).
    As a plain function `request` also escapes the per-class wrappers pydantic-ai puts
    around a model's own `async def request` (special-token restoring, which a wrapper
    model never does, and a file-download budget, which the wrapped model's own request
    opens afresh). pydantic-ai wraps a class's own `request_stream` in the same two, each a
    generator context manager (one with an exit stack), when the class is created; for a
    wrapper both do nothing its wrapped model's `request_stream` does not do again, so the
    plain function is put back after the class statement (`PLAIN_STREAM`): a stream's first
    event no longer waits for four more context managers per layer."""

    #: The field of the current `SlotRun` this layer serves with (None there: no slot run).
    part: ClassVar[str]

    @classmethod
    def wrap(cls, model: Model, *, cached: bool) -> Model:
        """This layer around `model`, as `wrappers.MODEL_STACK` folds it (`cached`: the
        slot's answer may come from the response cache)."""
        return cls(model)

    def request(
        self, messages: list[ModelMessage], model_settings: ModelSettings | None, model_request_parameters: ModelRequestParameters
    ) -> Coroutine[Any, Any, ModelResponse]:
        state = getattr(CURRENT.get(), self.part)
        if state is None:
            return self.wrapped.request(messages, model_settings, model_request_parameters)
        return self.serve(state, Request(messages, model_settings, model_request_parameters))

    request_stream = _request_stream  # type: ignore[assignment]  # put back below, after pydantic-ai wrapped it

    async def serve(self, state: Any, request: Request) -> ModelResponse:
        """Answer `request` inside a slot run whose state is `state`."""
        raise NotImplementedError

    def serve_stream(self, state: Any, request: Request) -> StreamContext:
        """Open the stream of `request` inside a slot run whose state is `state`."""
        raise NotImplementedError


#: pydantic-ai's per-class wrapping undone (see `SlotRunWrapper`): the subclasses define no
#: `request_stream` of their own, so they keep this one.
SlotRunWrapper.request_stream = _request_stream
PLAIN_STREAM = _request_stream

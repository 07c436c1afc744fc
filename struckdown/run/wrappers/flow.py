"""SPEC §33, at the request boundary: a request to a remote model that holds the text of a
private value is blocked with `FlowError` (the static check, `struckdown/flow.py`, refuses
what the plan shows before any call; this layer catches what it cannot see: a private value
copied into an unlabelled one, a tool result, a model that repeats it).

The layer is stateless and cached with its model's stack, like the others (`streams.py`):
what the run in progress labelled private travels in `CURRENT_FLOW`, set by the engine
around a run that has private values. Without one a request passes straight through."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.wrapper import WrapperModel

from ...errors import FlowError
from ...flow import model_place
from .streams import Request, SlotRunWrapper, StreamContext


@dataclass(frozen=True)
class FlowRun:
    """What the run in progress keeps from remote models."""

    texts: tuple[str, ...]  # the text of each private value, longest first
    local: tuple[str, ...] = ()  # local_models=
    remote: tuple[str, ...] = ()  # remote_models=


CURRENT_FLOW: ContextVar[FlowRun | None] = ContextVar("struckdown_flow", default=None)


def _provider(model: Any) -> Any:
    while isinstance(model, WrapperModel):
        model = model.wrapped
    return model


def _request_text(request: Request) -> str:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter.dump_json(request.messages).decode("utf-8", "replace")


class FlowGuardModel(SlotRunWrapper):
    """Blocks a request to a remote model that holds a private value's text (`FlowError`)."""

    current = CURRENT_FLOW

    def _check(self, run: FlowRun, request: Request) -> None:
        name, remote = model_place(_provider(self.wrapped), local=run.local, remote=run.remote)
        if not remote:
            return
        text = _request_text(request)
        for value in run.texts:
            if value in text or jsonable_escaped(value) in text:  # the dump escapes as JSON does
                raise FlowError(f"a request to the remote model {name!r} holds the text of a private value: "
                                "blocked before it was sent (SPEC §33)")

    async def serve(self, run: FlowRun, request: Request) -> ModelResponse:
        self._check(run, request)
        return await request.send(self.wrapped)

    def serve_stream(self, run: FlowRun, request: Request) -> StreamContext:
        self._check(run, request)
        return request.open(self.wrapped)


def jsonable_escaped(value: str) -> str:
    """`value` as it appears inside a JSON string (quotes, newlines escaped)."""
    import json

    return json.dumps(value, ensure_ascii=False)[1:-1]

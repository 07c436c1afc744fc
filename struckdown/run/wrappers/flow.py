"""SPEC §33, at the request boundary: a request to a remote model that holds the text of a
private value is blocked with `FlowError` (the static check, `struckdown/flow.py`, refuses
what the plan shows before any call; this layer catches what it cannot see: a private value
copied into an unlabelled one, a tool result, a model that repeats it).

The layer is stateless and cached with its model's stack, like the others: what the run in
progress labelled private travels in the `SlotRun`'s `flow` field, which the engine sets
around a run that has private values and every slot attempt of the run inherits. Without
one a request passes straight through."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from ...errors import FlowError
from ...flow import model_place
from ..slot_run import current
from .streams import StreamContext


@dataclass(frozen=True)
class FlowRun:
    """What the run in progress keeps from remote models."""

    texts: tuple[str, ...]  # the text of each private value, longest first
    local: tuple[str, ...] = ()  # local_models=
    remote: tuple[str, ...] = ()  # remote_models=


def _provider(model: Any) -> Any:
    while isinstance(model, WrapperModel):
        model = model.wrapped
    return model


def _request_text(messages: list[ModelMessage]) -> str:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter.dump_json(messages).decode("utf-8", "replace")


class FlowGuardModel(WrapperModel):
    """Blocks a request to a remote model that holds a private value's text (`FlowError`).
    Self-contained: it reads the `SlotRun`'s `flow` (the run's private values)."""

    @classmethod
    def wrap(cls, model: Model, *, cached: bool) -> Model:
        """This layer around `model`, as `wrappers.MODEL_STACK` folds it."""
        return cls(model)

    def check(self, messages: list[ModelMessage]) -> None:
        run: FlowRun | None = current().flow
        if run is None:
            return
        name, remote = model_place(_provider(self.wrapped), local=run.local, remote=run.remote)
        if not remote:
            return
        text = _request_text(messages)
        for value in run.texts:
            if value in text or jsonable_escaped(value) in text:  # the dump escapes as JSON does
                raise FlowError(f"a request to the remote model {name!r} holds the text of a private value: "
                                "blocked before it was sent (SPEC §33)")

    def request(
        self, messages: list[ModelMessage], model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> Coroutine[Any, Any, ModelResponse]:
        self.check(messages)
        return self.wrapped.request(messages, model_settings, model_request_parameters)


def _request_stream(
    self: FlowGuardModel,
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    model_request_parameters: ModelRequestParameters,
    run_context: Any = None,
) -> StreamContext:
    self.check(messages)
    return self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context)


#: as `streams.SlotRunWrapper`: pydantic-ai's per-class wrapping of `request_stream` undone
FlowGuardModel.request_stream = _request_stream  # type: ignore[method-assign,assignment]


def jsonable_escaped(value: str) -> str:
    """`value` as it appears inside a JSON string (quotes, newlines escaped)."""
    import json

    return json.dumps(value, ensure_ascii=False)[1:-1]

"""Scripted models with pydantic-ai's in-memory batch API that log every batch they create.

`FunctionModel` runs a batch's requests when the batch is created and keeps the batch on
the instance, so a test counts batches and the requests in each, and a resumed job that
uses the same instance collects the batches an interrupted one created.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai.models.batch import Batch, EncodedBatchRequest
from pydantic_ai.models.function import FunctionModel

from scripted import Call, Script


class LoggedBatches(FunctionModel):
    """A FunctionModel whose `batch_create` logs the calls each batch ran."""

    def __init__(self, script: BatchScript, **kwargs: Any) -> None:
        super().__init__(script._fn, stream_function=script._stream, **kwargs)
        self.script = script

    async def batch_create(self, requests: Sequence[EncodedBatchRequest]) -> Batch:
        script = self.script
        assert script.creating is None, "two batches were created at once"
        script.creating = []
        try:
            batch = await super().batch_create(requests)
        finally:
            ran, script.creating = script.creating, None
        assert len(ran) == len(requests)
        script.batches.append(ran)
        script.batch_ids.append(batch.id)
        if script.after_create is not None:
            script.after_create(len(script.batches))
        return replace(batch, status="in_progress") if script.running_checks else batch

    async def batch_status(self, batch: Batch) -> Batch:
        script = self.script
        script.checked.append(batch.id)
        if script.on_check is not None:
            script.on_check(batch.id)
        status = await super().batch_status(batch)
        if script.checked.count(batch.id) <= script.running_checks:
            return replace(status, status="in_progress")
        return status


@dataclass
class BatchScript(Script):
    """A `Script` whose model has a batch API: `batches[i]` are the calls batch i ran,
    `outside` the calls made without a batch. `after_create(n)` runs after the n-th batch
    is created, `on_check(batch_id)` before each check of a batch (a test's deterministic
kill switches)."""

    batches: list[list[Call]] = field(default_factory=list)
    batch_ids: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    outside: list[Call] = field(default_factory=list)
    creating: list[Call] | None = None
    after_create: Callable[[int], None] | None = None
    on_check: Callable[[str], None] | None = None  # runs before each check of a batch
    running_checks: int = 0  # the provider says "in progress" at creation and at this many checks
    name: str = "scripted"
    system: str | None = None

    def model(self) -> FunctionModel:
        model = LoggedBatches(self, model_name=self.name)
        if self.system is not None:
            model._system = self.system
        return model

    def _record(self, messages: Any, info: Any) -> Call:
        call = super()._record(messages, info)
        (self.creating if self.creating is not None else self.outside).append(call)
        return call

    @property
    def sizes(self) -> list[int]:
        return [len(batch) for batch in self.batches]

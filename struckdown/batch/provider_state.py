"""What a provider-batched job keeps (see `provider_batch.py`): its counts, priced by
`batch_prices`, and each row's model requests from submission to answer. Which row and which request the
model wrappers (`provider_batch_models.py`) serve is in the `SlotRun` (`run/slot_run.py`):
its `batch_row`, set around each row, and its `batch_request`, around each request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai.messages import ModelResponse

#: What batch APIs cost against the list price when the price data has no batch price
#: (OpenAI, Anthropic and Google document 50 %).
DEFAULT_DISCOUNT = 0.5

#: A row's journal record: request key → {"batch": <Batch as JSON>, "custom_id": str}.
RowRecords = dict[str, dict[str, Any]]
OnRecord = Callable[[dict[int, RowRecords]], Any]

State = Literal["queued", "running", "ready"]


@dataclass
class BatchCounts:
    """What a provider-batched job has done so far (`ProviderBatch.counts`)."""

    submitted: int = 0  # batches this job created
    resumed: int = 0  # batches an earlier run created that this job waits on
    done: int = 0  # batches that ended and whose results were read
    requests: int = 0  # requests submitted in the batches this job created
    continued: int = 0  # requests continued from an earlier run's batch instead of submitted again
    answered: int = 0  # batched requests that got their answer
    rows_done: int = 0
    cost: float | None = None  # the answered requests at batch prices (None: no price known)
    list_cost: float | None = None  # the same requests at list prices

    @property
    def pending(self) -> int:
        """Batches submitted (or resumed) whose results are not read yet."""
        return self.submitted + self.resumed - self.done

    @property
    def requests_per_batch(self) -> float:
        return self.requests / self.submitted if self.submitted else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "submitted": self.submitted, "resumed": self.resumed, "done": self.done, "pending": self.pending,
            "requests": self.requests, "continued": self.continued, "answered": self.answered,
            "rows_done": self.rows_done, "requests_per_batch": self.requests_per_batch,
            "cost": self.cost, "list_cost": self.list_cost,
        }  # fmt: skip


@dataclass(eq=False)
class BatchedRequest:
    """One model request of a row, from its submission until its answer."""

    row: BatchedRow
    key: str
    state: State = "queued"
    body: tuple[str, str] | None = None  # (group, body) while encoded but not yet in a created batch
    response_id: str | None = None


@dataclass(eq=False)
class BatchedRow:
    index: int
    recorded: RowRecords  # what an earlier run recorded, not yet matched
    records: RowRecords  # what the journal should hold for the row now
    seen: dict[str, int] = field(default_factory=dict)  # occurrences of each fingerprint in this run
    open: list[BatchedRequest] = field(default_factory=list)
    by_response: dict[str, BatchedRequest] = field(default_factory=dict)
    blocked: bool = False

    def key_for(self, fingerprint: str) -> str:
        count = self.seen.get(fingerprint, 0)
        self.seen[fingerprint] = count + 1
        return f"{fingerprint}-{count}"


def batch_prices(
    response: ModelResponse, *, discount: float = DEFAULT_DISCOUNT, provider: str | None = None
) -> tuple[float, float] | None:
    """(batch price, list price) in USD of one response, from genai-prices; the batch price
    is the data's batch price, or the list price x `discount` where it has none. None when
    the model's price is unknown. `provider`: the provider to look the model up under when
    the response names none (the model's `system`). The hook a cost meter can use for
    batched responses."""
    from genai_prices import calc_price

    model = response.model_name
    if not model:
        return None
    batch_context = {**{k: v for k, v in (response.provider_details or {}).items() if isinstance(v, str)},
                     "processing": "batch"}  # fmt: skip
    references = ({"provider_id": response.provider_name or provider}, {"provider_api_url": response.provider_url})
    for reference in references:
        if not next(iter(reference.values())):
            continue
        try:
            listed = float(calc_price(response.usage, model, **reference).total_price)  # type: ignore[arg-type]
            batch = float(
                calc_price(response.usage, model, price_context=batch_context, **reference).total_price  # type: ignore[arg-type]
            )
        except (LookupError, ValueError):
            continue
        return (batch if batch < listed else listed * discount), listed
    return None

"""The CLI's side of budgets, cost and tracing: `--prices`, `--max-cost`, `--otel`,
what `sd run -o` writes when a run fails, and usage and cost in the summary lines."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from .errors import CliError


@contextmanager
def otel(enabled: bool) -> Iterator[Any]:
    """`--otel`: a tracer provider exporting over OTLP (OTEL_EXPORTER_OTLP_* variables),
    flushed and shut down when the command ends; None without the flag."""
    if not enabled:
        yield None
        return
    from ..observe import EXPORT_TIMEOUT_S, ExportProblems, otlp_provider

    try:
        provider = otlp_provider()
    except ImportError as exc:
        raise CliError(str(exc)) from None
    with ExportProblems() as problems:  # the exporter's own lines (one per retry) are kept, not printed
        try:
            yield provider
        finally:
            # exports what is still buffered, in the background: a collector that does not answer
            # costs at most the export timeout, never the exporter's whole retry schedule
            import threading

            closing = threading.Thread(target=provider.shutdown, name="struckdown-otel-export", daemon=True)
            closing.start()
            closing.join(EXPORT_TIMEOUT_S + 1.0)
            if closing.is_alive() and problems.first is None:
                problems.first = f"no answer within {EXPORT_TIMEOUT_S + 1.0:g} s"
    if problems.first is not None:
        import os
        import sys

        where = (
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            or "http://localhost:4318"
        )
        sys.stderr.write(
            f"warning: --otel: the traces could not be exported to {where}: is an OTLP collector running "
            "there? (OTEL_EXPORTER_OTLP_ENDPOINT sets where)\n"
        )


def cost_part(usage: Mapping[str, Any] | Any) -> str | None:
    """`$0.0123` for a summary line, or None when the cost is unknown."""
    from ..models.pricing import format_cost

    cost = usage.get("cost") if isinstance(usage, Mapping) else getattr(usage, "cost", None)
    return format_cost(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def cache_part(read: int, input_tokens: int, saved: float | None) -> str | None:
    """`cache: 82 % of input read from the provider cache, $0.41 saved` (SPEC §24), or None
    when no input token came from a provider's prompt cache; the saving only when priced."""
    if not read or not input_tokens:
        return None
    text = f"cache: {round(100 * read / input_tokens)} % of input read from the provider cache"
    if saved is not None:
        money = f"${saved:,.2f}" if abs(saved) >= 0.01 else format_money(saved)
        text += f", {money} saved" if saved >= 0 else f", {money.replace('-', '')} more (cache writes)"
    return text


def format_money(amount: float) -> str:
    from ..models.pricing import format_cost

    return format_cost(abs(amount)) or "$0"


def batch_cost(entries: Sequence[Mapping[str, Any]]) -> str | None:
    """The cost of the rows run now, when every one of them that made a request is priced."""
    total = 0.0
    for entry in entries:
        usage = entry.get("usage") or {}
        cost = usage.get("cost")
        if cost is None:
            if usage.get("requests"):
                return None
            continue
        total += float(cost)
    if not any((e.get("usage") or {}).get("requests") for e in entries):
        return None
    return cost_part({"cost": total})


class RunRecorder:
    """What `sd run -o` needs when a run does not end with a Result: the answers so far,
    every request made, and the error."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.usage: Any = None
        self.partial: Any = None  # the Result of ProcessingError

    def see(self, event: Any) -> None:
        if event.type == "slot_completed":
            self.answers[event.slot] = event.result.output
        elif event.type == "model_responded":
            self.usage = event.usage if self.usage is None else self.usage + event.usage
        elif event.type == "processing_error":
            self.partial = event.result

    def record(self, error: BaseException) -> dict[str, Any]:
        from ..codec import jsonable
        from ..results import Usage
        from .errors import describe

        if self.partial is not None:
            answers, usage = self.partial.to_dict(), self.partial.usage
        else:  # interrupted: what the events showed
            answers, usage = {k: jsonable(v) for k, v in self.answers.items()}, self.usage or Usage()
        return {"answers": answers, "usage": usage.to_dict(), "halted": None, "error": describe(error)}

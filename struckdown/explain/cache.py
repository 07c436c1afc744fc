"""`sd explain --cache` (SPEC §24): what the provider's prompt cache can serve of a template's
requests, predicted offline before a batch runs.

The template runs over the rows with pydantic-ai's TestModel (no request leaves the
process; tools are not called): each slot's request is recorded as the provider would get
its prefix (tool definitions, then the instructions, then the turns). A text answer differs
per row, as real answers do. Then, request by request in batch order, the cached part is
the longest prefix an earlier request (of the same row's conversation, or an earlier row)
left in the cache, by the provider's rule:

* `anthropic`: a prefix is cached up to a `cache_control` breakpoint of the earlier request
  (after the tools, after the instructions, and at its end when a later slot follows it);
* `prefix` (OpenAI, llama.cpp): any shared prefix of at least 1,024 tokens, in steps of 128.

Tokens are estimated at 4 characters each (no tokenizer is loaded).
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..wording import counted

CHARS_PER_TOKEN = 4
PREFIX_MINIMUM, PREFIX_STEP = 1024, 128
_EXPRESSION = re.compile(r"\{\{-?\s*(.+?)\s*-?\}\}", re.S)


def tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass
class Request:
    slot: str
    row: int
    text: str
    breakpoints: tuple[int, ...]  # character offsets where an Anthropic breakpoint ends a cacheable prefix


@dataclass
class SlotCache:
    key: str
    fixed_tokens: int  # the prefix every row's request of this slot shares
    input_tokens: int = 0
    cached_tokens: int = 0

    @property
    def share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


@dataclass
class Breaker:
    expression: str
    line: int
    column: int
    tokens: int  # the fixed text after it, before the next slot: cacheable were the value not there
    slots: int  # the slots whose requests carry it


@dataclass
class CacheReport:
    rule: str
    rows: int
    slots: list[SlotCache] = field(default_factory=list)
    breaker: Breaker | None = None
    assumed: bool = False  # no rows given: the context is empty, and every variable taken to vary by row
    input_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None  # USD of the batch's input with the cache as predicted
    cost_uncached: float | None = None  # the same without any cache

    @property
    def share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


def cache_report(
    program: Any,
    rows: Sequence[Mapping[str, Any]],
    *,
    rule: str = "prefix",
    tools: Sequence[Any] = (),
    price: Any = None,
) -> CacheReport:
    """The predicted prompt-cache use of running `program` over `rows`. `price`: a callable
    (input_tokens, cached_tokens) → USD or None, for the saving. The rows run on the
    Environment that compiled `program`, as the real runs would."""
    if rule not in ("anthropic", "prefix"):
        raise ValueError(f"rule must be 'anthropic' or 'prefix', not {rule!r}")
    given = list(rows)
    rows = given or [{}]
    if given:
        requests = _record(program, rows, tools)
    else:  # no context at all: that every variable is undefined is the premise, not news
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="undefined variable", category=UserWarning)
            requests = _record(program, rows, tools)
    report = CacheReport(rule, len(rows), assumed=not given)
    by_slot: dict[str, list[Request]] = {}
    for request in requests:
        by_slot.setdefault(request.slot, []).append(request)
    for key, items in by_slot.items():
        report.slots.append(SlotCache(key, tokens(_common(items[0].text, *(r.text for r in items[1:])))))
    slots = {s.key: s for s in report.slots}
    seen: list[Request] = []
    for request in requests:
        cached = max((_cached(rule, earlier, request.text) for earlier in _candidates(seen, request)), default=0)
        slot = slots[request.slot]
        slot.input_tokens += tokens(len(request.text))
        slot.cached_tokens += cached
        seen.append(request)
    report.input_tokens = sum(s.input_tokens for s in report.slots)
    report.cached_tokens = sum(s.cached_tokens for s in report.slots)
    if price is not None:
        report.cost = price(report.input_tokens, report.cached_tokens)
        report.cost_uncached = price(report.input_tokens, 0)
    if len(rows) > 1:
        report.breaker = _breaker(program, rows)
    elif not given:  # every `{{ }}` of the context breaks a prefix across rows: name the first that does
        report.breaker = _breaker(program, _varying_rows(program))
    return report


def _varying_rows(program: Any) -> list[Mapping[str, Any]]:
    """Two rows in which every name the template reads from its context differs."""
    from ..variables import expected

    names = [read.name for read in expected(program)]
    return [{name: f"<{name} of row {row}>" for name in names} for row in (1, 2)]


def _candidates(seen: list[Request], request: Request) -> list[Request]:
    """Earlier requests that may hold this one's prefix: the same row's, the same slot's."""
    return [r for r in seen if r.row == request.row or r.slot == request.slot]


def _cached(rule: str, earlier: Request, text: str) -> int:
    if rule == "anthropic":
        best = 0
        for point in earlier.breakpoints:
            if point > best and text.startswith(earlier.text[:point]):
                best = point
        return tokens(best) if best else 0
    shared = tokens(_common(earlier.text, text))
    if shared < PREFIX_MINIMUM:
        return 0
    return PREFIX_MINIMUM + (shared - PREFIX_MINIMUM) // PREFIX_STEP * PREFIX_STEP


def _common(first: str, *others: str) -> int:
    """The length of the prefix every text shares (a binary search over slice comparisons)."""
    length = len(first)
    for other in others:
        low, high = 0, min(length, len(other))
        while low < high:
            middle = (low + high + 1) // 2
            if first[:middle] == other[:middle]:
                low = middle
            else:
                high = middle - 1
        length = low
    return length


def _record(program: Any, rows: list[Mapping[str, Any]], tools: Sequence[Any]) -> list[Request]:
    """Every slot's first request over every row, as its prefix's text, in batch order."""
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.models.wrapper import WrapperModel

    from ..run.prompt_cache import plan_prompt_cache
    from ..run.slot_run import current
    from ..types.samples import sample

    followed = plan_prompt_cache(program, True).followed
    recorded: list[Request] = []

    class Recorder(WrapperModel):
        """Records each slot's first request of a row (a TestModel answers)."""

        def __init__(self, row: int) -> None:
            super().__init__(TestModel(call_tools=[]))
            self.row = row

        async def request(self, messages: Any, model_settings: Any, model_request_parameters: Any) -> Any:
            meter = current().meter
            slot = meter.slot if meter is not None else "?"
            if not any(r.slot == slot and r.row == self.row for r in recorded):
                recorded.append(_as_request(slot, self.row, messages, model_request_parameters, slot in followed))
            output = model_request_parameters.output_object
            if model_request_parameters.output_mode in ("prompted", "native") and output is not None:
                # confidence=logprobs asks for the answer as JSON content and reads its tokens' logprobs:
                # a sample answer, certain (this predicts requests; no answer is real)
                text = json.dumps(sample(output.json_schema))
                details = {"logprobs": [{"token": text, "logprob": 0.0}]}
                return ModelResponse(parts=[TextPart(text)], model_name="test", provider_details=details)
            if model_request_parameters.allow_text_output:  # a text answer differs per row, as real ones do
                return ModelResponse(parts=[TextPart(f"<answer of row {self.row + 1}>")], model_name="test")
            return await super().request(messages, model_settings, model_request_parameters)

    for index, row in enumerate(rows):
        program.environment.complete(program, dict(row), model=Recorder(index), tools=list(tools), cache=False,
                                     prompt_cache=False, on_halt="return")
    return recorded


def _as_request(slot: str, row: int, messages: Any, parameters: Any, followed: bool) -> Request:
    from pydantic_ai.messages import ModelRequest, ModelResponse

    points: list[int] = []
    tool_defs = [*parameters.function_tools, *parameters.output_tools]
    text = "".join(
        json.dumps({"name": t.name, "description": t.description, "schema": t.parameters_json_schema}, sort_keys=True)
        for t in tool_defs
    )
    if parameters.function_tools:  # an agent slot's tool definitions get a breakpoint of their own
        points.append(len(text))
    instructions = next((m.instructions for m in reversed(messages) if isinstance(m, ModelRequest) and m.instructions),
                        None)
    if instructions:
        text += f"\n[system]\n{instructions}"
        points.append(len(text))
    for message in messages:
        role = "assistant" if isinstance(message, ModelResponse) else "user"
        for part in message.parts:
            content = getattr(part, "content", None)
            if content is None:
                content = json.dumps(getattr(part, "args", None), sort_keys=True, default=str)
            if not isinstance(content, str):
                content = json.dumps(content, sort_keys=True, default=str)
            text += f"\n[{role}]\n{content}"
    if followed:
        points.append(len(text))
    return Request(slot, row, text, tuple(points))


def _breaker(program: Any, rows: list[Mapping[str, Any]]) -> Breaker | None:
    """The first `{{ … }}` in the template whose value differs across rows."""
    from ..syntax.nodes import Slot, walk

    source: str = program.template.source
    renderer = program.environment.renderer
    slots = [n for n in walk(program.template.nodes) if isinstance(n, Slot) and not n.is_guard]
    starts = [_offset(source, s.pos.line, s.pos.column) for s in slots]
    for match in _EXPRESSION.finditer(source):
        expression = match.group(1)
        values = set()
        for row in rows:
            try:
                values.add(repr(renderer.evaluate(expression, dict(row))))
            except Exception:  # noqa: BLE001 - it reads an answer (not a row's value), or fails: not a row's
                values = set()
                break
        if len(values) < 2:
            continue
        after = [i for i, start in enumerate(starts) if start > match.start()]
        if not after:
            return None
        line = source.count("\n", 0, match.start()) + 1
        column = match.start() - (source.rfind("\n", 0, match.start()) + 1) + 1
        fixed = source[match.end():starts[after[0]]]
        return Breaker(match.group(0), line, column, tokens(len(_EXPRESSION.sub("", fixed).strip())), len(after))
    return None


def _offset(source: str, line: int, column: int) -> int:
    offset = 0
    for _ in range(line - 1):
        offset = source.index("\n", offset) + 1
    return offset + column - 1


def pricer(model: str | None, prices: Mapping[str, Any] | None) -> tuple[Any, str | None, str]:
    """(price callable or None, the priced model's name, the provider's rule) for `model`
    (`provider:name`, e.g. `anthropic:claude-sonnet-4-5`) with the `prices=` table."""
    if not model:
        return None, None, "prefix"
    provider, _, name = model.partition(":") if ":" in model else ("", "", model)
    rule = "anthropic" if provider in ("anthropic", "bedrock") else "prefix"
    from pydantic_ai.usage import RequestUsage

    from ..models.pricing import Pricing

    pricing = Pricing(prices)

    def price(input_tokens: int, cached: int) -> float | None:
        return pricing.of_usage(RequestUsage(input_tokens=input_tokens, cache_read_tokens=cached), name, provider or None)

    known = price(1_000_000, 0) is not None
    return (price if known else None), name, rule


def report_lines(report: CacheReport, price_name: str | None = None) -> list[str]:
    """The report as `sd explain --cache` prints it."""
    rule = "Anthropic breakpoints" if report.rule == "anthropic" else "shared prefixes of 1,024+ tokens (OpenAI, llama.cpp)"
    lines = [f"prompt cache: {counted(report.rows, 'row')}, {rule}; "
             f"tokens estimated at {CHARS_PER_TOKEN} characters each"]
    if report.assumed:
        lines.append("  (no --rows: one row with an empty context; every {{ }} of the context taken to differ by row)")
    width = max((len(s.key) for s in report.slots), default=0)
    for slot in report.slots:
        lines.append(
            f"  {slot.key:<{width}}  cacheable prefix {slot.fixed_tokens:,} tokens · "
            f"predicted cached {round(100 * slot.share)} % of {slot.input_tokens:,} input tokens"
        )
    if report.breaker is not None:
        b = report.breaker
        lines.append(f"  {b.expression} at {b.line}:{b.column} breaks {counted(b.tokens, 'cacheable token')} "
                     f"for {counted(b.slots, 'slot')}")
    total = f"predicted: {round(100 * report.share)} % of {report.input_tokens:,} input tokens read from the cache"
    if report.cost is not None and report.cost_uncached is not None:
        total += (f"; input ${report.cost:,.2f} with caching vs ${report.cost_uncached:,.2f} without "
                  f"(${report.cost_uncached - report.cost:,.2f} saved) at {price_name or 'the given'} prices")
    else:
        total += "; saving unknown (give --model provider:name or --prices FILE)"
    lines.append(total)
    return lines

"""(q) Provider prompt caching (issue 34, SPEC §24): 5 slots × 200 rows behind a ~3,000-token
fixed preamble, through pydantic-ai's real Anthropic and OpenAI models whose HTTP goes to an
in-process provider that reports cached tokens by its own rule from the bodies it receives:

* Anthropic: a request reads the longest prefix, ending at one of its block boundaries, that
  an earlier request wrote at a `cache_control` breakpoint; it writes its prefix up to its
  last breakpoint (cache_creation_input_tokens on first sight, cache_read_input_tokens after);
* OpenAI: the longest prefix shared with any earlier request counts when it is 1,024 tokens
  or more, in steps of 128 (prompt_tokens_details.cached_tokens); there are no writes.

Tokens are 4 characters each on both sides. The rows run one at a time (in batch order, as
`sd explain --cache` predicts them). Rows: `sd explain --cache`'s predicted cached share
against the share the responses report (target: within ±15 %, as predicted / reported), and
the batch's cost with caching against the same tokens uncached at Anthropic's prices, from
the responses (target ≤ 0.35×) and as predicted (info).
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import os
from typing import Any

from .common import Row, target_row

PREAMBLE = "".join(
    f"Policy {i}: greet the customer by name, check the order number against the shipping log, and never "
    "promise a refund before the order is found. "
    for i in range(1, 81)
)  # ~12,000 characters: ~3,000 tokens
TEMPLATE = (
    f"<system>{PREAMBLE}</system>\nCustomer {{{{ customer_id }}}} writes: {{{{ message }}}}\n\n"
    "Summarise it. [[summary]]\n\nThe reply. [[reply]]\n\nThe next step. [[step]]\n\nThe tone. [[tone]]\n\n"
    "The priority. [[priority]]\n"
)
#: USD per million tokens (claude-sonnet-4-5's list prices; gpt-4o's for the OpenAI run).
PRICES = {
    "claude-sonnet-4-5": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
    "gpt-4o": {"input": 2.5, "output": 10, "cache_read": 1.25},
}
SHARE_BAND = 0.15
COST_TARGET = 0.35


def _tokens(chars: int) -> int:
    return -(-chars // 4)


class Provider:
    """The provider's side: its cache, and a reply per request carrying the usage its rule gives."""

    def __init__(self, rule: str) -> None:
        self.rule = rule
        self.written: set[bytes] = set()  # Anthropic: digests of the prefixes written at breakpoints
        self.seen: list[str] = []  # OpenAI: every earlier request's text, sorted
        self.requests = 0

    # -- the rules ----------------------------------------------------------------------
    def anthropic(self, body: dict[str, Any]) -> dict[str, int]:
        text, ends, points = _anthropic_text(body)
        total = _tokens(len(text))
        last = max(points, default=0)
        read = max((end for end in ends if end <= last and _digest(text[:end]) in self.written), default=0)
        write = last - read if last > read else 0
        self.written.update(_digest(text[:point]) for point in points)
        read_t, write_t = read // 4, _tokens(write) if write else 0
        return {"input_tokens": total - read_t - write_t, "cache_read_input_tokens": read_t,
                "cache_creation_input_tokens": write_t}

    def openai(self, body: dict[str, Any]) -> dict[str, int]:
        text = _chat_text(body)
        at = bisect.bisect_left(self.seen, text)
        shared = max((_common(text, self.seen[i]) for i in (at - 1, at) if 0 <= i < len(self.seen)), default=0)
        bisect.insort(self.seen, text)
        tokens = shared // 4
        cached = 0 if tokens < 1024 else 1024 + (tokens - 1024) // 128 * 128
        return {"prompt_tokens": _tokens(len(text)), "cached": cached}

    # -- HTTP -------------------------------------------------------------------------------
    def reply(self, request: Any) -> Any:
        import httpx2

        body = json.loads(request.content)
        self.requests += 1
        answer = f"answer {self.requests}"  # real answers differ from request to request
        if request.url.path.endswith("/messages"):
            usage = {**self.anthropic(body), "output_tokens": 3}
            return httpx2.Response(200, json={
                "id": f"msg_{self.requests}", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": answer}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": usage,
            })
        counted = self.openai(body)
        return httpx2.Response(200, json={
            "id": f"chatcmpl-{self.requests}", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": counted["prompt_tokens"], "completion_tokens": 3,
                      "total_tokens": counted["prompt_tokens"] + 3,
                      "prompt_tokens_details": {"cached_tokens": counted["cached"]}},
        })

    def model(self) -> Any:
        import httpx2

        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.reply))
        if self.rule == "anthropic":
            from pydantic_ai.models.anthropic import AnthropicModel
            from pydantic_ai.providers.anthropic import AnthropicProvider

            return AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(api_key="bench", http_client=client))
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(api_key="bench", http_client=client))


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _anthropic_text(body: dict[str, Any]) -> tuple[str, list[int], list[int]]:
    """The body as text (tools, system, messages), the offsets where its blocks end, and
    those of its breakpoints (a block's `cache_control`; the body's own: its last block)."""
    text, ends, points = "", [], []

    def block(piece: str, marked: bool) -> None:
        nonlocal text
        text += piece
        ends.append(len(text))
        if marked:
            points.append(len(text))

    for tool in body.get("tools", []):
        block(json.dumps({k: v for k, v in tool.items() if k != "cache_control"}, sort_keys=True), "cache_control" in tool)
    system = body.get("system", [])
    for part in [{"text": system}] if isinstance(system, str) else system:
        block("[system]" + part["text"], "cache_control" in part)
    for message in body["messages"]:
        content = message["content"]
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            block(f"[{message['role']}]" + json.dumps({k: v for k, v in part.items() if k != "cache_control"}),
                  "cache_control" in part)
    if "cache_control" in body and ends:
        points.append(ends[-1])
    return text, ends, points


def _chat_text(body: dict[str, Any]) -> str:
    text = "".join(json.dumps(tool, sort_keys=True) for tool in body.get("tools", []))
    return text + "".join(f"[{m['role']}]" + json.dumps(m.get("content"), sort_keys=True) for m in body["messages"])


def _common(a: str, b: str) -> int:
    """The length of the prefix two texts share (the standard library's, not struckdown's:
    this side is the provider the prediction is checked against)."""
    return len(os.path.commonprefix([a, b]))


def rows_of(n: int) -> list[dict[str, str]]:
    return [{"customer_id": f"C{i:04d}", "message": f"my order {i} has not arrived"} for i in range(n)]


async def measure(rule: str, n_rows: int) -> dict[str, Any]:
    import struckdown as sd
    from struckdown.explain.cache import cache_report, pricer

    rows = rows_of(n_rows)
    provider = Provider(rule)
    results = await sd.complete_batch_async(TEMPLATE, rows, model=provider.model(), concurrency=1, prices=PRICES,
                                            cache=False)
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        raise failed[0]
    usage = sum((r.usage for r in results), sd.Usage())  # type: ignore[union-attr]
    name = "anthropic:claude-sonnet-4-5" if rule == "anthropic" else "openai:gpt-4o"
    price, _, predicted_rule = pricer(name, PRICES)
    assert predicted_rule == ("anthropic" if rule == "anthropic" else "prefix"), predicted_rule
    report = await asyncio.to_thread(cache_report, sd.parse(TEMPLATE), rows, rule=predicted_rule, price=price)
    return {
        "requests": provider.requests,
        "reported": usage.cache_read_tokens / usage.input_tokens,
        "predicted": report.share,
        "cost": usage.cost,
        "uncached": None if usage.cost is None or usage.cache_saved is None else usage.cost + usage.cache_saved,
        "predicted_cost": report.cost,
        "predicted_uncached": report.cost_uncached,
        "writes": usage.cache_write_tokens,
    }


def _share_row(rule: str, n_rows: int, got: dict[str, Any]) -> Row:
    ratio = got["predicted"] / got["reported"] if got["reported"] else None
    within = ratio is not None and abs(ratio - 1) <= SHARE_BAND
    return Row(
        f"q. prompt cache, {rule}: explain --cache predicted / reported cached share",
        f"{got['predicted']:.1%} predicted",
        f"{got['reported']:.1%} reported ({got['requests']:,} requests: 5 slots × {n_rows} rows)",
        ratio, f"{1 - SHARE_BAND:.2f}x-{1 + SHARE_BAND:.2f}x", within,
    )


async def run(quick: bool = False) -> list[Row]:
    n_rows = 40 if quick else 200
    rows: list[Row] = []
    for rule in ("anthropic", "openai"):
        got = await measure(rule, n_rows)
        rows.append(_share_row(rule, n_rows, got))
        if rule == "anthropic":
            cost, uncached = got["cost"], got["uncached"]
            ratio = cost / uncached if cost is not None and uncached else None
            rows.append(target_row(
                "q. prompt cache, anthropic: batch cost with caching / without (responses)",
                f"${cost:,.2f}" if cost is not None else "n/a",
                f"${uncached:,.2f} uncached" if uncached is not None else "n/a",
                ratio, COST_TARGET, note=f"{got['writes']:,} tokens written to the cache (1.25× input) included",
            ))
            p_cost, p_uncached = got["predicted_cost"], got["predicted_uncached"]
            rows.append(Row(
                "q. same, as explain --cache predicts it (input only)",
                f"${p_cost:,.2f}" if p_cost is not None else "n/a",
                f"${p_uncached:,.2f} uncached" if p_uncached is not None else "n/a",
                p_cost / p_uncached if p_cost is not None and p_uncached else None, "info", None,
            ))
    return rows

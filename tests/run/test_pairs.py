"""The pairwise matrix (SPEC §22): every two features together, on every entry point that takes both.

The features are the `feature` column of `run_options.DECLARED`; each has a recipe below (the
keywords it sets, the template text and tools it adds, and what must then be true of the
result). A pair runs the base template plus both recipes through `complete` (no stream),
`complete_incremental` (streamed events) and `complete_batch` (two rows); with approval it also
pauses and resumes. A feature of the batch calls' own keywords (`batch_only`) pairs with every
other feature on `complete_batch`, the one entry point that takes it. A feature of the
declaration without a recipe fails `test_every_feature_has_a_recipe`.
"""

from __future__ import annotations

import itertools
import json
import tempfile
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.usage import UsageLimits

import struckdown as sd
from struckdown.run_options import DECLARED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from media_support import png  # noqa: E402
from depth import DEEP  # noqa: E402
from memory_cache import MemoryCache  # noqa: E402
from scripted import Call, Script, Tools, auto_answer, value_for  # noqa: E402

BASE = "Summarise {{ topic }}. [[summary]]\n"
CONTEXT = {"topic": "tea"}
PRICES = {"scripted": {"input": 1.0, "output": 2.0}, "backup": {"input": 1.0, "output": 2.0}}


@dataclass
class Ctx:
    """One run of a pair: the scripted models and what the tools and callbacks saw."""

    script: Script
    backup: Script
    ran: list[str] = field(default_factory=list)  # tool side effects, in order
    retried: list[Any] = field(default_factory=list)
    cache: MemoryCache = field(default_factory=MemoryCache)
    failed_once: list[bool] = field(default_factory=list)
    mcp_url: str = ""  # the notes MCP server of the process-marked pairs
    journal: str = field(default_factory=lambda: str(Path(tempfile.mkdtemp()) / "effects.jsonl"))
    told: list[int] = field(default_factory=list)  # the rows on_result= was called with
    executed: list[int] = field(default_factory=list)  # the contexts the batch executor ran


@dataclass(frozen=True)
class Recipe:
    options: Callable[[Ctx], dict[str, Any]] = lambda ctx: {}
    text: str = ""
    tools: Callable[[Ctx], list[Any]] = lambda ctx: []
    context: dict[str, Any] = field(default_factory=dict)
    check: Callable[[Any, Ctx], None] = lambda result, ctx: None
    batch_only: bool = False  # a keyword of the batch calls only (run_options.BATCH_OPTIONS)


class LocalRows:
    """A `BatchExecutor` (executor=) that runs the rows in this process, on a second Environment."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx

    async def run_batch(self, template: str, contexts: Any, *, concurrency: int, on_result: Any, template_path: Any,
                        include_paths: Any, **kwargs: Any) -> list[Any]:
        rows = list(contexts)
        self.ctx.executed.append(len(rows))
        return await sd.Environment().complete_batch_async(
            template, rows, concurrency=concurrency, on_result=on_result, template_path=template_path,
            include_paths=include_paths, **kwargs,
        )


def _tools(ctx: Ctx) -> list[Any]:
    def lookup(order_id: str) -> str:
        """Look an order up (sync)."""
        ctx.ran.append(f"lookup {order_id}")
        return "order found"

    async def stock(item: str) -> str:
        """Check the stock of an item (async)."""
        ctx.ran.append(f"stock {item}")
        return "in stock"

    return [sd.readonly(lookup), sd.readonly(stock)]


def _refund(ctx: Ctx) -> list[Any]:
    @sd.needs_approval
    def refund(order_id: str) -> str:
        """Refund an order. Irreversible."""
        ctx.ran.append(f"refund {order_id}")
        return "refunded"

    return [refund]


def _ship(ctx: Ctx) -> list[Any]:
    def ship(order_id: str) -> str:
        """Ship an order (a write tool: journaled)."""
        ctx.ran.append(f"ship {order_id}")
        return "shipped"

    return [ship]


def _note(ctx: Ctx) -> list[Any]:
    def note() -> str:
        """Read the note."""
        return "a long note about tea"

    return [sd.readonly(note)]


def _note_cut(result: Any, ctx: Ctx) -> None:
    (output,) = [call.output for call in result.results["read_note"].tool_calls if call.tool_name == "note"]
    assert output.startswith("a long\n[truncated by struckdown: the result of tool 'note' had 21 characters")


def _called(result: Any, slot: str) -> list[str]:
    return [call.tool_name for call in result.results[slot].tool_calls]


def _journaled(result: Any, ctx: Ctx) -> None:
    """The effect journal exists with its header; every refund that ran is journaled as done."""
    lines = [json.loads(line) for line in Path(ctx.journal).read_text().splitlines()]
    assert lines[0]["journal"] == "struckdown effects"
    done = [line for line in lines if line.get("state") == "done"]
    assert len(done) == sum(1 for ran in ctx.ran if ran.startswith(("ship", "refund"))) > 0


def _rerun_recorded(result: Any, ctx: Ctx) -> None:
    """rerun_from= (SPEC §25): the forced slot ran (no reuse) and its answer is in the journal."""
    assert result["again"].startswith("answer to: Once more") and not result.results["again"].reused
    answers = [json.loads(line) for line in Path(ctx.journal).read_text().splitlines() if line.startswith('{"answer"')]
    assert "again" in {line["answer"] for line in answers}


POEM = "Here is a poem.\n" + "Whispers of the sea,\n" * 200  # a free-text answer that loops (SPEC §34)


def _loop_cut(result: Any, ctx: Ctx) -> None:
    """The loop guard: stopped, asked once more with a penalty, cut before the loop."""
    slot = result.results["poem"]
    assert slot.finish == "loop" and slot.output == "Here is a poem.\nWhispers of the sea,"
    asked = [c.info.model_settings or {} for c in ctx.script.calls if c.last_user.startswith("Write a poem")]
    penalties = [s.get("frequency_penalty") for s in asked]  # (a batch's rows interleave)
    assert penalties.count(0.5) == penalties.count(None) >= 1 and set(penalties) == {None, 0.5}


def _cost_known(result: Any, ctx: Ctx) -> None:
    assert result.usage.cost is not None and result.usage.cost > 0


def _settings_seen(result: Any, ctx: Ctx) -> None:
    summary = [c for c in ctx.script.calls if c.last_user.startswith("Summarise")]
    assert summary and all((c.info.model_settings or {}).get("temperature") == 0.25 for c in summary)


def _no_cache_settings(result: Any, ctx: Ctx) -> None:
    """prompt_cache=False: no request carries a provider cache setting (SPEC §24)."""
    assert ctx.script.calls
    for call in ctx.script.calls:
        settings = call.info.model_settings or {}
        assert not [k for k in settings if "cache" in k] and "cache_prompt" not in (settings.get("extra_body") or {})


def _image_sent(result: Any, ctx: Ctx) -> None:
    from pydantic_ai.messages import BinaryContent, UserPromptPart

    parts = [p for c in ctx.script.calls for m in c.messages for p in m.parts
             if isinstance(p, UserPromptPart) and not isinstance(p.content, str)]
    assert any(isinstance(item, BinaryContent) for p in parts for item in p.content)


def _labelled(result: Any, ctx: Ctx) -> None:
    """private= (SPEC §33): the answer that read the private value carries its label, the others none,
    and the (local, scripted) model read the value."""
    assert result.results["kept"].labels == frozenset({"private"})
    assert result.results["summary"].labels == frozenset()
    assert any("K-2291" in call.last_user for call in ctx.script.calls)


RECIPES: dict[str, Recipe] = {
    "model": Recipe(check=lambda r, ctx: r["summary"].startswith("answer to: Summarise tea")),
    "function tools": Recipe(
        text="Check the order. [[checked|use_tools=true]]\n", tools=_tools, options=lambda ctx: {"deps": {"shop": 1}},
        check=lambda r, ctx: {"lookup", "stock"} <= set(_called(r, "checked")) and "lookup text" in ctx.ran,
    ),
    "approval": Recipe(
        text="Refund the order. [[refunded|use_tools=true]]\n", tools=_refund, options=lambda ctx: {"approve": True},
        check=lambda r, ctx: "refund" in _called(r, "refunded") and "refund text" in ctx.ran,
    ),
    "budgets": Recipe(
        options=lambda ctx: {"run_limits": UsageLimits(request_limit=40), "limits": UsageLimits(request_limit=20),
                             "tool_limits": {"lookup": 3}},
        check=lambda r, ctx: r.usage.requests <= 40,
    ),
    "tool_timeout": Recipe(options=lambda ctx: {"tool_timeout": 30.0}),
    "max_seconds": Recipe(options=lambda ctx: {"max_seconds": 600.0}, check=lambda r, ctx: not any(s.truncated for s in r.results.values())),
    "tool results": Recipe(text="Read the note. [[read_note|use_tools=true]]\n", tools=_note,
                           options=lambda ctx: {"max_tool_result": 6}, check=_note_cut),
    "concurrency": Recipe(options=lambda ctx: {"max_requests": 2}, check=lambda r, ctx: ctx.script.peak <= 2),
    "guards": Recipe(text="Is this abusive? [[halt:abusive]]\n", options=lambda ctx: {"on_halt": "return"},
                     check=lambda r, ctx: r.halted is None),
    "model settings": Recipe(options=lambda ctx: {"settings": {"temperature": 0.25}}, check=_settings_seen),
    "prompt caching": Recipe(options=lambda ctx: {"prompt_cache": False}, check=_no_cache_settings),
    "response cache": Recipe(options=lambda ctx: {"cache": ctx.cache}, check=lambda r, ctx: len(ctx.cache.items) > 0),
    "templates": Recipe(options=lambda ctx: {"include_paths": []}),
    "strict_undefined": Recipe(options=lambda ctx: {"strict_undefined": True}),
    "MCP tools": Recipe(  # a real server: the process-marked pairs below
        text="Look up tea in the notes. [[noted|mcp=notes]]\n", options=lambda ctx: {"mcp": {"notes": ctx.mcp_url}},
        check=lambda r, ctx: "notes_lookup" in _called(r, "noted"),
    ),
    "max_cost": Recipe(options=lambda ctx: {"max_cost": 10.0, "prices": PRICES}, check=_cost_known),
    "prices": Recipe(options=lambda ctx: {"prices": PRICES}, check=_cost_known),
    "instrument": Recipe(options=lambda ctx: {"instrument": True}),
    "images": Recipe(text="Describe {{ pic }} [[described]]\n", context={"pic": sd.Image(png())}, check=_image_sent),
    "retries": Recipe(
        options=lambda ctx: {"retries": 2, "retry_base_delay": 0, "retry_max_delay": 0, "on_retry": ctx.retried.append},
        check=lambda r, ctx: [e.type for e in ctx.retried] == ["slot_retry"],
    ),
    "fallback": Recipe(
        text="Fallback please. [[fb]]\n", options=lambda ctx: {"fallback": [ctx.backup.model("backup")]},
        check=lambda r, ctx: r["fb"].startswith("answer to: Fallback please") and len(ctx.backup.calls) >= 1,
    ),
    "on_truncate": Recipe(options=lambda ctx: {"on_truncate": "error"}),
    # in a segment of its own: no other recipe's tool slot reads the private value
    "flow": Recipe(
        text="<checkpoint>\nKeep {{ secret }} in mind. [[kept]]\n<checkpoint>\n", context={"secret": "K-2291"},
        options=lambda ctx: {"private": ["secret"], "local_models": ["backup"]}, check=_labelled,
    ),
    "journal": Recipe(
        text="Ship order J1. [[shipped|use_tools=true]]\n", tools=_ship,
        options=lambda ctx: {"journal": ctx.journal}, check=_journaled,
    ),
    "loop guard": Recipe(text="Write a poem. [[poem]]\n", options=lambda ctx: {"loop_guard": True}, check=_loop_cut),
    "rerun": Recipe(
        text="Once more. [[again]]\n", options=lambda ctx: {"journal": ctx.journal, "rerun_from": "again"},
        check=_rerun_recorded,
    ),
    # the batch calls' own keywords
    "batch rows": Recipe(
        options=lambda ctx: {"concurrency": 1, "on_result": lambda index, outcome: ctx.told.append(index)},
        check=lambda r, ctx: sorted(ctx.told) == [0, 1], batch_only=True,
    ),
    "executor": Recipe(options=lambda ctx: {"executor": LocalRows(ctx)}, check=lambda r, ctx: ctx.executed == [2],
                       batch_only=True),
    "provider_batch": Recipe(options=lambda ctx: {"provider_batch": False}, batch_only=True),  # off: the rows' own requests
    "batch budget": Recipe(
        options=lambda ctx: {"batch_limits": UsageLimits(request_limit=200)}, check=lambda r, ctx: r.usage.requests >= 1,
        batch_only=True,
    ),
}
FEATURES = sorted(RECIPES)
BATCH_ONLY = [f for f in FEATURES if RECIPES[f].batch_only]
IN_PROCESS = [f for f in FEATURES if f != "MCP tools" and f not in BATCH_ONLY]
PAIRS = list(itertools.combinations(IN_PROCESS, 2))
# a batch keyword with every other feature (and every other batch keyword): complete_batch takes them
WITH_BATCH_KEYWORDS = [p for p in itertools.combinations(IN_PROCESS + BATCH_ONLY, 2) if set(p) & set(BATCH_ONLY)]
# the README run: every pair through complete(), an eighth of them through each other entry point
# (a different eighth each), every pair with a batch keyword in a batch; the deep stage of .ci/run:
# every pair everywhere
STREAMED = PAIRS if DEEP else PAIRS[0::8]
BATCHED = (PAIRS if DEEP else PAIRS[4::8]) + WITH_BATCH_KEYWORDS


def _answer(ctx: Ctx) -> Callable[[Call], Any]:
    from pydantic_ai.exceptions import ModelHTTPError

    def answer(call: Call) -> Any:
        if ctx.retried is not None and not ctx.failed_once and _wants_retry(ctx):
            ctx.failed_once.append(True)
            raise ModelHTTPError(503, "scripted", {"error": {"message": "overloaded"}})
        if "Fallback please" in call.last_user:
            raise ModelHTTPError(400, "scripted", {"error": {"message": "this model cannot answer that"}})
        if call.last_user.startswith("Write a poem"):
            return POEM
        if "abusive" in call.last_user:
            return {"reason": "a polite request", "triggered": False}
        called = {text.partition("(")[0] for role, text in call.turns if role == "call"}
        refunding = "Refund" in call.last_user  # each tool slot calls its own tools
        noting = "notes" in call.last_user
        for tool in call.info.function_tools:
            if tool.name.startswith("notes_"):
                if noting and tool.name == "notes_lookup" and tool.name not in called:
                    return Tools([("notes_lookup", {"word": "tea"})])
                continue
            if tool.name not in called and (tool.name == "refund") == refunding and not noting:
                return Tools([(tool.name, {"order_id": "text"} if "order_id" in str(tool.parameters_json_schema)
                               else value_for(tool.parameters_json_schema))])
        return auto_answer(call)

    return answer


def _wants_retry(ctx: Ctx) -> bool:
    return getattr(ctx, "retry_on", False)


def _setup(features: tuple[str, ...], mcp_url: str = "") -> tuple[Ctx, str, dict[str, Any], dict[str, Any]]:
    ctx = Ctx(Script(lambda call: None), Script(auto_answer), mcp_url=mcp_url)
    ctx.script.answer = _answer(ctx)
    ctx.retry_on = "retries" in features  # type: ignore[attr-defined]
    template, context = BASE, dict(CONTEXT)
    options: dict[str, Any] = {"model": ctx.script.model(), "tools": []}
    for name in features:
        recipe = RECIPES[name]
        template += recipe.text
        context.update(recipe.context)
        options["tools"] += recipe.tools(ctx)
        for key, value in recipe.options(ctx).items():
            options[key] = {**options[key], **value} if isinstance(value, dict) and key in options else value
    return ctx, template, context, options


def _check(features: tuple[str, ...], result: Any, ctx: Ctx) -> None:
    assert result.halted is None and result.paused is None
    for name in features:
        RECIPES[name].check(result, ctx)


def test_every_feature_has_a_recipe() -> None:
    """A new option's feature is in the matrix from its first commit."""
    declared = {option.feature for option in DECLARED.values()}
    assert declared <= set(RECIPES), f"features without a recipe: {sorted(declared - set(RECIPES))}"


@pytest.mark.parametrize("pair", PAIRS, ids=[" + ".join(p) for p in PAIRS])
def test_pair_with_complete(pair: tuple[str, ...]) -> None:
    ctx, template, context, options = _setup(pair)
    result = sd.complete(template, context, **options)
    _check(pair, result, ctx)


@pytest.mark.parametrize("pair", STREAMED, ids=[" + ".join(p) for p in STREAMED])
def test_pair_with_streamed_events(pair: tuple[str, ...]) -> None:
    ctx, template, context, options = _setup(pair)
    events = list(sd.complete_incremental(template, context, **options))
    assert events[-1].type == "processing_complete"
    _check(pair, events[-1].result, ctx)


@pytest.mark.parametrize("pair", BATCHED, ids=[" + ".join(p) for p in BATCHED])
def test_pair_in_a_batch(pair: tuple[str, ...]) -> None:
    ctx, template, context, options = _setup(pair)
    options.setdefault("concurrency", 2)
    results = sd.complete_batch(template, [context, context], **options)
    assert len(results) == 2
    for result in results:
        assert isinstance(result, sd.Result), result
    _check(pair, results[0], ctx)


@pytest.mark.parametrize("feature", [f for f in IN_PROCESS if f != "approval"])
def test_feature_across_a_pause_and_resume(feature: str) -> None:
    """Approval by pause and resume with every other feature: what the state records comes back
    by itself; only what has no plain form (functions, Model objects) is passed again."""
    import json

    from struckdown.run_options import OPTIONS

    ctx, template, context, options = _setup(("approval", feature))
    options["approve"] = None
    with pytest.raises(sd.Paused) as stopped:
        sd.complete(template, context, **options)
    paused = stopped.value
    assert [r.tool_name for r in paused.requests] == ["refund"]
    assert "refund text" not in ctx.ran
    state = json.loads(json.dumps(paused.state))
    again = {k: v for k, v in options.items() if k not in state["options"] and OPTIONS[k].plain(v) is None}
    # a state holds its context as JSON: values JSON cannot hold (an image) are passed again (docs/approval.md)
    resumed = sd.resume(state, {r.id: True for r in paused.requests}, context=context, **again)
    _check(("approval", feature), resumed, ctx)


def test_resume_takes_only_run_keywords() -> None:
    with pytest.raises(TypeError, match="bogus"):
        sd.resume({}, {}, bogus=1)  # type: ignore[call-arg]


@pytest.fixture(scope="module")
def notes_url() -> Any:
    """The notes MCP server (tests/mcp/notes_server.py) over streamable HTTP on 127.0.0.1."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
    from mcp_support import serving
    from notes_server import Record, build

    with serving(build(Record()).streamable_http_app()) as url:
        yield url


@pytest.mark.process
@pytest.mark.parametrize("feature", IN_PROCESS)
def test_mcp_tools_with_every_feature(feature: str, notes_url: str) -> None:
    pair = ("MCP tools", feature)
    ctx, template, context, options = _setup(pair, notes_url)
    if feature == "flow":
        # SPEC §33 (docs/flow.md): with labels given, an agent slot that reads MCP results (untrusted)
        # and can call MCP tools (an external sink) is refused before any call, naming both
        from struckdown.errors import FlowError

        with pytest.raises(FlowError, match=r"untrusted text \"noted's tool results\" reaches slot 'noted', "
                                            r"which can call the external tool 'MCP tools'"):
            sd.complete(template, context, **options)
        assert ctx.script.calls == []
        return
    _check(pair, sd.complete(template, context, **options), ctx)
    ctx, template, context, options = _setup(pair, notes_url)
    results = sd.complete_batch(template, [context, context], concurrency=2, **options)
    assert all(isinstance(r, sd.Result) for r in results), results
    _check(pair, results[1], ctx)

"""What a slot does when its free-text answer loops (SPEC §34; the detector: loop_guard.py).

The stream reader (text_stream.py) feeds the answer to a `LoopDetector` and, as soon as
it sees a loop, ends the stream (`RetryRun.stop_stream`, read by the model stack's stream:
the answer ends there as if the model had stopped, and the HTTP response is closed).
`guarded_run` then asks once more with a repetition
penalty in the provider's own setting (`penalty_settings`); if that answer loops too, the
slot keeps the text before the loop (`finish == "loop"`, a notice) and the run goes on.
An agent slot (`use_tools=true`) is not asked again, since its tools would run again: it
keeps the text before the loop at once. A request that does not stream (`complete()`,
`stream=False`, a batch row, a model without streaming) is checked when its answer
arrives: the same re-ask and cut, but the loop has run to the output cap first.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .loop_guard import Loop, LoopDetector, find_loop, kept_text

if TYPE_CHECKING:
    from .text_stream import TextStream

#: OpenAI's `frequency_penalty` (-2 to 2) on the second ask, and what other providers that
#: take pydantic-ai's `frequency_penalty` setting get.
FREQUENCY_PENALTY = 0.5
#: llama.cpp's own samplers on the second ask (its /completion and /v1/chat/completions
#: parameters, sent in the request body): a mild repeat penalty over the last 256 tokens and
#: DRY ("don't repeat yourself"), which penalises extending a sequence that already occurred.
LLAMA_CPP_PENALTY: Mapping[str, Any] = {
    "repeat_penalty": 1.15, "repeat_last_n": 256, "dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2,
}


@dataclass
class LoopWatch:
    """One slot's loop guard: its detector, and whether the answer ended cut at a loop."""

    slot: str
    detector: LoopDetector
    agent_slot: bool  # use_tools: never asked again (its tools would run again)
    streamer: TextStream | None = None
    looped: bool = False

    def unwatched(self, run: Any) -> tuple[Loop, str] | None:
        """A loop in an answer that arrived whole (nothing streamed through the detector)."""
        output = getattr(run, "output", None)
        if self.detector.text or not isinstance(output, str):
            return None
        loop = find_loop(output)
        return (loop, output) if loop is not None else None


def loop_watch(default: bool, slot: str, is_text: bool, control: Mapping[str, Any], use_tools: bool) -> LoopWatch | None:
    """The slot's watch, or None: typed answers, and `loop_guard=false` (the slot's option
    wins over the run's)."""
    asked = control.get("loop_guard")
    if not is_text or not (default if asked is None else asked):
        return None
    return LoopWatch(slot, LoopDetector(), use_tools)


def penalty_settings(model: Any) -> dict[str, Any]:
    """The second ask's repetition penalty, in the provider's own setting: llama.cpp's
    samplers (an OpenAI-compatible server that is not OpenAI's), nothing for Anthropic
    (which has none: the second ask is a plain one), `frequency_penalty` for the rest
    (OpenAI, Ollama, Groq, Mistral, Gemini, scripted models)."""
    from .prompt_cache import provider_kind

    kind = provider_kind(model)
    if kind == "llama.cpp":
        return {"extra_body": dict(LLAMA_CPP_PENALTY)}
    if kind == "anthropic":
        return {}
    return {"frequency_penalty": FREQUENCY_PENALTY}


def penalized(settings: Any, model: Any) -> Any:
    """`settings` (a ModelSettings, or a function of the run context giving one) with the
    penalty over them; an `extra_body` already there (a prompt-cache setting) is kept."""
    from pydantic_ai.settings import ModelSettings

    extra = penalty_settings(model)

    def merge(given: Any) -> ModelSettings:
        out = dict(given or {})
        for key, value in extra.items():
            out[key] = {**(out.get(key) or {}), **value} if key == "extra_body" else value
        merged: ModelSettings = ModelSettings(**out)  # type: ignore[typeddict-item]
        return merged

    if callable(settings):
        return lambda ctx: merge(settings(ctx))
    return merge(settings)


async def guarded_run(watch: LoopWatch | None, attempts: Any, agent: Any, call: dict[str, Any]) -> Any:
    """`agent.run(**call)` under the loop guard: the run's result, or (a loop twice) a
    `CutRun` holding the text before the loop."""
    if watch is None:
        return await agent.run(**call)
    found = await _ask(watch, agent, call)
    if not isinstance(found, tuple):
        return found
    if not watch.agent_slot:
        logging.getLogger("struckdown").info("slot %s: %s; asking once more with a repetition penalty",
                                             watch.slot, found[0].describe())
        if watch.streamer is not None:
            await watch.streamer.retract("loop")
        attempts.spent_runs.append(attempts.usage)
        with attempts.running() as usage:
            again = {**call, "usage": usage, "model_settings": penalized(call["model_settings"], attempts.model)}
            found = await _ask(watch, agent, again)
        if not isinstance(found, tuple):
            return found
    return await _cut(watch, attempts, call, *found)


async def _ask(watch: LoopWatch, agent: Any, call: dict[str, Any]) -> Any:
    """The run's result, or (the loop, the text it was found in)."""
    from .slot_run import current

    detector, streamer = watch.detector, watch.streamer
    retries = current().retries
    if retries is not None:
        retries.stop_stream = False  # the attempt's retry state may be the one the first ask stopped
    if streamer is not None:
        streamer.stop = _stop_stream
    run = await agent.run(**call)
    if detector.loop is not None:
        return detector.loop, detector.text
    return watch.unwatched(run) or run


def _stop_stream() -> None:
    """End the stream of the request in progress (the attempt's retry state carries the flag)."""
    from .slot_run import current

    run = current().retries
    if run is not None:
        run.stop_stream = True


async def _cut(watch: LoopWatch, attempts: Any, call: dict[str, Any], loop: Loop, text: str) -> Any:
    """The slot's answer is the text before the loop; the stream shows just that."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from ..notices import warn
    from .deadline import CutRun

    kept = kept_text(text, loop)
    watch.looped = True
    streamer = watch.streamer
    if streamer is not None:
        await streamer.retract("loop")
        if kept:
            await streamer.show(kept)
    again = "" if watch.agent_slot else " and again when asked once more with a repetition penalty"
    warn(f"slot {watch.slot!r}: the answer looped ({loop.describe()}){again}; "
         "it keeps the text before the loop (finish='loop')")
    history, prompt = list(call.get("message_history") or []), call.get("user_prompt")
    new: list[Any] = []
    if prompt is not None:
        new.append(ModelRequest(parts=[UserPromptPart(prompt)]))
    model_name = getattr(attempts.model, "model_name", None)
    new.append(ModelResponse(parts=[TextPart(kept)], finish_reason="stop", model_name=model_name))
    return CutRun(kept, [*history, *new], new, attempts.usage)


def finish_of(watch: LoopWatch | None, truncated: bool) -> str:
    """`SlotResult.finish`: "loop" (cut at a loop), "length" (at its token limit) or "stop"."""
    if watch is not None and watch.looped:
        return "loop"
    return "length" if truncated else "stop"


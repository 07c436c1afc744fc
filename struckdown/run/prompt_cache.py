"""Provider prompt caching, planned from the Program (SPEC §24, docs/caching.md).

The plan knows which slots a later slot of the same conversation follows, so each request
asks the provider to cache what later requests will resend, through pydantic-ai's own
settings:

* Anthropic: a `cache_control` breakpoint after the system instructions
  (`anthropic_cache_instructions`), after the tool definitions of an agent slot
  (`anthropic_cache_tool_definitions`), and at the end of the request when a later slot
  of the conversation (or the agent loop's next request) resends it (`anthropic_cache`):
  at most 3 of Anthropic's 4.
* OpenAI's own API: `prompt_cache_key` = the template and the segment, so the requests
  that share a prefix land on the same cache; under a shared host (`sd serve`) also the
  asking API key's id (`HostPolicy.tenant`, SPEC §30), so keys never share a cache key.
* An OpenAI-compatible server elsewhere (llama.cpp): `cache_prompt: true` in the body.

Nothing is reordered: the settings only mark where the prefix ends. A setting the caller
gave (in `settings=`) wins over these. `prompt_cache=False` (run option or slot option)
sends none of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_ai.settings import ModelSettings

from ..syntax.nodes import Slot, walk

if TYPE_CHECKING:
    from ..plan import Program


@dataclass(frozen=True)
class PromptCachePlan:
    """What a run's requests ask the provider to cache (None of it when `enabled` is False)."""

    enabled: bool
    template_key: str  # a digest of the template's text: same template, same key
    segments: Mapping[str, int]  # slot key → its segment
    followed: frozenset[str]  # slot keys a later slot of the same segment follows

    def settings(self, model: Any, slot: str, *, instructions: bool, tools: bool, asked: Any = None) -> dict[str, Any]:
        """The model settings that ask `model` to cache this slot's request ({} for none).
        `asked`: the slot's `prompt_cache=` option (None: the run's switch decides)."""
        if not (self.enabled if asked is None else bool(asked)):
            return {}
        kind = provider_kind(model)
        if kind == "anthropic":
            out: dict[str, Any] = {}
            if instructions:
                out["anthropic_cache_instructions"] = True
            if tools:
                out["anthropic_cache_tool_definitions"] = True
            if tools or slot in self.followed:
                out["anthropic_cache"] = True
            return out
        if kind == "openai":
            return {"openai_prompt_cache_key": f"{self.template_key}-s{self.segments.get(slot, 0)}"}
        if kind == "llama.cpp":
            return {"extra_body": {"cache_prompt": True}}
        return {}


def plan_prompt_cache(program: Program, enabled: bool, tenant: str | None = None) -> PromptCachePlan:
    """The Program's prompt-cache facts (computed once per Program) with the run's switch;
    `tenant` (the host's id of who asks) becomes part of the cache key."""
    facts = program.memo.get("prompt_cache")
    if facts is None:
        digest = hashlib.sha256(program.template.source.encode("utf-8")).hexdigest()[:16]
        segments: dict[str, int] = {}
        followed: set[str] = set()
        for segment in program.segments:
            asking = [n for n in walk(segment.nodes) if isinstance(n, Slot) and not n.is_guard]
            for node in asking:
                segments.setdefault(node.key, segment.index)
            followed.update(n.key for n in asking[:-1])
        facts = (f"sd-{digest}", segments, frozenset(followed))
        program.memo["prompt_cache"] = facts
    if tenant:
        return PromptCachePlan(enabled, f"{facts[0]}-t{tenant}", facts[1], facts[2])
    return PromptCachePlan(enabled, *facts)


def with_cache_settings(settings: ModelSettings, ours: Mapping[str, Any]) -> ModelSettings:
    """`settings` with ours beneath: a key the caller set wins; `extra_body` is merged."""
    if not ours:
        return settings
    merged: dict[str, Any] = dict(settings)
    for key, value in ours.items():
        if key == "extra_body" and isinstance(merged.get(key), Mapping):
            merged[key] = {**value, **merged[key]}
        else:
            merged.setdefault(key, value)
    out: ModelSettings = ModelSettings(**merged)  # type: ignore[typeddict-item]
    return out


_KINDS: dict[int, tuple[Any, str | None]] = {}  # id(model) → (the model, pinned; its kind)


def provider_kind(model: Any) -> str | None:
    """"anthropic", "openai" (OpenAI's own API), "llama.cpp" (an OpenAI-compatible server
    elsewhere) or None (a model that takes no cache request: test, function, others).
    Asked twice a slot request (here and by the context window), so kept per model object."""
    held = _KINDS.get(id(model))
    if held is not None and held[0] is model:
        return held[1]
    kind = _provider_kind(model)
    if len(_KINDS) >= 1024:
        _KINDS.clear()
    _KINDS[id(model)] = (model, kind)
    return kind


def _provider_kind(model: Any) -> str | None:
    from pydantic_ai.models.wrapper import WrapperModel

    while isinstance(model, WrapperModel):
        model = model.wrapped
    system = getattr(model, "system", None)
    if system == "anthropic":
        return "anthropic"
    if system != "openai":
        return None
    from urllib.parse import urlsplit

    try:
        base = str(getattr(model, "base_url", "") or "")
    except Exception:  # noqa: BLE001 - a provider that builds its client lazily
        return None
    host = urlsplit(base).hostname or ""
    if host.endswith("api.openai.com") or host.endswith(".openai.azure.com"):
        return "openai"
    return "llama.cpp" if host else None

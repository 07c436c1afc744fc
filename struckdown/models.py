"""Model resolution (SPEC §7): a Model instance, a pydantic-ai model string, or the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .errors import ConfigurationError

MISSING_MODEL = (
    "no model configured: pass --model (or model= in Python), or set STRUCKDOWN_MODEL "
    "(e.g. openai-chat:gpt-4o-mini), or LLM_API_BASE (+ LLM_API_KEY) for an "
    "OpenAI-compatible server"
)


def model_from_env(env: Mapping[str, str] | None = None) -> Any:
    env = os.environ if env is None else env
    name = env.get("STRUCKDOWN_MODEL") or env.get("DEFAULT_LLM")
    base = env.get("LLM_API_BASE")
    if base:
        return openai_compatible(name or "default", base, env.get("LLM_API_KEY"))
    if name:
        return resolve_model(name)
    raise ConfigurationError(MISSING_MODEL)


def openai_compatible(name: str, base_url: str, api_key: str | None) -> Any:
    """A chat-completions endpoint (llama.cpp, vLLM, Ollama, proxies)."""
    return _openai_compatible(_strip_provider(name), base_url.rstrip("/"), api_key or "not-needed")


@lru_cache(maxsize=32)
def _openai_compatible(name: str, base_url: str, api_key: str) -> Any:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(name, provider=OpenAIProvider(base_url=base_url, api_key=api_key))


def _strip_provider(name: str) -> str:
    for prefix in ("openai-chat:", "openai:"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def resolve_model(model: Any) -> Any:
    """A Model instance passes through; a string becomes a pydantic-ai model; None → env."""
    if model is None:
        return model_from_env()
    if not isinstance(model, str):
        return model
    if model == "test":
        from pydantic_ai.models.test import TestModel

        return TestModel()
    base = os.environ.get("LLM_API_BASE")
    if base and ":" not in model:
        return openai_compatible(model, base, os.environ.get("LLM_API_KEY"))
    return _infer(model)


@lru_cache(maxsize=32)
def _infer(name: str) -> Any:
    from pydantic_ai.models import infer_model

    try:
        return infer_model(name)
    except Exception as exc:  # unknown provider, missing key: say what to do
        raise ConfigurationError(f"cannot use model {name!r}: {exc}") from exc


def model_label(model: Any) -> str:
    """A stable name for a model (for cache keys and messages)."""
    if isinstance(model, str):
        return model
    system = getattr(model, "system", "") or ""
    name = getattr(model, "model_name", "") or type(model).__name__
    base = getattr(model, "base_url", None) or ""
    return f"{system}:{name}@{base}" if base else f"{system}:{name}"

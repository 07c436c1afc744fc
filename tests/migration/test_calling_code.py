"""0.x's calling code and settings keep working (SPEC §11): models, names, keywords, cache."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.models.openai import OpenAIChatModel

import struckdown as sd
from scripted import Script
from struckdown.models import endpoint_of, model_from_env

BASE = "http://127.0.0.1:8765/v1"
MODEL = frozenset({"model"})


@pytest.fixture(autouse=True)
def clean_model_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_BASE", "LLM_API_KEY", "OPENAI_BASE_URL", "STRUCKDOWN_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    yield


def from_env(**env: str) -> Any:
    return model_from_env(env, store=sd.Environment().models)


# -- models ------------------------------------------------------------------------------------


def test_default_llm_may_be_a_bare_openai_name() -> None:
    model = from_env(DEFAULT_LLM="gpt-4.1-mini", OPENAI_API_KEY="sk-x")
    assert isinstance(model, OpenAIChatModel) and model.model_name == "gpt-4.1-mini"
    assert endpoint_of(model) == "https://api.openai.com/v1"


def test_llm_api_base_serves_a_name_with_a_tag() -> None:
    model = from_env(DEFAULT_LLM="qwen3:8b", LLM_API_BASE=BASE, LLM_API_KEY="k")
    assert isinstance(model, OpenAIChatModel) and model.model_name == "qwen3:8b" and endpoint_of(model) == BASE
    other = from_env(DEFAULT_LLM="llama3.2:3b", LLM_API_BASE=BASE)
    assert other.model_name == "llama3.2:3b" and endpoint_of(other) == BASE
    bare = from_env(DEFAULT_LLM="gpt-4.1-mini", LLM_API_BASE=BASE)
    assert bare.model_name == "gpt-4.1-mini" and endpoint_of(bare) == BASE


def test_credentials_pick_the_endpoint_and_key() -> None:
    env = sd.Environment()
    with_base = sd.LLMCredentials(api_key="sk-abcdefghijklmnop", base_url=BASE)
    assert repr(with_base) == f"LLMCredentials(api_key='sk-a***mnop', base_url='{BASE}')"
    from struckdown.compat.calls import call_options

    model = call_options("complete", {"model": "qwen3:8b", "credentials": with_base}, env, MODEL)["model"]
    assert model.model_name == "qwen3:8b" and endpoint_of(model) == BASE
    assert model.client.api_key == "sk-abcdefghijklmnop"
    keyed = call_options("complete", {"model": "gpt-4o-mini", "credentials": sd.LLMCredentials(api_key="sk-mine")}, env, MODEL)
    assert keyed["model"].model_name == "gpt-4o-mini" and keyed["model"].client.api_key == "sk-mine"
    assert sd.LLMCredentials.from_env({"LLM_API_KEY": "k", "LLM_API_BASE": BASE}) == sd.LLMCredentials("k", BASE)
    with pytest.raises(TypeError, match="not to a Model object"):
        sd.complete("[[a]]", model=Script(lambda c: "x").model(), credentials=with_base)


def test_compatibility_names() -> None:
    assert sd.StruckdownResult is sd.Result
    assert sd.TemplateError is sd.TemplateSyntaxError
    assert sd.LLMError is sd.ModelError and issubclass(sd.RateLimitError, sd.LLMError)
    assert sd.OnHalt.__args__ == ("raise", "return")  # type: ignore[attr-defined]
    with pytest.raises(sd.TemplateError):
        sd.parse("[[")


# -- keywords ----------------------------------------------------------------------------------

ENTRY_POINTS: dict[str, Callable[..., Any]] = {
    "complete": lambda **kw: sd.complete("Q [[a]]", **kw),
    "complete_async": lambda **kw: asyncio.run(sd.complete_async("Q [[a]]", **kw)),
    "complete_incremental": lambda **kw: sd.complete_incremental("Q [[a]]", **kw),
    "complete_incremental_async": lambda **kw: sd.complete_incremental_async("Q [[a]]", **kw),
    "complete_batch": lambda **kw: sd.complete_batch("Q [[a]]", [{}, {}], **kw),
    "complete_batch_async": lambda **kw: asyncio.run(sd.complete_batch_async("Q [[a]]", [{}, {}], **kw)),
    "Environment.complete": lambda **kw: sd.Environment().complete("Q [[a]]", **kw),
    "Environment.complete_batch": lambda **kw: sd.Environment().complete_batch("Q [[a]]", [{}], **kw),
}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_an_unknown_keyword_is_a_type_error_at_the_call(name: str) -> None:
    script = Script(lambda c: "x")
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'stop_att'; did you mean 'stop_at'\?"):
        ENTRY_POINTS[name](model=script.model(), stop_att="a")  # the generator functions raise before iterating
    assert script.calls == []  # before any model call


def test_removed_keywords_say_what_replaced_them() -> None:
    with pytest.raises(TypeError, match="strict_params.*checked by pydantic-ai"):
        sd.complete("Q [[a]]", model="test", strict_params=True)
    with pytest.raises(TypeError, match="both settings= and extra_kwargs="):
        sd.complete("Q [[a]]", model="test", settings={}, extra_kwargs={})


def test_batch_takes_max_concurrent_and_on_complete() -> None:
    done: list[int] = []
    script = Script(lambda c: c.last_user)
    results = sd.complete_batch(
        "Row {{ n }} [[a]]", [{"n": 1}, {"n": 2}, {"n": 3}], model=script.model(), max_concurrent=1,
        on_complete=lambda i, r: done.append(i),
    )
    assert [r["a"] for r in results] == ["Row 1", "Row 2", "Row 3"]  # type: ignore[index]
    assert done == [0, 1, 2] and script.peak == 1
    with pytest.raises(TypeError, match="both on_result= and on_complete="):
        sd.complete_batch("Q [[a]]", [{}], model="test", on_result=print, on_complete=print)


def test_extra_kwargs_are_settings() -> None:
    script = Script(lambda c: "x")
    sd.complete("Q [[a]]", model=script.model(), extra_kwargs={"max_tokens": 7, "stream_debounce_ms": 50, "thinking": "off"})
    assert script.calls[0].info.model_settings == {"max_tokens": 7, "temperature": 0.7, "max_retries": 0}


# -- the response cache ------------------------------------------------------------------------


def test_struckdown_cache_zero_turns_the_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "default"))
    script = Script(lambda c: "x")
    for value in ("0", "false", "OFF"):
        monkeypatch.setenv("STRUCKDOWN_CACHE", value)
        sd.complete("Q [[a]]", model=script.model(), cache=True)
    assert len(script.calls) == 3 and not (tmp_path / "default").exists()


def test_struckdown_cache_names_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_CACHE", str(tmp_path / "here"))
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "not-here"))
    script = Script(lambda c: "x")
    env = sd.Environment(cache=True)
    first = env.complete("Q [[a]]", model=script.model())
    second = env.complete("Q [[a]]", model=script.model())
    assert len(script.calls) == 1 and second.results["a"].cached and not first.results["a"].cached
    assert (tmp_path / "here").is_dir() and not (tmp_path / "not-here").exists()

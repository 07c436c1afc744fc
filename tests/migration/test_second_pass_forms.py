"""Issue 32, items 8 and 10: template forms of 0.18, web actions' options, providers, .env."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.models.openai import OpenAIChatModel

import struckdown as sd
from cli_support import plain_environment  # noqa: F401
from cli_support import sd as cli
from scripted import Script
from struckdown.actions import page_to_markdown
from struckdown.models import endpoint_of, resolve_model

# -- 10. template forms ------------------------------------------------------------------------


def test_set_values_and_macros_carry_past_later_slots() -> None:
    script = Script(lambda c: "ok")
    template = (
        "{% set greeting = 'hi' %}{% macro tag(x) %}<{{ x }}>{% endmacro %}A {{ greeting }} [[a]] "
        "B {{ greeting }} {{ tag('y') }} [[b]]"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "undefined variable" warning for greeting or tag
        sd.complete(template, model=script.model())
    assert [c.last_user for c in script.calls] == ["A hi", "B hi <y>"]
    with pytest.raises(sd.TemplateRuntimeError, match="greeting"):
        # another segment does not see them (0.18 rendered each segment on its own)
        sd.complete("{% set greeting = 'hi' %}A [[a]]<checkpoint>B {{ greeting }} [[b]]",
                    model=script.model(), strict_undefined=True)


def test_unnamed_checkpoints_are_named_in_events() -> None:
    events = list(sd.complete_incremental("A [[a]]<checkpoint>B [[b]]<checkpoint>Third</checkpoint>C [[c]]"
                                          "<checkpoint/>D [[d]]", model=Script(lambda c: "x").model()))
    names = sorted((e.segment, e.name) for e in events if isinstance(e, sd.CheckpointReached))
    assert names == [(0, None), (1, "Checkpoint 1"), (2, "Third"), (3, "Checkpoint 3")]


def test_nested_together_joins_the_outer_group() -> None:
    def last_word(c: Any) -> str:
        return c.last_user.split()[-1]

    script = Script(lambda c: last_word(c).lower(), meet=2, meet_when=lambda c: last_word(c) in ("X", "Y"))
    result = sd.complete("Pre <together>X [[x]] <together>Y [[y]]</together></together> Z [[z]]",
                         model=script.model())
    assert dict(result) == {"x": "x", "y": "y", "z": "z"} and script.peak >= 2  # x and y were in flight together
    assert sorted(c.last_user for c in script.calls[:2]) == ["Pre\n\nX", "Pre\n\nY"]  # neither saw the other


def test_system_local_replace_keeps_the_global_text() -> None:
    script = Script(lambda c: "ok")
    sd.complete(
        "<system>Be terse.</system><system local>Use French.</system>A [[a]]"
        "<system local replace>Use German.</system>B [[b]]<checkpoint>C [[c]]",
        model=script.model(),
    )
    assert {c.last_user: c.instructions for c in script.calls} == {
        "A": "Be terse.\n\nUse French.", "B": "Be terse.\n\nUse German.", "C": "Be terse.",
    }


PAGE = (
    "<html><head><style>p{}</style></head><body><nav>Home | About</nav>"
    "<h1>Title</h1><p>Some <em>very</em> <a href='https://e.org/x'>linked</a> text.</p>"
    "<footer>(c) us</footer></body></html>"
)


def test_markdownify_keeps_links_and_emphasis() -> None:
    result = sd.complete("[[@markdownify:md|html=page]] [[@markdownify:all|html=page, extract_content=false]]",
                         {"page": PAGE})
    assert result["md"] == "# Title\n\nSome *very* [linked](https://e.org/x) text."
    assert "Home | About" in result["all"] and "(c) us" in result["all"]


class _Page:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.headers = self

    def get_content_charset(self) -> str:
        return "utf-8"

    def read(self, n: int) -> bytes:
        return self.body[:n]

    def __enter__(self) -> _Page:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


@pytest.fixture
def fetched(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, float]]]:
    asked: list[tuple[str, float]] = []

    def urlopen(url: str, timeout: float) -> _Page:
        asked.append((url, timeout))
        return _Page(PAGE.encode())

    monkeypatch.setenv("STRUCKDOWN_ALLOW_FETCH", "1")
    monkeypatch.setattr("urllib.request.urlopen", urlopen)
    yield asked


def test_fetch_takes_0_18_options_under_the_host_caps(fetched: list[tuple[str, float]]) -> None:
    result = sd.complete(
        '[[@fetch:a|url="https://e.org", timeout=99, max_chars=7]] [[@fetch:b|url="https://e.org", raw=true, '
        'timeout=2]] [[@fetch:c|url="https://e.org"]]'
    )
    assert result["a"] == "# Title" and result["b"] == PAGE
    assert result["c"] == page_to_markdown(PAGE)
    assert [t for _, t in fetched] == [10.0, 2.0, 10.0]  # 99 s is over the host's 10 s cap
    with pytest.warns(UserWarning, match="playwright= is accepted"):
        sd.complete('[[@fetch:d|url="https://e.org", playwright=true]]')
    with pytest.raises(sd.TemplateSyntaxError, match="unknown option 'retries'"):
        sd.parse('[[@fetch:d|url="https://e.org", retries=3]]')


def test_search_takes_0_18_options() -> None:
    asked: list[tuple[str, int]] = []

    def backend(query: str, n: int) -> list[dict[str, str]]:
        asked.append((query, n))
        return [{"title": "Apples", "href": "https://e.org/a", "body": "Crisp fruit."}] * n

    env = sd.Environment()
    env.register_action("search", sd.make_search(backend))
    with pytest.warns(UserWarning, match=r"embed=, raw= accepted for 0.18's templates and change nothing"):
        result = env.complete('[[@search:h|"apples", max_results=3, max_tokens=5, timeout=3, embed=true, raw=true]]')
    assert asked == [("apples", 3)] and result["h"] == "1. Apples — https://e.org/a"[:20]


# -- 8. providers ------------------------------------------------------------------------------


@pytest.fixture
def no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_BASE", "LLM_API_KEY", "OLLAMA_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.usefixtures("no_model_env")
def test_ollama_defaults_to_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model("ollama:qwen3:8b", sd.Environment().models)
    assert isinstance(model, OpenAIChatModel) and model.model_name == "qwen3:8b"
    assert endpoint_of(model) == "http://localhost:11434/v1"
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://gpu:11434/v1/")
    assert endpoint_of(resolve_model("ollama:qwen3:8b", sd.Environment().models)) == "http://gpu:11434/v1"


@pytest.mark.usefixtures("no_model_env")
@pytest.mark.parametrize(("name", "extra"), [
    ("anthropic:claude-3-5-haiku-latest", "anthropic"), ("google-gla:gemini-2.0-flash", "google"),
    ("mistral:mistral-small-latest", "mistral"), ("groq:llama-3.3-70b-versatile", "groq"),
])
def test_a_provider_without_its_extra_names_the_extra(name: str, extra: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util
    import sys

    sdk = {"anthropic": "anthropic", "google": "google.genai", "mistral": "mistralai", "groq": "groq"}[extra]
    if extra == "anthropic":  # the dev extra installs its SDK (tests/run/test_prompt_cache.py): made absent here
        for module in [m for m in sys.modules if m == "anthropic" or m.startswith("anthropic.")
                       or m.endswith((".models.anthropic", ".providers.anthropic"))]:
            monkeypatch.delitem(sys.modules, module)
        monkeypatch.setitem(sys.modules, "anthropic", None)  # importing it raises ImportError
        sd.Environment().models.clear()
    else:
        assert importlib.util.find_spec(sdk) is None, f"{sdk} is installed: this test needs it absent"
    with pytest.raises(sd.ConfigurationError, match=rf"pip install 'struckdown\[{extra}\]'"):
        sd.complete("[[a]]", model=name)


@pytest.mark.usefixtures("no_model_env")
def test_llm_api_base_serves_openai_compatible_provider_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_API_BASE", "http://127.0.0.1:9/v1")
    for name, served in (("deepseek:deepseek-chat", "deepseek-chat"), ("openrouter:meta/llama", "meta/llama"),
                         ("ollama:qwen3:8b", "qwen3:8b"), ("gpt-4.1-mini", "gpt-4.1-mini")):
        model = resolve_model(name, sd.Environment().models)
        assert (model.model_name, endpoint_of(model)) == (served, "http://127.0.0.1:9/v1")


@pytest.mark.usefixtures("no_model_env")
def test_the_cli_reads_a_dotenv_beside_the_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / ".env").write_text("DEFAULT_LLM=test\nSD_0X_MARKER=from-dotenv\n")
    (folder / "t.sd").write_text("Say [[a]]\n")
    monkeypatch.delenv("SD_0X_MARKER", raising=False)
    result = cli("run", folder / "t.sd", "--json", "--no-stream")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"a": "success (no tool calls)"}
    import os

    assert os.environ.pop("SD_0X_MARKER") == "from-dotenv"
    os.environ.pop("DEFAULT_LLM", None)

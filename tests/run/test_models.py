"""Model resolution: strings, environment, aliases, endpoints, labels."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentedModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.models.test import TestModel

import struckdown as sd
from struckdown.errors import ConfigurationError
from model_support import clear_model_cache, openai_compatible, resolve_model
from struckdown.models import MISSING_MODEL, endpoint_of, model_label
from struckdown.models import model_from_env as _model_from_env


def model_from_env(env: Any = None) -> Any:
    return _model_from_env(env, store=sd.default_environment().models)

BASE = "http://127.0.0.1:8765/v1"
ENV_VARS = (
    "STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_BASE", "LLM_API_KEY", "STRUCKDOWN_TIMEOUT",
    "STRUCKDOWN_MAX_RETRIES", "OPENAI_BASE_URL",
)  # fmt: skip


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.chdir(tmp_path)
    clear_model_cache()
    yield
    clear_model_cache()


def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("x")])


def test_test_string_gives_one_shared_test_model() -> None:
    model = resolve_model("test")
    assert isinstance(model, TestModel)
    assert resolve_model("test") is model


def test_model_instances_pass_through_unchanged() -> None:
    model = FunctionModel(reply)
    assert resolve_model(model) is model
    assert model.settings is None


def run_defaults(model: Any) -> dict[str, Any]:
    """The run settings the default Environment gives a model it built from a string."""
    return dict(sd.default_environment().models.defaults(model))


def test_provider_string_is_inferred_and_cached() -> None:
    chat = resolve_model("openai-chat:gpt-4o-mini")
    assert isinstance(chat, OpenAIChatModel)
    assert chat.model_name == "gpt-4o-mini"
    assert resolve_model("openai-chat:gpt-4o-mini") is chat
    assert chat.settings is None  # never written: struckdown's retries are run settings
    assert run_defaults(chat) == {"max_retries": 2}


def test_plain_openai_prefix_is_the_responses_api_without_a_base_url() -> None:
    assert isinstance(resolve_model("openai:gpt-4o-mini"), OpenAIResponsesModel)


def test_max_retries_env_reaches_inferred_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "5")
    assert run_defaults(resolve_model("openai-chat:gpt-4o-mini")) == {"max_retries": 5}


@pytest.mark.parametrize("name", ["qwen", "openai:qwen", "openai-chat:qwen"])
def test_llm_api_base_routes_openai_names_to_chat_completions(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("LLM_API_BASE", BASE + "/")
    model = resolve_model(name)
    assert type(model) is OpenAIChatModel
    assert model.model_name == "qwen"
    assert endpoint_of(model) == BASE
    assert model.settings == {"timeout": 120.0, "max_retries": 2}


def test_llm_api_base_leaves_other_providers_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_API_BASE", BASE)
    assert resolve_model("test") is resolve_model("test")
    with pytest.raises(ConfigurationError, match="groq"):  # a pydantic-ai provider (its SDK is not installed here)
        resolve_model("groq:llama-3.3-70b")
    served = resolve_model("qwen3:8b")  # no provider is called qwen3: the server's own name:tag (SPEC §11)
    assert isinstance(served, OpenAIChatModel) and served.model_name == "qwen3:8b"
    assert endpoint_of(served) == BASE


def test_timeout_and_retries_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_TIMEOUT", "30")
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
    model = openai_compatible("qwen", BASE, None)
    assert model.settings == {"timeout": 30.0, "max_retries": 0}


@pytest.mark.parametrize(("var", "value"), [("STRUCKDOWN_TIMEOUT", "soon"), ("STRUCKDOWN_TIMEOUT", "0"),
                                            ("STRUCKDOWN_MAX_RETRIES", "-1"), ("STRUCKDOWN_MAX_RETRIES", "two")])  # fmt: skip
def test_bad_timeout_or_retries_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigurationError, match=var):
        openai_compatible("qwen", BASE, None)


def test_same_endpoint_gives_same_object_and_different_settings_do_not() -> None:
    a = openai_compatible("qwen", BASE, None)
    assert openai_compatible("openai-chat:qwen", BASE + "/", None) is a
    assert openai_compatible("qwen", BASE, None, retries=0) is not a


def test_missing_key_sends_a_placeholder_not_the_openai_key() -> None:
    model = openai_compatible("qwen", BASE, None)
    assert model.client.api_key == "not-needed"
    assert openai_compatible("qwen", BASE, "secret").client.api_key == "secret"


def test_model_from_env_prefers_struckdown_model() -> None:
    model = model_from_env({"STRUCKDOWN_MODEL": "openai-chat:qwen", "LLM_API_BASE": BASE, "DEFAULT_LLM": "x"})
    assert type(model) is OpenAIChatModel and endpoint_of(model) == BASE
    assert isinstance(model_from_env({"DEFAULT_LLM": "test"}), TestModel)


def test_model_from_env_with_only_a_base_url() -> None:
    model = model_from_env({"LLM_API_BASE": BASE, "LLM_API_KEY": "k"})
    assert endpoint_of(model) == BASE and model.client.api_key == "k"


def test_none_resolves_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_MODEL", "test")
    assert isinstance(resolve_model(None), TestModel)


def test_no_model_configured_names_every_way_to_configure_one() -> None:
    with pytest.raises(ConfigurationError) as info:
        model_from_env({})
    message = str(info.value)
    assert message == MISSING_MODEL
    for word in ("--model", "STRUCKDOWN_MODEL", "LLM_API_BASE"):
        assert word in message
    assert ". " not in message.replace("e.g. ", "")  # one sentence


def test_bare_name_without_a_base_url_is_an_openai_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model("gpt-4.1-mini")  # 0.x's DEFAULT_LLM=gpt-4.1-mini (SPEC §11)
    assert isinstance(model, OpenAIChatModel) and model.model_name == "gpt-4.1-mini"
    assert endpoint_of(model) == "https://api.openai.com/v1"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY") as info:  # without a key: what to do
        resolve_model("qwen")
    assert "LLM_API_BASE" in str(info.value)


# -- aliases ------------------------------------------------------------------


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    stamp = path.stat().st_mtime + 1
    os.utime(path, (stamp, stamp))  # a fresh mtime even within one clock tick


def test_aliases_from_struckdown_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "struckdown.toml", f"""
model = "local"
[models]
fast = "openai-chat:gpt-4o-mini"
local = {{ base_url = "{BASE}", name = "qwen" }}
keyed = {{ base_url = "http://10.0.0.1:8000/v1", name = "llama", api_key_env = "MY_KEY" }}
""")
    monkeypatch.setenv("MY_KEY", "from-env")
    fast = resolve_model("fast")
    assert isinstance(fast, OpenAIChatModel) and fast.model_name == "gpt-4o-mini"
    local = resolve_model("local")
    assert local.model_name == "qwen" and endpoint_of(local) == BASE
    assert resolve_model("local") is local
    assert resolve_model("keyed").client.api_key == "from-env"
    assert model_from_env({}) is local  # the config's default model


def test_aliases_from_pyproject_and_struckdown_toml_wins(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n[tool.struckdown.models]\nfast = "test"\n')
    assert isinstance(resolve_model("fast"), TestModel)
    write(tmp_path / "struckdown.toml", '[models]\nfast = "openai-chat:gpt-4o"\n')
    assert resolve_model("fast").model_name == "gpt-4o"


def test_config_edits_are_seen(tmp_path: Path) -> None:
    write(tmp_path / "struckdown.toml", '[models]\nfast = "openai-chat:gpt-4o"\n')
    assert resolve_model("fast").model_name == "gpt-4o"
    write(tmp_path / "struckdown.toml", '[models]\nfast = "openai-chat:gpt-4o-mini"\n')
    assert resolve_model("fast").model_name == "gpt-4o-mini"


@pytest.mark.parametrize("text", ['[models]\nfast = 3\n', '[models\n', '[models]\nx = { base_url = "u", nme = "q" }\n'])
def test_bad_config_is_a_configuration_error_naming_the_file(tmp_path: Path, text: str) -> None:
    write(tmp_path / "struckdown.toml", text)
    with pytest.raises(ConfigurationError, match="struckdown.toml"):
        resolve_model("fast")


# -- endpoints and labels -------------------------------------------------------


def test_endpoint_of_each_kind_of_model() -> None:
    assert endpoint_of(TestModel()) == "test"
    from struckdown.models.function_key import function_digest

    code = function_digest(reply, None)  # a FunctionModel's answers are its code's (docs/providers.md)
    assert endpoint_of(FunctionModel(reply)) == f"function:{__name__}.reply#{code}"
    assert endpoint_of(InstrumentedModel(openai_compatible("q", BASE, None))) == BASE
    assert endpoint_of(resolve_model("openai-chat:gpt-4o")) == "https://api.openai.com/v1"
    fallback = FallbackModel(TestModel(), FunctionModel(reply))
    assert endpoint_of(fallback) == f"fallback(test#test,function:{__name__}.reply#{code}#{FunctionModel(reply).model_name})"


def test_endpoint_differs_between_servers_serving_the_same_name() -> None:
    a = openai_compatible("qwen", "http://127.0.0.1:8765/v1", None)
    b = openai_compatible("qwen", "http://127.0.0.1:8766/v1", None)
    assert endpoint_of(a) != endpoint_of(b)


def test_model_label() -> None:
    assert model_label("openai:gpt") == "openai:gpt"
    assert model_label(TestModel()) == "test:test"
    assert model_label(FunctionModel(reply)) == "function:reply"
    assert model_label(FunctionModel(reply, model_name="my-bot")) == "my-bot"  # named as its author named it
    assert model_label(openai_compatible("qwen", BASE, None)) == f"openai:qwen@{BASE}"


def test_explicit_timeout_reaches_inferred_models(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "timeout" not in run_defaults(resolve_model("openai-chat:gpt-4o"))  # the client's own 600 s
    monkeypatch.setenv("STRUCKDOWN_TIMEOUT", "45")
    assert run_defaults(resolve_model("openai-chat:gpt-4o")) == {"max_retries": 2, "timeout": 45.0}

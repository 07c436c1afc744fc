"""A config file in the working directory cannot redirect a provider string or a provider key.

`struckdown.toml` (or `[tool.struckdown]`) is often someone else's file: a cloned
repository. Its aliases may not shadow `provider:model` strings, a provider's own key
variable goes only to that provider's host unless the alias says `send_provider_key =
true`, and the CLI names where a config-file alias leads before anything is sent.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from cli_support import plain_environment, sd  # noqa: F401
from struckdown.errors import ConfigurationError
from model_support import clear_model_cache, resolve_model

CLOSED = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, the connection is refused at once


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_BASE", "LLM_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-users-real-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-users-real-key")
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
    monkeypatch.chdir(tmp_path)
    clear_model_cache()
    return tmp_path


def config(directory: Path, text: str, name: str = "struckdown.toml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    stamp = path.stat().st_mtime + 1
    os.utime(path, (stamp, stamp))
    return path


def template(directory: Path) -> Path:
    path = directory / "t.sd"
    path.write_text("Say hi [[greeting]]\n", encoding="utf-8")
    return path


# -- aliases may not shadow provider strings --------------------------------------------


HIJACK = f"""
[models]
"openai-chat:gpt-4o-mini" = {{ base_url = "{CLOSED}", name = "gpt-4o-mini", api_key_env = "MY_KEY" }}
"""


def test_an_alias_named_like_a_provider_string_is_refused(project: Path) -> None:
    path = config(project, HIJACK)
    with pytest.raises(ConfigurationError) as caught:
        resolve_model("openai-chat:gpt-4o-mini")
    assert str(path) in str(caught.value) and "'openai-chat:gpt-4o-mini'" in str(caught.value)


def test_an_alias_in_pyproject_may_not_shadow_a_provider_string_either(project: Path) -> None:
    path = config(project, '[tool.struckdown.models]\n"anthropic:claude-sonnet-4-5" = "test"\n', "pyproject.toml")
    with pytest.raises(ConfigurationError, match="may not contain ':'") as caught:
        resolve_model("anthropic:claude-sonnet-4-5")
    assert str(path) in str(caught.value)


def test_an_alias_named_test_is_refused(project: Path) -> None:
    config(project, '[models]\ntest = "openai-chat:gpt-4o"\n')
    with pytest.raises(ConfigurationError, match="'test'"):
        resolve_model("fast")


def test_explicit_provider_model_on_the_command_line_is_never_redirected(project: Path) -> None:
    path = config(project, HIJACK)
    result = sd("run", template(project), "--model", "openai-chat:gpt-4o-mini")
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {path}: model alias 'openai-chat:gpt-4o-mini' would shadow"), last
    assert "greeting" not in result.stdout


# -- provider keys stay with their provider ----------------------------------------------


def test_a_provider_key_is_not_sent_to_another_host(project: Path) -> None:
    path = config(project, f'[models]\ngpu = {{ base_url = "{CLOSED}", name = "q", api_key_env = "OPENAI_API_KEY" }}\n')
    with pytest.raises(ConfigurationError) as caught:
        resolve_model("gpu")
    message = str(caught.value)
    assert str(path) in message and "OPENAI_API_KEY" in message and "127.0.0.1" in message
    assert "send_provider_key = true" in message


@pytest.mark.parametrize(
    "base_url", ["https://api.openai.com.evil.example/v1", "https://evil.example/api.openai.com/v1", "not a url"]
)
def test_lookalike_hosts_are_other_hosts(project: Path, base_url: str) -> None:
    config(project, f'[models]\ngpu = {{ base_url = "{base_url}", name = "q", api_key_env = "OPENAI_API_KEY" }}\n')
    with pytest.raises(ConfigurationError, match="would send OPENAI_API_KEY"):
        resolve_model("gpu")


def test_a_provider_key_goes_to_its_own_host(project: Path) -> None:
    config(project, """
        [models]
        direct = { base_url = "https://api.openai.com/v1", name = "gpt-4o", api_key_env = "OPENAI_API_KEY" }
        claude = { base_url = "https://api.anthropic.com/v1/", name = "claude", api_key_env = "ANTHROPIC_API_KEY" }
    """)
    assert resolve_model("direct").client.api_key == "sk-users-real-key"
    assert resolve_model("claude").client.api_key == "sk-ant-users-real-key"


def test_send_provider_key_is_the_explicit_opt_in(project: Path) -> None:
    config(project, f"""
        [models]
        proxy = {{ base_url = "{CLOSED}", name = "q", api_key_env = "OPENAI_API_KEY", send_provider_key = true }}
    """)
    model = resolve_model("proxy")
    assert model.client.api_key == "sk-users-real-key" and str(model.client.base_url).startswith(CLOSED)


def test_a_variable_of_its_own_needs_no_opt_in(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_KEY", "gpu-secret")
    config(project, f'[models]\ngpu = {{ base_url = "{CLOSED}", name = "q", api_key_env = "GPU_KEY" }}\n')
    assert resolve_model("gpu").client.api_key == "gpu-secret"


@pytest.mark.parametrize("value", ['"yes"', "1"])
def test_send_provider_key_must_be_a_boolean(project: Path, value: str) -> None:
    config(project, f'[models]\np = {{ base_url = "{CLOSED}", api_key_env = "OPENAI_API_KEY", send_provider_key = {value} }}\n')
    with pytest.raises(ConfigurationError, match="send_provider_key must be true or false"):
        resolve_model("p")


# -- the display names where a config alias leads -----------------------------------------


def test_run_names_the_endpoint_of_a_config_alias_before_sending(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_KEY", "gpu-secret")
    path = config(project, f'[models]\ngpu = {{ base_url = "{CLOSED}", name = "qwen", api_key_env = "GPU_KEY" }}\n')
    result = sd("run", template(project), "--model", "gpu", "--no-cache")
    assert result.exit_code == 1  # nothing listens there
    lines = result.stderr.splitlines()
    assert lines[0] == f"note: model 'gpu' → {CLOSED} (served name qwen, key $GPU_KEY), from {path}"
    assert "gpu-secret" not in result.output


def test_the_default_model_of_a_config_file_is_named(project: Path) -> None:
    path = config(project, 'model = "fast"\n[models]\nfast = "test"\n')
    result = sd("run", template(project), "--no-cache")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == f"note: default model 'fast' → test, from {path}"


def test_batch_names_slot_aliases_from_the_config(project: Path) -> None:
    path = config(project, '[models]\nfast = "test"\n')
    sd_file = project / "b.sd"
    sd_file.write_text("Row {{ n }} [[answer|model=fast]]\n", encoding="utf-8")
    rows = project / "rows.jsonl"
    rows.write_text('{"n": 1}\n', encoding="utf-8")
    result = sd("batch", sd_file, rows, "--model", "test", "--no-cache")
    assert result.exit_code == 0, result.output
    assert f"note: model 'fast' → test, from {path}" in result.stderr.splitlines()


def test_no_note_without_a_config_file(project: Path) -> None:
    result = sd("run", template(project), "--model", "test", "--no-cache")
    assert result.exit_code == 0
    assert "note:" not in result.stderr


def test_the_test_model_never_reads_the_config_file(project: Path) -> None:
    config(project, HIJACK)  # a bad config does not stop a dry run that uses no alias
    result = sd("run", template(project), "--model", "test", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr


# -- issue 39 N17: the config residuals ----------------------------------------------------


@pytest.mark.parametrize("name", ["gpt-4o-mini", "gpt-5", "o3-mini", "chatgpt-4o-latest", "GPT-4.1"])
def test_an_alias_may_not_shadow_a_bare_provider_model_name(project: Path, name: str) -> None:
    path = config(project, f'[models]\n"{name}" = {{ base_url = "{CLOSED}", name = "x", api_key_env = "MY_KEY" }}\n')
    with pytest.raises(ConfigurationError) as caught:
        resolve_model(name)
    assert str(caught.value) == (
        f"{path}: model alias {name!r} would shadow the OpenAI model of that name (a bare model name such as "
        "gpt-4o-mini means openai-chat:gpt-4o-mini): rename it (e.g. fast, local)"
    )


def test_llm_api_key_goes_only_to_the_host_the_config_names_it_for(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config alias that names no key used to get LLM_API_KEY, whatever its host."""
    monkeypatch.setenv("LLM_API_KEY", "the-users-server-key")
    monkeypatch.setenv("LLM_API_BASE", "http://my-server.lan:8000/v1")
    path = config(project, f"""
        [models]
        elsewhere = {{ base_url = "{CLOSED}", name = "q" }}
        mine = {{ base_url = "http://my-server.lan:9000/v1", name = "q" }}
        named = {{ base_url = "{CLOSED}", name = "q", api_key_env = "LLM_API_KEY" }}
    """)
    assert resolve_model("elsewhere").client.api_key == "not-needed"  # the placeholder, never the user's key
    assert resolve_model("mine").client.api_key == "the-users-server-key"  # LLM_API_BASE's host
    assert resolve_model("named").client.api_key == "the-users-server-key"  # the config names it for this host
    result = sd("run", template(project), "--model", "elsewhere", "--no-cache")
    assert result.stderr.splitlines()[0] == f"note: model 'elsewhere' → {CLOSED} (served name q, no key), from {path}"

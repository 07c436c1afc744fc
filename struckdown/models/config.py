"""Project configuration: model aliases and a default model (SPEC §7).

Templates say `model=fast` rather than a provider string, so a project can
switch providers in one place. The aliases live in `struckdown.toml` in the
current directory, or under `[tool.struckdown]` in `./pyproject.toml`:

    [models]                        # [tool.struckdown.models] in pyproject.toml
    fast = "openai-chat:gpt-4o-mini"
    local = { base_url = "http://127.0.0.1:8765/v1", name = "qwen" }

A top-level `model = "fast"` names the default model, used when neither
`--model` nor the environment picks one.

A config file is often someone else's (a cloned repository), so it cannot take
over what the user typed: an alias name may not look like a provider string
(`openai-chat:gpt-4o-mini`) or be `test`, and an endpoint alias may name a
provider's own key variable (`api_key_env = "OPENAI_API_KEY"`) only for that
provider's host, unless it also says `send_provider_key = true`. An alias may not
take a bare provider model name either (`gpt-4o-mini` means OpenAI's), and an
endpoint alias that names no key sends `LLM_API_KEY` only to `LLM_API_BASE`'s host.

The file is read on demand (never at import) and re-read only when it changes,
so long-lived processes see edits without paying a parse per slot.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigurationError

CONFIG_FILE = "struckdown.toml"
PYPROJECT = "pyproject.toml"

#: One alias target: a pydantic-ai model string, or an OpenAI-compatible endpoint.
AliasTarget = str | Mapping[str, Any]

#: The opt-in an endpoint alias needs to send a provider's key to another host.
SEND_PROVIDER_KEY = "send_provider_key"

#: Provider key variables (as pydantic-ai reads them) and the hosts they belong to
#: (a host, or a parent domain of it). An endpoint alias may send one elsewhere
#: only with `send_provider_key = true`; an empty tuple means "never implicitly".
PROVIDER_KEYS: Mapping[str, tuple[str, ...]] = {
    "OPENAI_API_KEY": ("api.openai.com",),
    "AZURE_OPENAI_API_KEY": ("openai.azure.com", "cognitiveservices.azure.com", "services.ai.azure.com"),
    "ANTHROPIC_API_KEY": ("api.anthropic.com",),
    "GEMINI_API_KEY": ("generativelanguage.googleapis.com",),
    "GOOGLE_API_KEY": ("generativelanguage.googleapis.com", "aiplatform.googleapis.com"),
    "GROQ_API_KEY": ("api.groq.com",),
    "MISTRAL_API_KEY": ("api.mistral.ai",),
    "CO_API_KEY": ("api.cohere.com", "api.cohere.ai"),
    "DEEPSEEK_API_KEY": ("api.deepseek.com",),
    "OPENROUTER_API_KEY": ("openrouter.ai",),
    "XAI_API_KEY": ("api.x.ai",),
    "TOGETHER_API_KEY": ("api.together.xyz",),
    "FIREWORKS_API_KEY": ("api.fireworks.ai",),
    "CEREBRAS_API_KEY": ("api.cerebras.ai",),
    "MOONSHOTAI_API_KEY": ("api.moonshot.ai", "api.moonshot.cn"),
    "GITHUB_API_KEY": ("models.github.ai",),
    "HF_TOKEN": ("huggingface.co", "hf.co"),
    "NEBIUS_API_KEY": ("api.studio.nebius.com",),
    "SAMBANOVA_API_KEY": ("api.sambanova.ai",),
    "DASHSCOPE_API_KEY": ("aliyuncs.com",),
    "ZAI_API_KEY": ("api.z.ai",),
    "CRUSOE_API_KEY": ("api.inference.crusoecloud.com",),
    "OVHCLOUD_API_KEY": ("endpoints.kepler.ai.cloud.ovh.net",),
    "HEROKU_INFERENCE_KEY": ("inference.heroku.com",),
    "VERCEL_AI_GATEWAY_API_KEY": ("ai-gateway.vercel.sh",),
    "PYDANTIC_AI_GATEWAY_API_KEY": ("pydantic.dev",),
    "META_API_KEY": ("api.meta.ai",),
    "AWS_SECRET_ACCESS_KEY": (),
    "AWS_SESSION_TOKEN": (),
    "AWS_BEARER_TOKEN_BEDROCK": (),
}


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower().rstrip(".")


def belongs_to(key_env: str, base_url: str) -> bool:
    """Whether `base_url`'s host is one the provider key `key_env` is meant for."""
    host = _host(base_url)
    return any(host == h or host.endswith("." + h) for h in PROVIDER_KEYS.get(key_env, ()))


@dataclass(frozen=True)
class EndpointAlias:
    """An alias for a chat-completions endpoint (`{base_url = …, name = …}`).

    `api_key` may be given literally or, better, as `api_key_env` naming the
    variable that holds it, so keys stay out of version control.
    """

    base_url: str
    name: str = "default"
    api_key: str | None = None
    api_key_env: str | None = None
    send_provider_key: bool = False

    def key(self, env: Mapping[str, str]) -> str | None:
        """The key sent: the literal one, the named variable, or else `LLM_API_KEY`, but
        that one only to the host of `LLM_API_BASE`, where the user meant it to go (a
        config may send it elsewhere only by naming it: `api_key_env = "LLM_API_KEY"`)."""
        if self.api_key is not None:
            return self.api_key
        if self.api_key_env:
            return env.get(self.api_key_env)
        return env.get("LLM_API_KEY") if self.sends_llm_api_key(env) else None

    def sends_llm_api_key(self, env: Mapping[str, str]) -> bool:
        """Whether this alias, naming no key, sends `LLM_API_KEY`: only to LLM_API_BASE's host."""
        base = env.get("LLM_API_BASE") or ""
        return _host(base) == _host(self.base_url) != ""


@dataclass(frozen=True)
class Config:
    """What a project configured; empty when there is no config file."""

    models: Mapping[str, str | EndpointAlias] = field(default_factory=dict)
    model: str | None = None
    source: Path | None = None

    def alias(self, name: str) -> str | EndpointAlias | None:
        return self.models.get(name)


_EMPTY = Config()
_lock = threading.Lock()
_loaded: dict[Path, tuple[float, Config]] = {}


def load_config(directory: str | os.PathLike[str] | None = None) -> Config:
    """The configuration of `directory` (default: the current directory).

    `struckdown.toml` wins over `pyproject.toml`; a pyproject without a
    `[tool.struckdown]` table means no configuration.
    """
    base = Path(directory) if directory is not None else Path.cwd()
    for candidate, pyproject in ((base / CONFIG_FILE, False), (base / PYPROJECT, True)):
        try:
            mtime = candidate.stat().st_mtime
        except OSError:
            continue
        with _lock:
            cached = _loaded.get(candidate)
        if cached is not None and cached[0] == mtime:
            config = cached[1]
        else:
            config = _read(candidate, pyproject)
            with _lock:
                _loaded[candidate] = (mtime, config)
        if config is not _EMPTY or not pyproject:
            return config
    return _EMPTY


def _read(path: Path, pyproject: bool) -> Config:
    import tomllib  # only when a config file exists

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc
    if pyproject:
        data = data.get("tool", {}).get("struckdown")
        if data is None:
            return _EMPTY
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: [tool.struckdown] must be a table")
    return _parse(data, path)


def _parse(data: Mapping[str, Any], path: Path) -> Config:
    raw_models = data.get("models", {})
    if not isinstance(raw_models, dict):
        raise ConfigurationError(f"{path}: [models] must be a table of name = model")
    models: dict[str, str | EndpointAlias] = {}
    for name, target in raw_models.items():
        models[name] = _parse_alias(name, target, path)
    default = data.get("model")
    if default is not None and not isinstance(default, str):
        raise ConfigurationError(f"{path}: model must be a string, got {default!r}")
    return Config(models=models, model=default, source=path)


#: Bare names a model string resolves to a provider's model (a bare name is an OpenAI
#: chat model: `--model gpt-4o-mini`), so no alias may take them.
_BARE_MODEL_NAME = re.compile(r"(?i)^(gpt[-\d.]|chatgpt-|o\d|codex-|davinci|babbage|text-|computer-use-|ft:)")


def _parse_alias(name: str, target: Any, path: Path) -> str | EndpointAlias:
    if ":" in name or name.strip() == "test":
        raise ConfigurationError(
            f"{path}: model alias {name!r} would shadow the model string of the same name; "
            "an alias name may not contain ':' or be 'test': rename it (e.g. fast, local)"
        )
    if _BARE_MODEL_NAME.match(name.strip()):
        raise ConfigurationError(
            f"{path}: model alias {name!r} would shadow the OpenAI model of that name (a bare model name "
            "such as gpt-4o-mini means openai-chat:gpt-4o-mini): rename it (e.g. fast, local)"
        )
    if isinstance(target, str):
        return target
    if isinstance(target, dict) and isinstance(target.get("base_url"), str):
        unknown = set(target) - {"base_url", "name", "api_key", "api_key_env", SEND_PROVIDER_KEY}
        if unknown:
            raise ConfigurationError(f"{path}: model alias {name!r} has unknown keys {sorted(unknown)}")
        for option in ("name", "api_key", "api_key_env"):
            if option in target and not isinstance(target[option], str):
                raise ConfigurationError(f"{path}: model alias {name!r}: {option} must be a string")
        send = target.get(SEND_PROVIDER_KEY, False)
        if not isinstance(send, bool):
            raise ConfigurationError(f"{path}: model alias {name!r}: {SEND_PROVIDER_KEY} must be true or false")
        alias = EndpointAlias(
            base_url=target["base_url"],
            name=str(target.get("name", "default")),
            api_key=target.get("api_key"),
            api_key_env=target.get("api_key_env"),
            send_provider_key=send,
        )
        _check_key_destination(name, alias, path)
        return alias
    raise ConfigurationError(
        f"{path}: model alias {name!r} must be a model string or "
        '{ base_url = "http://…/v1", name = "…" }'
    )


def _check_key_destination(name: str, alias: EndpointAlias, path: Path) -> None:
    """A provider's own key goes to that provider's host, or wherever the alias explicitly says."""
    key_env = alias.api_key_env
    if key_env is None or key_env not in PROVIDER_KEYS or alias.send_provider_key:
        return
    if belongs_to(key_env, alias.base_url):
        return
    host = urlsplit(alias.base_url).hostname or alias.base_url
    owners = ", ".join(PROVIDER_KEYS[key_env]) or "no OpenAI-compatible endpoint"
    raise ConfigurationError(
        f"{path}: model alias {name!r} would send {key_env} to {host}, which is not where that key "
        f"belongs ({owners}); use a variable of its own (api_key_env = \"MY_SERVER_KEY\"), or add "
        f"{SEND_PROVIDER_KEY} = true to the alias if you mean to send that key there"
    )

"""Model resolution (SPEC §7): a Model instance, a pydantic-ai model string, an alias, or the environment.

Resolution order for a string: `"test"` → `TestModel` (its `SampleModel` form); `package.module:factory`
(an importable module that is not a pydantic-ai provider) → the Model the factory
returns; an alias from
`struckdown.toml` / `[tool.struckdown]`; with `LLM_API_BASE` set, a bare name, an
`openai:`/`openai-chat:` name, an `anthropic:` or `google:` (`google-gla:`, …) name as 0.18
sent them to its proxy (the prefix dropped) or a name whose prefix
is no pydantic-ai provider (`qwen3:8b`) → the chat-completions endpoint at that URL; a bare name without it →
the OpenAI chat model of that name (`gpt-4.1-mini`, as in 0.x); anything else →
`pydantic_ai.models.infer_model` (which reads the provider's own key variables).
Resolved models are cached (same string and settings → the same object) so a batch
does not build a client per row.

Retries and timeouts are model-level `ModelSettings` on the models built here:
`max_retries` from `STRUCKDOWN_MAX_RETRIES` (default 2) on every model built
from a string, and `timeout` from `STRUCKDOWN_TIMEOUT` (default 120 s) on
OpenAI-compatible endpoints; hosted providers keep their client's own timeout
(600 s for OpenAI, which slow reasoning models need) unless the variable is
set. pydantic-ai forwards both to the provider SDK client. Inside a struckdown run
the retrying is struckdown's own (run/wrappers/retries.py, SPEC §14), which sends
`max_retries=0` per request so attempts are not multiplied; the model-level value
matters when the model is used outside struckdown. A `Model` instance you pass in
is never changed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import ConfigurationError
from .config import EndpointAlias, load_config
from .factory import factory_reference, file_stamp
from .store import ModelStore

MISSING_MODEL = (
    "no model configured: pass --model (or model= in Python), set STRUCKDOWN_MODEL "
    "(e.g. openai-chat:gpt-4o-mini), or set LLM_API_BASE (+ LLM_API_KEY) for an "
    "OpenAI-compatible server"
)

DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 2

#: Prefixes that mean "the OpenAI wire format", routed to LLM_API_BASE when it is set.
_OPENAI_PREFIXES = ("openai-chat:", "openai:")
#: Providers that speak the OpenAI chat wire format: with LLM_API_BASE set, their names go
#: to that endpoint (the prefix dropped), as 0.18 sent every name to its proxy.
_OPENAI_COMPATIBLE = frozenset({
    "openai", "openai-chat", "ollama", "deepseek", "openrouter", "together", "fireworks", "litellm", "github",
    "vercel", "heroku", "moonshotai", "cerebras", "nebius", "ovhcloud", "alibaba", "sambanova", "grok", "xai",
})
#: Providers 0.18 also sent to its LLM_API_BASE proxy (a LiteLLM-style gateway), the prefix dropped
_PROXIED_0X = frozenset({"anthropic", "google", "google-gla", "google-vertex", "gemini"})
#: struckdown's extra that installs each provider's SDK (`pip install 'struckdown[anthropic]'`).
PROVIDER_EXTRAS: Mapping[str, str] = {
    "anthropic": "anthropic", "google": "google", "google-gla": "google", "google-vertex": "google",
    "google-cloud": "google", "mistral": "mistral", "groq": "groq", "bedrock": "bedrock", "cohere": "cohere",
}
#: 0.x's spellings of today's provider prefixes
_PREFIX_ALIASES = {"google-gla": "google", "google-vertex": "google-cloud", "gemini": "google"}
OLLAMA_BASE_URL = "http://localhost:11434/v1"


def _env_number(
    env: Mapping[str, str] | None, name: str, default: float, parse: type, *, minimum: float, inclusive: bool, what: str
) -> Any:
    """A numeric setting from the environment; a bad value is a ConfigurationError."""
    raw = (os.environ if env is None else env).get(name)
    if not raw:
        return default
    try:
        value = parse(raw)
    except ValueError:
        value = None
    if value is None or value < minimum or (not inclusive and value == minimum):
        raise ConfigurationError(f"{name} must be {what}, got {raw!r}")
    return value


def request_timeout(env: Mapping[str, str] | None = None) -> float:
    """Seconds one attempt at an OpenAI-compatible endpoint may take (`STRUCKDOWN_TIMEOUT`)."""
    return float(_env_number(env, "STRUCKDOWN_TIMEOUT", DEFAULT_TIMEOUT, float, minimum=0, inclusive=False,
                             what="a positive number of seconds"))


def max_retries(env: Mapping[str, str] | None = None) -> int:
    """How many times the provider client retries a transient failure (`STRUCKDOWN_MAX_RETRIES`)."""
    return int(_env_number(env, "STRUCKDOWN_MAX_RETRIES", DEFAULT_MAX_RETRIES, int, minimum=0, inclusive=True,
                           what="a whole number ≥ 0"))


def resolve_model(model: Any, store: ModelStore) -> Any:
    """A Model instance passes through; a string becomes a pydantic-ai model; None → env/config.
    Models built from strings are kept in `store` (an Environment's `models`)."""
    if model is None:
        return model_from_env(store=store)
    if not isinstance(model, str):
        return model
    return _from_string(model, os.environ, store)


#: The name struckdown gives a model at LLM_API_BASE when none is set (llama.cpp serves what it loaded)
PLACEHOLDER_NAME = "default"
#: Where the name such a server answered with is kept on the model object (errors name it)
SERVED_NAME_ATTR = "_struckdown_served_name"


def note_served_name(model: Any, name: str | None) -> None:
    """Remember the name a server answered with for a model struckdown named `default`."""
    if name and name != PLACEHOLDER_NAME and getattr(model, "model_name", None) == PLACEHOLDER_NAME:
        try:
            setattr(model, SERVED_NAME_ATTR, name)
        except AttributeError:  # a model class with __slots__: errors say "served at URL"
            pass


def model_from_env(env: Mapping[str, str] | None = None, *, store: ModelStore) -> Any:
    """The default model: STRUCKDOWN_MODEL (or DEFAULT_LLM), LLM_API_BASE, then the config's `model`."""
    env = os.environ if env is None else env
    models = store
    name = env.get("STRUCKDOWN_MODEL") or env.get("DEFAULT_LLM")
    if name:
        return _from_string(name, env, models)
    base = env.get("LLM_API_BASE")
    if base:
        # llama.cpp serves whatever it loaded, so the name does not matter there;
        # vLLM checks it, hence STRUCKDOWN_MODEL=<served name> in the docs.
        return openai_compatible(PLACEHOLDER_NAME, base, env.get("LLM_API_KEY"), env=env, store=models)
    default = load_config().model
    if default:
        return _from_string(default, env, models)
    raise ConfigurationError(MISSING_MODEL)


def openai_compatible(
    name: str,
    base_url: str,
    api_key: str | None,
    *,
    timeout: float | None = None,
    retries: int | None = None,
    env: Mapping[str, str] | None = None,
    store: ModelStore | None = None,
) -> Any:
    """A chat-completions endpoint (llama.cpp, vLLM, Ollama, proxies) as an `OpenAIChatModel`.

    A placeholder key is sent when none is given, so a real OPENAI_API_KEY from
    the environment never leaks to a third-party server.
    """
    args = (
        _strip_provider(name),
        base_url.rstrip("/"),
        api_key or "not-needed",
        request_timeout(env) if timeout is None else timeout,
        max_retries(env) if retries is None else retries,
    )
    if store is None:  # a model of your own, to pass as model=
        return _openai_compatible(*args)
    return store.get(("openai-compatible", *args), lambda: _openai_compatible(*args))


def _from_string(name: str, env: Mapping[str, str], store: ModelStore, *, aliases: bool = True) -> Any:
    name = name.strip()
    if not name:
        raise ConfigurationError("empty model name: " + MISSING_MODEL)
    if name == "test":
        return store.get("test", _test_model)
    factory = factory_reference(name) if ":" in name else None
    if factory is not None:  # a new model when the factory's file changed (a long-lived process reloads it)
        stamp = file_stamp(factory)
        return store.get(("factory", factory, stamp), lambda: _from_factory(factory, stamp))
    if aliases:
        target = load_config().alias(name)
        if isinstance(target, EndpointAlias):
            return openai_compatible(target.name, target.base_url, target.key(env), env=env, store=store)
        if isinstance(target, str):
            return _from_string(target, env, store, aliases=False)
    base = env.get("LLM_API_BASE")
    prefix, _, rest = name.partition(":")
    proxied = prefix in _OPENAI_COMPATIBLE or prefix in _PROXIED_0X
    if base and (":" not in name or proxied or not is_provider(prefix)):
        # a bare name, an OpenAI-compatible provider's or an anthropic:/google: one (0.18 sent
        # them to its proxy), or a server's own `name:tag` (qwen3:8b) goes to the endpoint;
        # a provider prefix is dropped
        served = rest if ":" in name and proxied else name
        return openai_compatible(served, base, env.get("LLM_API_KEY"), env=env, store=store)
    if prefix == "ollama" and rest:  # 0.x: Ollama on this machine unless OLLAMA_BASE_URL says otherwise
        where = (env.get("OLLAMA_BASE_URL") or OLLAMA_BASE_URL).rstrip("/")
        return store.get(("ollama", rest, where), lambda: _ollama(rest, where, env.get("OLLAMA_API_KEY")))
    if prefix in _PREFIX_ALIASES and rest:
        name = f"{_PREFIX_ALIASES[prefix]}:{rest}"
    if ":" not in name:  # a bare name (0.x: DEFAULT_LLM=gpt-4.1-mini) is an OpenAI chat model
        name = "openai-chat:" + name
    defaults: dict[str, Any] = {"max_retries": max_retries(env)}
    if env.get("STRUCKDOWN_TIMEOUT"):
        defaults["timeout"] = request_timeout(env)
    key = ("inferred", name, *sorted(defaults.items()))
    return store.get(key, lambda: _inferred(name), _supported(defaults))


@lru_cache(maxsize=256)
def is_provider(prefix: str) -> bool:
    """Whether `prefix` (the part of a model string before ':') names a pydantic-ai provider."""
    from pydantic_ai.providers import infer_provider_class

    try:
        infer_provider_class(prefix)
    except ImportError:
        return True  # a provider whose SDK is not installed
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class LLMCredentials:
    """0.x's credentials: a key and/or an OpenAI-compatible base URL for the run's model.

    `complete(..., credentials=LLMCredentials(api_key=…, base_url=…))` runs the model
    named by `model=` (else STRUCKDOWN_MODEL / DEFAULT_LLM, else the server's default)
    at `base_url`; with only a key, the provider of the model string gets that key.
    `from_env()` reads LLM_API_KEY and LLM_API_BASE. The key never shows in a repr.
    """

    api_key: str | None = None
    base_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMCredentials:
        env = os.environ if env is None else env
        return cls(api_key=env.get("LLM_API_KEY") or None, base_url=env.get("LLM_API_BASE") or None)

    def __repr__(self) -> str:
        key = self.api_key
        shown = None if key is None else (f"{key[:4]}***{key[-4:]}" if len(key) > 12 else "***")
        return f"LLMCredentials(api_key={shown!r}, base_url={self.base_url!r})"


def with_credentials(model: Any, credentials: Any, store: ModelStore, env: Mapping[str, str] | None = None) -> Any:
    """The Model `model` names, run with `credentials` (an `LLMCredentials`, or any object
    with `api_key` and `base_url`). A Model instance already has its own and is refused."""
    env = os.environ if env is None else env
    if credentials is None:
        return model
    if model is not None and not isinstance(model, str):
        raise TypeError("credentials= applies to a model named by a string, not to a Model object (which has its own)")
    api_key, base_url = getattr(credentials, "api_key", None), getattr(credentials, "base_url", None)
    name = model or env.get("STRUCKDOWN_MODEL") or env.get("DEFAULT_LLM")
    if base_url:
        return openai_compatible(name or "default", str(base_url), api_key, env=env, store=store)
    if not name:
        raise ConfigurationError("credentials= without base_url needs a model: pass model= or set STRUCKDOWN_MODEL")
    if not api_key:
        return _from_string(name, env, store)
    name = name.strip()
    if ":" not in name:
        name = "openai-chat:" + name
    key = ("keyed", name, hashlib.sha256(api_key.encode()).hexdigest())
    return store.get(key, lambda: _with_key(name, api_key), _supported({"max_retries": max_retries(env)}))


def _with_key(name: str, api_key: str) -> Any:
    from pydantic_ai.models import infer_model
    from pydantic_ai.providers import infer_provider_class

    def provider(prefix: str) -> Any:
        return infer_provider_class(prefix)(api_key=api_key)  # type: ignore[call-arg]

    try:
        return infer_model(name, provider_factory=provider)
    except Exception as exc:
        raise ConfigurationError(f"cannot use model {name!r} with the given api_key: {exc}") from exc


def config_origin(model: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """Where `model` (None: the default model) leads when a config file decides it, for
    the CLI to show before anything is sent; None when no config file is involved.

    `model 'gpu' → http://gpu-box:8000/v1 (served name qwen, key $GPU_KEY), from /p/struckdown.toml`
    """
    env = os.environ if env is None else env
    head = None
    if model is None:
        model = env.get("STRUCKDOWN_MODEL") or env.get("DEFAULT_LLM")
        if not model and env.get("LLM_API_BASE"):
            return None
    if model is not None and model.strip() == "test":
        return None  # never an alias (resolution checks "test" first)
    config = load_config()
    if not model:
        if not config.model:
            return None
        model = config.model
        head = f"default model {model.strip()!r}"
    model = model.strip()
    target = None if model == "test" else config.alias(model)  # a config default may be "test"
    if target is None:
        return None if head is None else f"{head}, from {config.source}"
    if isinstance(target, EndpointAlias):
        if target.api_key is not None:
            key = "literal api_key"
        elif target.api_key_env or target.sends_llm_api_key(env):
            key = f"key ${target.api_key_env or 'LLM_API_KEY'}"
        else:
            key = "no key"
        where = f"{target.base_url.rstrip('/')} (served name {target.name}, {key})"
    else:
        where = target
    return f"{head or f'model {model!r}'} → {where}, from {config.source}"


def _strip_provider(name: str) -> str:
    for prefix in _OPENAI_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _from_factory(reference: str, stamp: int | None = None) -> Any:
    """`package.module:factory` → the Model it returns (called once per process, and
    again when the module's file changes: `stamp` is its mtime now)."""
    from .factory import import_fresh

    try:
        factory = import_fresh(reference, stamp)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"model factory {reference!r} cannot be loaded: {exc}") from None
    except SyntaxError as exc:  # an edit that does not parse, met on the reload
        raise ConfigurationError(f"model factory {reference!r} cannot be loaded: SyntaxError: {exc}") from None
    if not callable(factory):
        raise ConfigurationError(f"model factory {reference!r} is not callable")
    return factory()


def _test_model() -> Any:
    """`"test"`: pydantic-ai's TestModel answering every type with a valid sample (a dry run).
    genai-prices' data is not loaded for it (deferred_prices.py): a dry run needs no price."""
    from ..types.samples import SampleModel
    from .deferred_prices import defer

    defer()
    return SampleModel()


def _openai_compatible(name: str, base_url: str, api_key: str, timeout: float, retries: int) -> Any:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    # No http_client of our own: the provider then owns its client and replaces
    # it when a later run happens on another event loop (sync wrappers do that).
    provider = OpenAIProvider(base_url=base_url, api_key=api_key)
    return OpenAIChatModel(name, provider=provider, settings={"timeout": timeout, "max_retries": retries})


def _ollama(name: str, base_url: str, api_key: str | None) -> Any:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.ollama import OllamaProvider

    return OpenAIChatModel(name, provider=OllamaProvider(base_url=base_url, api_key=api_key or "ollama"))


def _inferred(name: str) -> Any:
    from pydantic_ai.models import infer_model

    try:
        return infer_model(name)
    except ImportError as exc:  # the provider's SDK is missing: name struckdown's extra that has it
        extra = PROVIDER_EXTRAS.get(name.partition(":")[0])
        if extra is None:
            raise ConfigurationError(f"cannot use model {name!r}: {exc}") from exc
        raise ConfigurationError(
            f"cannot use model {name!r}: its provider's library is not installed; "
            f"pip install 'struckdown[{extra}]'"
        ) from exc
    except Exception as exc:  # unknown provider, missing key: say what to do
        factory = _missing_factory(name)
        if factory is not None:
            raise ConfigurationError(f"cannot use model {name!r}: {factory}") from exc
        raise ConfigurationError(
            f"cannot use model {name!r}: {exc} (model strings look like 'openai-chat:gpt-4o-mini'; "
            "for a local server set LLM_API_BASE)"
        ) from exc


def _missing_factory(name: str) -> str | None:
    """For a name shaped like `module:factory` whose module is neither a provider nor found:
    what was looked for, and where (None for any other name)."""
    import sys

    module, _, attr = name.partition(":")
    parts = module.split(".")
    if not attr.isidentifier() or not all(p.isidentifier() for p in parts) or is_provider(module):
        return None
    where = "in the current folder and on sys.path" if {"", os.getcwd()} & set(sys.path) else (
        "on sys.path (the current folder is not on it)")  # fmt: skip
    path = "/".join(parts)
    return (
        f"{module!r} is no pydantic-ai provider, and no module {module} was found to call {attr}() from "
        f"(looked for {path}.py or {path}/__init__.py {where}; PYTHONPATH adds folders). "
        "Model strings look like 'openai-chat:gpt-4o-mini'"
    )


def _supported(defaults: dict[str, Any]) -> Callable[[Any], Mapping[str, Any]]:
    """The run defaults the built model's class accepts (an unsupported setting would
    warn on every request)."""

    def accepted(model: Any) -> Mapping[str, Any]:
        unsupported: frozenset[str] = getattr(type(model), "unsupported_settings", frozenset())
        return {k: v for k, v in defaults.items() if k not in unsupported}

    return accepted


def endpoint_of(model: Any) -> str:
    """A stable name for where requests go: part of the response-cache key.

    Two servers can serve the same model name with different weights or
    quantisation, so the cache must not mix their answers.
    """
    if isinstance(model, str):
        return model
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.models.wrapper import WrapperModel

    if isinstance(model, TestModel):
        return "test"
    if isinstance(model, FunctionModel):  # its answers are its code's: an edited function is a new model
        from .function_key import function_digest

        return f"function:{_function_name(model)}#{function_digest(model.function, model.stream_function)}"
    if isinstance(model, WrapperModel):
        return endpoint_of(model.wrapped)
    if isinstance(model, FallbackModel):
        return "fallback(" + ",".join(f"{endpoint_of(m)}#{m.model_name}" for m in model.models) + ")"
    base = getattr(model, "base_url", None)
    if base:
        return str(base).rstrip("/")
    return str(getattr(model, "system", None) or type(model).__name__)


def can_stream(model: Any) -> bool:
    """Whether `model` can answer a streamed request: not a FunctionModel built without a
    `stream_function` (pydantic-ai asserts on the first streamed request), nor a wrapper or
    fallback chain holding one."""
    if isinstance(model, str):
        return True
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.wrapper import WrapperModel

    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    if isinstance(model, WrapperModel):
        return can_stream(model.wrapped)
    if isinstance(model, FallbackModel):
        return all(can_stream(m) for m in model.models)
    return True


def _function_name(model: Any) -> str:
    fn = model.function or model.stream_function
    if fn is None:
        return "anonymous"
    module = getattr(fn, "__module__", "") or ""
    qualname = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "anonymous"))
    return f"{module}.{qualname}" if module else qualname


def _generated_name(model: Any) -> str:
    """The name pydantic-ai gives a FunctionModel built without `model_name=`."""

    def name(fn: Any) -> str:
        return "" if fn is None else str(getattr(fn, "__name__", type(fn).__name__))

    return f"function:{name(model.function)}:{name(model.stream_function)}"


def model_display(model: Any) -> str:
    """How errors and the CLI name a model: its name and, for a served model, where it runs
    (`'qwen3:8b' at http://127.0.0.1:8080/v1`); pydantic-ai's `provider:name` otherwise."""
    if isinstance(model, str):
        return model
    from pydantic_ai.models.function import FunctionModel

    if isinstance(model, FunctionModel):
        return model_label(model)
    name = getattr(model, "model_name", "") or type(model).__name__
    base = str(getattr(model, "base_url", None) or "").rstrip("/")
    if base and not _is_provider_home(base):
        if name == PLACEHOLDER_NAME:  # LLM_API_BASE without a name: the server's own, once it answered
            served = getattr(model, SERVED_NAME_ATTR, None)
            return f"{served!r} at {base}" if served else f"served at {base}"
        return f"{name!r} at {base}"
    system = getattr(model, "system", "") or ""
    return f"{system}:{name}" if system else str(name)


def _is_provider_home(base: str) -> bool:
    """Whether `base` is a provider's own API (named by the provider, not the URL)."""
    from urllib.parse import urlsplit

    host = urlsplit(base).hostname or ""
    return host.endswith(("api.openai.com", "api.anthropic.com", "googleapis.com", "api.mistral.ai", "api.groq.com"))


def model_label(model: Any) -> str:
    """A short human name for a model (error messages, cache keys): `system:name[@base_url]`."""
    if isinstance(model, str):
        return model
    from pydantic_ai.models.function import FunctionModel

    if isinstance(model, FunctionModel):
        if model.model_name != _generated_name(model):  # FunctionModel(…, model_name="my-bot")
            return model.model_name
        fn = model.function or model.stream_function
        return f"function:{getattr(fn, '__name__', 'anonymous')}"
    system = getattr(model, "system", "") or ""
    name = getattr(model, "model_name", "") or type(model).__name__
    base = str(getattr(model, "base_url", None) or "").rstrip("/")
    return f"{system}:{name}@{base}" if base else f"{system}:{name}"


def accepts_temperature(model: Any) -> bool:
    """Whether `model` takes a `temperature` setting: not a model whose profile says it
    always reasons (o-series, GPT-5, …), refuses sampling settings (newer Claude), or
    whose class does not support the setting. pydantic-ai would drop the setting there
    with a warning on every request; struckdown's type defaults are simply not sent."""
    if "temperature" in getattr(type(model), "unsupported_settings", frozenset()):
        return False
    profile = getattr(model, "profile", None)
    if not isinstance(profile, Mapping):
        return True
    if profile.get("thinking_always_enabled") or profile.get("anthropic_disallows_sampling_settings"):
        return False
    if profile.get("openai_supports_reasoning") and profile.get("thinking_enabled_by_default"):
        return False
    return "temperature" not in (profile.get("openai_unsupported_model_settings") or ())


def slot_run_defaults(
    model: Any,
    environment: Any,
    type_name: str,
    caller: Mapping[str, Any] | None,
    slot: Mapping[str, Any],
) -> Mapping[str, Any]:
    """The run settings struckdown gives one slot's requests, under the caller's and the
    slot's own: the defaults of a model the Environment's store built, plus the slot
    type's default temperature (SPEC §11) when no one set a temperature (the slot, the
    caller's settings, the model object's own settings), nothing asks the model to
    reason, and the model takes one."""
    from ..types.temperatures import default_temperature, type_settings

    defaults: Mapping[str, Any] = environment.models.defaults(model)
    own_type = type_settings(type_name, environment.types)  # a 0.x YAML type's llm_config
    if own_type:
        given = {**(caller or {}), **slot}
        defaults = {**defaults, **{k: v for k, v in own_type.items() if k not in given}}
    if "temperature" in slot or (caller and "temperature" in caller):
        return defaults
    temperature = default_temperature(type_name, environment.types)
    own = getattr(model, "settings", None) or {}
    if temperature is None or "temperature" in own:
        return defaults
    thinking = slot.get("thinking", (caller or {}).get("thinking", own.get("thinking")))
    if thinking not in (None, False, "off") or not accepts_temperature(model):
        return defaults
    return {**defaults, "temperature": temperature}

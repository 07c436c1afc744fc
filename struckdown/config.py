"""Project configuration: model aliases and a default model (SPEC §7).

Templates say `model=fast` rather than a provider string, so a project can
switch providers in one place. The aliases live in `struckdown.toml` in the
current directory, or under `[tool.struckdown]` in `./pyproject.toml`:

    [models]                        # [tool.struckdown.models] in pyproject.toml
    fast = "openai-chat:gpt-4o-mini"
    local = { base_url = "http://127.0.0.1:8765/v1", name = "qwen" }

A top-level `model = "fast"` names the default model, used when neither
`--model` nor the environment picks one.

The file is read on demand (never at import) and re-read only when it changes,
so long-lived processes see edits without paying a parse per slot.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigurationError

CONFIG_FILE = "struckdown.toml"
PYPROJECT = "pyproject.toml"

#: One alias target: a pydantic-ai model string, or an OpenAI-compatible endpoint.
AliasTarget = str | Mapping[str, Any]


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

    def key(self, env: Mapping[str, str]) -> str | None:
        if self.api_key is not None:
            return self.api_key
        if self.api_key_env:
            return env.get(self.api_key_env)
        return env.get("LLM_API_KEY")


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


def _parse_alias(name: str, target: Any, path: Path) -> str | EndpointAlias:
    if isinstance(target, str):
        return target
    if isinstance(target, dict) and isinstance(target.get("base_url"), str):
        unknown = set(target) - {"base_url", "name", "api_key", "api_key_env"}
        if unknown:
            raise ConfigurationError(f"{path}: model alias {name!r} has unknown keys {sorted(unknown)}")
        return EndpointAlias(
            base_url=target["base_url"],
            name=str(target.get("name", "default")),
            api_key=target.get("api_key"),
            api_key_env=target.get("api_key_env"),
        )
    raise ConfigurationError(
        f"{path}: model alias {name!r} must be a model string or "
        '{ base_url = "http://…/v1", name = "…" }'
    )

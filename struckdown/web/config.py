"""What one playground server is allowed to do: `sd edit` (one author, one folder)
or `sd serve` (many users, no files)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .pool import PoolLimits

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class ModelPolicy:
    """Which model names a request may reach (the page's pick, and every `model=` and
    `fallback=` option of the template). Travels to the worker inside each job."""

    allowed: tuple[str, ...] = ()  # empty: edit takes any name, serve only its default
    shared: bool = False
    allow_factories: bool = False  # serve: `module:factory` names run only with --allow-factories

    def refusal(self, name: str | None) -> str | None:
        """Why `name` may not be used here (None: it may). The allow-list is a string
        comparison, done before anything is imported for the name."""
        if self.allowed:
            if name is not None and name not in self.allowed:
                return f"model {name!r} is not allowed here; allowed: {', '.join(self.allowed)}"
        elif self.shared and name is not None:
            return f"model {name!r} is not allowed here: this server uses its default model only"
        if self.shared and not self.allow_factories and name is not None and is_factory(name):
            return f"model {name!r} is a module:factory name, which this server runs only with --allow-factories"
        return None

    def to_dict(self) -> dict[str, object]:
        return {"allowed": list(self.allowed), "shared": self.shared, "allow_factories": self.allow_factories}

    @classmethod
    def from_dict(cls, data: object) -> ModelPolicy:
        if not isinstance(data, dict):
            return cls(shared=True)  # a job without a policy gets the strictest one
        return cls(tuple(data.get("allowed") or ()), bool(data.get("shared")), bool(data.get("allow_factories")))


@lru_cache(maxsize=64)
def is_factory(name: str) -> bool:
    """Whether `name` is a `package.module:factory` reference (imports nothing of it but
    the search for its module; called only for names the operator listed)."""
    if ":" not in name:
        return False
    from ..tools.files import factory_reference

    return factory_reference(name.strip()) is not None


@dataclass(frozen=True)
class WebConfig:
    mode: str  # "edit" | "serve"
    tokens: tuple[str, ...]  # every request carries one of them
    root: Path | None = None  # edit: the folder whose files the page may read and save
    models: tuple[str, ...] = ()  # allow-list; empty: edit takes any name, serve only the default
    tools_file: Path | None = None  # serve: the operator's tools; edit: picked in the page
    allow_factories: bool = False  # serve: `module:factory` model names (--allow-factories)
    max_body_bytes: int = 1_000_000
    rate_per_minute: int = 120  # per key; 0 turns the limit off
    limits: PoolLimits = field(default_factory=PoolLimits)

    def __post_init__(self) -> None:
        if self.mode not in ("edit", "serve"):
            raise ValueError(f"mode is edit or serve, not {self.mode!r}")
        if not self.tokens:
            raise ValueError("a playground server needs at least one token")
        if self.mode == "edit" and self.root is None:
            raise ValueError("sd edit needs a folder")

    @property
    def shared(self) -> bool:
        return self.mode == "serve"

    @property
    def model_policy(self) -> ModelPolicy:
        return ModelPolicy(self.models, self.shared, self.allow_factories)

    def model_refusal(self, name: str | None) -> str | None:
        """Why `name` may not be used here (None: it may)."""
        return self.model_policy.refusal(name)

    def default_model(self) -> str | None:
        return self.models[0] if self.models else None

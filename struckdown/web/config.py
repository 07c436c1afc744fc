"""What one playground server is allowed to do: `sd edit` (one author, one folder)
or `sd serve` (many users, no files)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .policy import ModelPolicy
from .pool import PoolLimits

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class WebConfig:
    mode: str  # "edit" | "serve"
    tokens: tuple[str, ...]  # every request carries one of them
    root: Path | None = None  # edit: the folder whose files the page may read and save
    models: tuple[str, ...] = ()  # allow-list; empty: edit takes any name, serve only the default
    tools_file: Path | None = None  # serve: the operator's tools
    tool_files: tuple[Path, ...] = ()  # edit: the files given with `sd edit --tools`, the only ones the page may pick
    allow_factories: bool = False  # serve: `module:factory` model names (--allow-factories)
    max_body_bytes: int = 1_000_000
    rate_per_minute: int = 120  # per key; 0 turns the limit off
    limits: PoolLimits = field(default_factory=PoolLimits)
    api_root: Path | None = None  # serve --api DIR: each T.sd there is POST /v1/templates/T (web/api.py)

    def __post_init__(self) -> None:
        if self.mode not in ("edit", "serve"):
            raise ValueError(f"mode is edit or serve, not {self.mode!r}")
        if not self.tokens:
            raise ValueError("a playground server needs at least one token")
        if self.mode == "edit" and self.root is None:
            raise ValueError("sd edit needs a folder")
        if self.api_root is not None and self.mode != "serve":
            raise ValueError("templates are served as an API by sd serve --api only")

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

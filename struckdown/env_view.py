"""What the stages and the engine read from the Environment that runs them.

A Protocol, so that `check`, `plan` and `run/` depend on this small surface and not on
`environment.py` (the front door imports them; nothing imports it back, not even for
type annotations).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .actions import ActionRegistry
    from .authority import HostPolicy
    from .models.store import ModelStore
    from .render import Renderer
    from .types import TypeRegistry


class EnvironmentView(Protocol):
    types: TypeRegistry
    actions: ActionRegistry
    renderer: Renderer
    models: ModelStore
    response_caches: dict[Path, Any]
    defaults: dict[str, Any]  # the run keywords' defaults (run_options.OPTIONS)
    policy: HostPolicy  # SPEC §30: what the runs may reach (models, files, code, network)

    @property
    def limits(self) -> Any: ...  # the per-slot ceiling (pydantic_ai UsageLimits or None)

    def engine_caches(self) -> Any: ...

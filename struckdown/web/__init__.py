"""The playground: `sd edit` (one author, a folder of templates) and `sd serve` (a
team, templates in requests). Needs the `web` extra (Starlette, uvicorn).

`create_app(WebConfig(...))` is the ASGI app; template work runs in worker
processes (`worker.py`) so a runaway template costs a process, never the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .config import WebConfig


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "WebConfig":
        from .config import WebConfig

        return WebConfig
    raise AttributeError(name)


__all__ = ["WebConfig", "create_app"]

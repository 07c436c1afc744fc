"""struckdown's warnings, pointed where the user can act on them (issue 40, item 14).

`warnings.warn(..., stacklevel=N)` counts frames, and a run's frames are the engine's:
a slot runs in a task of the event loop, several calls below the `sd.complete(...)` that
started it, so a fixed stacklevel names a line of struckdown (`run/slot.py:309`). `warn`
walks the stack instead, past struckdown and the async machinery under it (asyncio,
anyio, pydantic-ai, ...), to the first frame of the caller's code, and names that line.
When the caller is not on the stack (the sync iterator runs the loop in a thread of its
own, a worker process runs the template), it names the template's line, when the
warning has one (`at=`): `t.sd:3: UserWarning: ...`. Either way the warnings module's
filters and its once-per-location rule apply as for any warning.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

#: Top-level packages whose frames are never "the caller".
_MACHINERY = frozenset({
    "struckdown", "asyncio", "anyio", "contextlib", "threading", "concurrent", "functools", "pydantic_ai",
    "pydantic_graph", "exceptiongroup", "sniffio", "typer", "click", "runpy", "importlib",
})  # fmt: skip
#: The once-per-location registries of warnings placed at a template's line, by file.
_TEMPLATE_REGISTRIES: dict[str, dict[Any, Any]] = {}


def warn(message: str, category: type[Warning] = UserWarning, *, at: Any = None) -> None:
    """Warn at the caller's line, else at `at` (a template `Pos`: line and filename)."""
    frame = _caller_frame()
    if frame is not None:
        scope = frame.f_globals
        warnings.warn_explicit(
            message, category, frame.f_code.co_filename, frame.f_lineno, module=scope.get("__name__"),
            registry=scope.setdefault("__warningregistry__", {}), module_globals=scope,
        )  # fmt: skip
    elif at is not None:
        filename = getattr(at, "filename", None) or "<template>"
        registry = _TEMPLATE_REGISTRIES.setdefault(filename, {})
        warnings.warn_explicit(message, category, filename, at.line, module="struckdown.template", registry=registry)
    else:
        warnings.warn(message, category, stacklevel=2)


def _caller_frame() -> Any:
    frame: Any = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if name.partition(".")[0] not in _MACHINERY:
            return frame
        frame = frame.f_back
    return None

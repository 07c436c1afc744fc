"""struckdown's warnings, pointed where the user can act on them (issue 40, item 14).

`warnings.warn(..., stacklevel=N)` counts frames, and a run's frames are the engine's:
a slot runs in a task of the event loop, several calls below the `sd.complete(...)` that
started it, so a fixed stacklevel names a line of struckdown (`run/slot.py:309`). `warn`
walks the stack instead, past struckdown and the async machinery under it (asyncio,
anyio, pydantic-ai, ...), to the first frame of the caller's code, and names that line.
A sync call made inside a running loop (a notebook) runs in a thread of its own while
the caller waits: the thread is handed the caller's frame (`hand_over_caller`), and the
warning names it as well. When the caller is not on the stack (the sync iterator runs
the loop in a thread of its own, a worker process runs the template), it names the
template's line, when the warning has one (`at=`): `t.sd:3: UserWarning: ...`. Either
way the warnings module's filters and its once-per-location rule apply as for any warning,
whichever way the caller started Python (a file, `python -c`, a script on stdin).
"""

from __future__ import annotations

import contextlib
import contextvars
import linecache
import sys
import warnings
from typing import Any

#: Top-level packages whose frames are never "the caller".
_MACHINERY = frozenset({
    "struckdown", "asyncio", "anyio", "contextlib", "threading", "concurrent", "functools", "pydantic_ai",
    "pydantic_graph", "exceptiongroup", "sniffio", "typer", "click", "runpy", "importlib",
})  # fmt: skip
#: The caller's frame, for a thread that runs a sync call on the caller's behalf
#: (`sync.run_sync` inside a running loop: a notebook cell): set by `hand_over_caller`.
_HANDED_CALLER: contextvars.ContextVar[Any] = contextvars.ContextVar("struckdown_caller", default=None)
#: The once-per-location registries of warnings placed at a template's line, by file.
_TEMPLATE_REGISTRIES: dict[str, dict[Any, Any]] = {}


def warn(message: str, category: type[Warning] = UserWarning, *, at: Any = None) -> None:
    """Warn at the caller's line, else at `at` (a template `Pos`: line and filename)."""
    frame = _caller_frame() or _HANDED_CALLER.get()
    if frame is not None:
        scope = frame.f_globals
        filename = frame.f_code.co_filename
        _load_source(filename, scope)
        warnings.warn_explicit(
            message, category, filename, frame.f_lineno, module=scope.get("__name__"),
            registry=scope.setdefault("__warningregistry__", {}),
        )  # fmt: skip
    elif at is not None:
        filename = getattr(at, "filename", None) or "<template>"
        registry = _TEMPLATE_REGISTRIES.setdefault(filename, {})
        warnings.warn_explicit(message, category, filename, at.line, module="struckdown.template", registry=registry)
    else:
        warnings.warn(message, category, stacklevel=2)


def hand_over_caller() -> contextvars.Context:
    """A context for a thread that runs a call on its caller's behalf while the caller waits
    (a notebook cell's `sd.complete` runs on a loop in a thread of its own): warnings raised
    in it name the caller's line, as they would without the thread."""
    context = contextvars.copy_context()
    context.run(_HANDED_CALLER.set, _caller_frame())
    return context


def _load_source(filename: str, scope: dict[str, Any]) -> None:
    """Put the caller's source where the warning's display finds it (linecache), asking the
    module's loader when the file cannot be read (a zip import). Not through `warn_explicit`'s
    `module_globals`: CPython asks that loader itself and lets its error out, and the loader of
    a `__main__` run from `python -c` or a script on stdin is the built-in importer, whose
    `get_source("__main__")` raises ImportError (issue 48, item 1). linecache swallows a
    loader's failure; a warning never ends a run."""
    with contextlib.suppress(Exception):
        linecache.getlines(filename, scope)


def _caller_frame() -> Any:
    frame: Any = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if name.partition(".")[0] not in _MACHINERY:
            return frame
        frame = frame.f_back
    return None

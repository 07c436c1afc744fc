"""Batch rows on a Dask cluster: `complete_batch_async(..., executor=DaskExecutor())`.

Only plain data travels to the workers: the template text, the template path and
include paths as strings, each row's context, and keyword arguments that are
data (a model *string*, tools as importable names, JSON-able deps, a
`UsageLimits`, a settings dict, the cache flag or directory, `stop_at`,
`on_halt`). Objects that are code (a `Model`, a function, a cache object) are
refused with a `ValueError` that says which importable name to pass instead; the
worker imports it. Each worker parses the template once (parsing is cached per
process by text) and runs its rows as `async def` tasks on its event loop.

Around each row's run (all of its model calls) a cluster-wide
`distributed.Semaphore` caps how many rows run at once (`max_in_flight`), so
the cap is per row, not per request. Transient provider failures (rate limits,
connection errors, 5xx) are raised inside the task so Dask retries the row up
to `retries` times; every other failure comes back as the row's exception. Rows
are handed to `on_result` in the caller's process as they finish.

See docs/distributed.md for running a cluster, worker environments and what a
lost worker costs.

The package follows the trip a row makes: `shipping` checks what may travel to
the workers, `executor` submits rows and collects them (caller side), `worker`
runs them there, and `packing` brings each outcome back.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Loaded on first use (PEP 562): `shipping`'s plain forms of the run options are read by
# every paused run (`run/settings.recorded_options`), which must not import Dask.
_EXPORTS = {
    "DaskExecutor": "executor",
    "ship_kwargs": "shipping",  # public, as before the split, though not in __all__
    "TransientRowError": "worker",
    "is_transient": "worker",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'struckdown.distributed' has no attribute {name!r}")
    if module != "shipping":
        _require_dask()
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def _require_dask() -> None:
    try:
        import cloudpickle  # noqa: F401 - checked here once, so that a missing extra
        import distributed  # noqa: F401 - says how to install it
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "struckdown.distributed needs Dask: pip install 'struckdown[dask]' (or 'dask[distributed]')"
        ) from exc


if TYPE_CHECKING:
    from .executor import DaskExecutor as DaskExecutor
    from .shipping import ship_kwargs as ship_kwargs
    from .worker import TransientRowError as TransientRowError
    from .worker import is_transient as is_transient

__all__ = ["DaskExecutor", "TransientRowError", "is_transient"]

"""What may travel to the workers: keyword arguments and row contexts as plain data.

A `Model`, a function or a cache object cannot be pickled to another machine in
any useful way, so they are refused here, in the caller's process, with an error
that names the importable form to pass instead (a model string, a
`package.module:function`, a cache directory). The workers turn those names back
into objects (see `worker`).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

from ..run_options import EXECUTOR_OPTIONS, OPTIONS, RUN_OPTIONS, checked_options


def ship_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Check that every keyword argument can travel and return what the workers get: each
    run option in the form its row in `run_options.OPTIONS` ships (`RunOption.shipped`).

    Raises ValueError for anything that is code or holds live state (a Model object, a
    function, a cache object), naming the importable form to pass instead, and for an
    option that cannot travel at all (one line naming it and the Dask batch).
    """
    unknown = set(kwargs) - RUN_OPTIONS - EXECUTOR_OPTIONS
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) for a Dask batch: {', '.join(sorted(unknown))}")
    kwargs = {**checked_options({k: v for k, v in kwargs.items() if k in RUN_OPTIONS}),
              **{k: v for k, v in kwargs.items() if k in EXECUTOR_OPTIONS}}
    out: dict[str, Any] = {"model": None, "tools": (), "deps": None, "cache": None, "mcp": None}
    for name in ("model_factory", "deps_factory"):
        value = kwargs.get(name)
        if value is not None:
            _check_importable_name(name, value)
        out[name] = value
    if kwargs.get("model") is not None and out["model_factory"] is not None:
        raise ValueError("pass model= or model_factory=, not both")
    if kwargs.get("deps") is not None and out["deps_factory"] is not None:
        raise ValueError("pass deps= or deps_factory=, not both")
    for name, value in kwargs.items():
        if name in RUN_OPTIONS:
            out[name] = OPTIONS[name].shipped(value)
    return out


def _check_importable_name(what: str, value: Any) -> None:
    if not isinstance(value, str) or ":" not in value or not all(value.partition(":")[::2]):
        raise ValueError(f"{what}= must be an importable name like 'package.module:function', got {value!r}")


def plain_context(context: Any) -> dict[str, Any]:
    """A row's context as a dict that pickles; a row that cannot travel fails on its own."""
    if not isinstance(context, Mapping):
        raise ValueError(f"a row context must be a mapping, got {type(context).__name__}")
    row = dict(context)
    number = getattr(context, "row", None)
    if isinstance(number, int):  # sd batch's row: its input row, which effect ids name (SPEC §25)
        from ..run.durable.effects import RowContext

        row = RowContext(row, row=number)
    try:
        pickle.dumps(row)
    except Exception as exc:  # noqa: BLE001 - any pickling failure means "not plain data"
        raise ValueError(
            f"this row cannot be sent to Dask workers ({type(exc).__name__}: {exc}); "
            "row contexts must be plain data (str, numbers, lists, dicts, dates)"
        ) from None
    return row

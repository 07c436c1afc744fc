"""Packing a row's outcome (a Result or an error) for the trip back from a worker.

struckdown's errors and `Result` pickle by themselves (their constructors take
their data). This pickler keeps exceptions to their own reduction, not the one
`distributed` installs, and cloudpickle covers answer types created at run time.
Tracebacks and chained causes stay behind. What still cannot be pickled comes back as a RuntimeError with the original text.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import cloudpickle

from ..errors import SlotError, StruckdownError, error_slot
from ..results import Result


class _Pickler(cloudpickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, BaseException):
            # The class's own reduction, not the copyreg one `distributed` installs (tblib),
            # which drags along tracebacks and the whole __cause__/__context__ chain.
            return obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        return super().reducer_override(obj)


def _dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def pack_result(result: Result) -> tuple[Any, ...]:
    """("ok", the pickled Result); a Result that cannot be pickled fails its row instead."""
    try:
        return ("ok", _dumps(result))
    except Exception as exc:  # noqa: BLE001 - an answer that cannot travel fails its row
        return pack_error(RuntimeError(f"the row's result cannot be sent back from the worker: {exc}"))


def pack_error(exc: BaseException) -> tuple[Any, ...]:
    """("error", text, slot, pickled error or None): the text and slot survive an error
    that does not pickle."""
    text = str(exc).strip()
    text = text if isinstance(exc, StruckdownError) or not text else f"{type(exc).__name__}: {text}"
    slot = error_slot(exc)
    try:
        blob: bytes | None = _dumps(exc)
    except Exception:  # noqa: BLE001 - fall back to the text
        blob = None
    return ("error", text or type(exc).__name__, slot, blob)


def unpack(packed: Any) -> Any:
    """The Result or exception a packed outcome stands for, rebuilt in the caller's process."""
    if not isinstance(packed, tuple) or not packed:
        return RuntimeError(f"unexpected row outcome from the worker: {packed!r}")
    if packed[0] == "ok":
        try:
            return pickle.loads(packed[1])
        except Exception as exc:  # noqa: BLE001 - e.g. an answer type not importable here
            return RuntimeError(f"the row's result cannot be loaded here: {type(exc).__name__}: {exc}")
    _, text, slot, blob = packed
    error: BaseException | None = None
    if blob is not None:
        try:
            error = pickle.loads(blob)
        except Exception:  # noqa: BLE001 - an exception class only the worker knows
            error = None
    if not isinstance(error, BaseException):
        error = RuntimeError(text) if slot is None else SlotError(slot, text)
    return error


def pack_outcomes(outcomes: list[tuple[int, Any]]) -> tuple[Any, ...]:
    """A chunk's `(index, Result or exception)` pairs for the trip back: ("chunk", one
    pickle of them all), so an answer type made at run time travels once per chunk,
    not once per row. When that fails, each row is packed on its own, ("rows", [(index,
    packed)]), and only a row that cannot travel fails."""
    try:
        return ("chunk", _dumps(outcomes))
    except Exception:  # noqa: BLE001 - fall back to one row at a time
        rows = [
            (index, pack_error(outcome) if isinstance(outcome, BaseException) else pack_result(outcome))
            for index, outcome in outcomes
        ]
        return ("rows", rows)


def unpack_outcomes(packed: Any, indices: list[int]) -> list[tuple[int, Any]]:
    """The `(index, outcome)` pairs of a packed chunk; a chunk that cannot be loaded
    here fails each of its rows (`indices`) with the reason."""
    if isinstance(packed, tuple) and len(packed) == 2 and packed[0] == "rows":
        return [(index, unpack(row)) for index, row in packed[1]]
    if isinstance(packed, tuple) and len(packed) == 2 and packed[0] == "chunk":
        try:
            pairs: list[tuple[int, Any]] = pickle.loads(packed[1])
            return pairs
        except Exception as exc:  # noqa: BLE001 - e.g. an answer type not importable here
            error = f"the row's result cannot be loaded here: {type(exc).__name__}: {exc}"
            return [(index, RuntimeError(error)) for index in indices]
    return [(index, RuntimeError(f"unexpected row outcome from the worker: {packed!r}")) for index in indices]

"""The resilience settings of a run (SPEC §14: `retries=`, `retry_base_delay=`,
`retry_max_delay=`, `fallback=`, `on_truncate=`, `on_retry=`) and what its two layers,
the retries (`retries.py`) and the fallback (`resilience.py`), share: how a retry or a
fallback is reported, and how a provider failure is described.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..models.errors import ModelError

DEFAULT_RETRIES = 3
DEFAULT_RETRY_BASE_DELAY = 1.0
DEFAULT_RETRY_MAX_DELAY = 30.0

Emit = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True)
class Resilience:
    """A run's retry and fallback settings (the call's keywords over the Environment's)."""

    retries: int = DEFAULT_RETRIES
    retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY
    retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY
    fallback: tuple[Any, ...] = ()  # models (or model strings) tried in order after the slot's own
    on_truncate: str = "keep"
    observer: Callable[[Any], Any] | None = field(default=None, compare=False)  # on_retry=: sees SlotRetry/SlotFallback

    @classmethod
    def of(
        cls,
        retries: int | None = None,
        retry_base_delay: float | None = None,
        retry_max_delay: float | None = None,
        fallback: Any = None,
        on_truncate: str | None = None,
        observer: Callable[[Any], Any] | None = None,
    ) -> Resilience:
        """Checked settings; None means the default (`retries`: STRUCKDOWN_MAX_RETRIES, else 3)."""
        if retries is None:
            from ..models import max_retries

            retries = max_retries() if os.environ.get("STRUCKDOWN_MAX_RETRIES") else DEFAULT_RETRIES
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be a whole number of at least 0, not {retries!r}")
        base = _seconds("retry_base_delay", DEFAULT_RETRY_BASE_DELAY if retry_base_delay is None else retry_base_delay)
        top = _seconds("retry_max_delay", DEFAULT_RETRY_MAX_DELAY if retry_max_delay is None else retry_max_delay)
        if on_truncate is None:
            on_truncate = "keep"
        if on_truncate not in ("keep", "error"):
            raise ValueError(f"on_truncate must be 'keep' or 'error', not {on_truncate!r}")
        models: tuple[Any, ...]
        if fallback is None:
            models = ()
        elif isinstance(fallback, str):
            models = tuple(m.strip() for m in fallback.split(",") if m.strip())
        elif isinstance(fallback, Sequence):
            models = tuple(fallback)
        else:
            models = (fallback,)
        if observer is not None and not callable(observer):
            raise ValueError(f"on_retry must be a function of one event, not {observer!r}")
        if not models and observer is None and cls.retries == retries and (base, top, on_truncate) == (
            DEFAULT_RETRY_BASE_DELAY, DEFAULT_RETRY_MAX_DELAY, "keep"
        ):
            return DEFAULTS
        return cls(retries, base, top, models, on_truncate, observer)


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{name} must be a number of seconds of at least 0, not {value!r}")
    return float(value)


DEFAULTS = Resilience()


async def report(emit: Emit, settings: Resilience, event: Any) -> None:
    """A SlotRetry or SlotFallback: into the run's events, and to the caller's `on_retry`
    (which sees them in `complete()` and batches too, where no event stream is read)."""
    await emit(event)
    if settings.observer is not None:
        maybe = settings.observer(event)
        if hasattr(maybe, "__await__"):
            await maybe


def describe(error: ModelError) -> str:
    """A provider failure on one line, without its hint: `rate limited (HTTP 429): slow down`."""
    where = f" (HTTP {error.status})" if error.status is not None else ""
    detail = f": {error.detail}" if error.detail else ""
    return f"{error.what}{where}{detail}"

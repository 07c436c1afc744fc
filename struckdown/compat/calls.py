"""Calling code written for struckdown 0.x (SPEC §11): its names and keyword arguments.

Names: `StruckdownResult` (= `Result`), `TemplateError` (= `TemplateSyntaxError`),
`LLMError` (= `ModelError`), `LLMCredentials` (in `models`), `OnHalt` (in `environment`).

The Environment hands its own keyword names in (`valid`): this module imports nothing
of it, so the front door may call it without an import cycle.

Keywords, checked at the call, before any work: `extra_kwargs=` is `settings=`,
`credentials=` picks the model's key and endpoint, and a batch's `max_concurrent=` /
`on_complete=` are `concurrency=` / `on_result=`. Any other keyword the entry points
do not take is a `TypeError` at once (never one error per batch row), naming the
closest valid keyword, or what replaced a keyword that 0.x had.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import TemplateSyntaxError
from ..models import LLMCredentials
from ..models.errors import ModelError
from ..results import Result

__all__ = [
    "LLMCredentials",
    "LLMError",
    "StruckdownResult",
    "TemplateError",
    "batch_options",
    "call_options",
]

StruckdownResult = Result
TemplateError = TemplateSyntaxError
LLMError = ModelError

#: 0.x keywords that are gone, and what to do instead.
REMOVED: Mapping[str, str] = {
    "strict_params": "settings are pydantic-ai ModelSettings, checked by pydantic-ai",
    "spec": "pass model= (a Model, a model string or an alias from struckdown.toml)",
    "registry": "name models in struckdown.toml [models] and pass model=, or model= a Model",
    "multipart_prompt": "pass the template as the first argument",
}
#: Keys of 0.x's `extra_kwargs` that are struckdown's own, not model settings.
_EXTRA_OWN = frozenset({"stream_debounce_ms", "mode"})


def call_options(
    function: str, options: Mapping[str, Any], env: Any, valid: frozenset[str], also: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """`options` as today's entry points take them (`valid`: the keywords they take; `env`:
    the Environment whose model store `credentials=` builds into): 0.x's keywords mapped,
    any unknown keyword a TypeError (`also`: further names to suggest). Idempotent, so a
    sync wrapper and its async half may both call it."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in valid:
            out[key] = value
        elif key not in ("extra_kwargs", "credentials"):
            raise TypeError(_unexpected(function, key, valid | also | {"extra_kwargs", "credentials"}))
    if "extra_kwargs" in options:
        if "settings" in options:
            raise TypeError(f"{function}() got both settings= and extra_kwargs= (its 0.x name): pass settings= only")
        out.update(_from_extra_kwargs(options["extra_kwargs"], out))
    if options.get("credentials") is not None:
        from ..models import with_credentials

        out["model"] = with_credentials(out.get("model"), options["credentials"], env.models)
    return out


def batch_options(
    function: str,
    concurrency: int,
    on_result: Callable[..., Any] | None,
    options: Mapping[str, Any],
    env: Any,
    valid: frozenset[str],
) -> tuple[int, Callable[..., Any] | None, dict[str, Any]]:
    """A batch call's concurrency and callback, with 0.x's `max_concurrent=` and
    `on_complete=` read as them, and its other options as `call_options` reads them."""
    rest = dict(options)
    if "max_concurrent" in rest:
        value = rest.pop("max_concurrent")
        if value is not None:
            concurrency = value
    if "on_complete" in rest:
        callback = rest.pop("on_complete")
        if on_result is not None and callback is not None:
            raise TypeError(f"{function}() got both on_result= and on_complete= (its 0.x name): pass one")
        on_result = on_result or callback
    from ..run_options import BATCH_OPTIONS

    try:
        concurrency = BATCH_OPTIONS["concurrency"].check(concurrency)  # type: ignore[misc]  # the row's rule
    except ValueError as exc:
        raise TypeError(f"{function}() {exc}") from None
    names = frozenset(BATCH_OPTIONS) | {"max_concurrent", "on_complete"}
    return concurrency, on_result, call_options(function, rest, env, valid, names)


def _from_extra_kwargs(extra: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise TypeError(f"extra_kwargs must be a mapping of model settings, not {type(extra).__name__}")
    settings = {k: v for k, v in extra.items() if k not in _EXTRA_OWN and k != "model"}
    if settings.get("thinking") in ("off", "on"):
        settings["thinking"] = settings["thinking"] == "on"
    out: dict[str, Any] = {"settings": settings}
    if "model" in extra and given.get("model") is None:
        out["model"] = extra["model"]
    return out


def _unexpected(function: str, key: str, valid: frozenset[str]) -> str:
    message = f"{function}() got an unexpected keyword argument {key!r}"
    if key in REMOVED:
        return f"{message}: {REMOVED[key]}"
    close = difflib.get_close_matches(key, sorted(valid), n=1)
    return f"{message}; did you mean {close[0]!r}?" if close else message


def one_context(function: str, context: Any) -> None:
    """0.x's `complete(template, [ctx1, ctx2])` is a TypeError at the call saying what to use."""
    if context is None or isinstance(context, Mapping):
        return
    if isinstance(context, (list, tuple)) or (hasattr(context, "__iter__") and not isinstance(context, (str, bytes))):
        raise TypeError(
            f"{function}() takes one context dict; for a list of contexts use complete_batch() "
            f"(or complete_batch_async())"
        )
    raise TypeError(f"{function}() takes a context dict (a mapping of names to values), not {type(context).__name__}")

"""`sd test`: one real completion with the configured model: ok, or the reason it failed."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Optional

import typer

from ..errors import describe_error
from .errors import EXIT_ERROR, EXIT_OK, reporting_errors

PROBE = "Reply with the single word OK. [[reply]]"


def selftest_command(model_name: str | None) -> int:
    from ..api import complete
    from ..environment import default_environment
    from ..models import model_label

    started = time.perf_counter()
    model = default_environment().resolve_model(model_name)  # a missing model: one clear sentence (exit 1)
    label = _label(model_name, model, model_label(model))
    try:
        result = complete(PROBE, model=model, cache=False)
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        sys.stderr.write(f"failed: {label}: {describe_error(exc, name_slot=False)}\n")  # the probe's slot is ours
        return EXIT_ERROR
    reply = " ".join(str(result["reply"]).split())
    shown = reply if len(reply) <= 60 else reply[:59] + "…"
    sys.stdout.write(f"ok: {label} answered {shown!r} in {time.perf_counter() - started:.2f} s\n")
    return EXIT_OK


def _label(chosen: object, model: object, resolved: str) -> str:
    """The model as the user named it (`test`, an alias, a model string), with the
    endpoint it reaches when that is a server of its own; a model object by its label."""
    if not isinstance(chosen, str):
        return resolved
    base = str(getattr(model, "base_url", None) or "").rstrip("/")
    return f"{chosen} at {base}" if base else chosen


def command(
    model: Annotated[
        Optional[str],
        typer.Option("--model", "-m", help="Model string, alias or 'test'. Default: STRUCKDOWN_MODEL / DEFAULT_LLM, "
                     "or LLM_API_BASE.", show_default=False),
    ] = None,
) -> None:
    """Send one short request to the configured model: prints ok, or why it failed (exit 1)."""
    with reporting_errors():
        code = selftest_command(model)
    raise typer.Exit(code)

"""Which models a config file decides, shown before a run sends anything (docs/security.md).

A `struckdown.toml` in the working directory can point an alias at any server; the
user sees where each alias leads (endpoint, served name, which key variable is sent)
on stderr before the first request.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


def model_names(program: Any, cli_model: Any) -> list[str | None]:
    """The run's model (None: the default) and every literal `model=` option of its slots."""
    names: list[str | None] = []
    if cli_model is None or isinstance(cli_model, str):
        names.append(cli_model)
    for plan in program.plans.values():
        option = plan.settings.get("model")
        if isinstance(option, str) and option not in names:
            names.append(option)
    return names


def show_config_models(program: Any, cli_model: Any, stream: TextIO | None = None) -> None:
    from ..models import config_origin

    out = sys.stderr if stream is None else stream
    seen: set[str] = set()
    for name in model_names(program, cli_model):
        note = config_origin(name)
        if note is not None and note not in seen:
            seen.add(note)
            out.write(f"note: {note}\n")
    out.flush()

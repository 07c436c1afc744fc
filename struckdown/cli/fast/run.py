"""`sd run` without typer: its command line read from a table generated from the typer app.

Building the typer app (typer, its vendored click, a pydantic adapter per parameter) costs
about an eighth of `import pydantic_ai` (SPEC §28: `sd run --model test` ≤ 1.15×). The
flags stay declared once, in the app (`cli/options.RUN_FLAGS` and `run`'s own parameters):
`run_params.py` is generated from the app's `run` command by
`python -m struckdown.cli.generate --write` (as the help pages are), and
tests/cli/test_fast_run.py fails when it is out of date.

`parse_run_args` reads only what it knows for sure: one template, flags spelled as declared,
`--flag VALUE` / `--flag=VALUE`, text and path values. Anything else (`--help`, an unknown
or combined flag, `--`, a missing value, a value that starts with `-`, a number flag whose
range typer checks, an empty value) returns None and the command goes through typer as
before, which prints its usual messages. The same test runs command lines both ways and
compares exit code, stdout and stderr.

This module imports nothing beyond what the interpreter has loaded (`sys`, `pathlib`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def parse_run_args(argv: list[str]) -> dict[str, Any] | None:
    """`sd run`'s parameters (after `run`) as typer hands them to the command, run flags
    gathered under `flags` as `@run_flags` does; None when typer must decide."""
    from .run_params import OPTS, PARAMS

    values: dict[str, Any] = {name: default for name, (_kind, _type, default) in PARAMS.items()}
    given: dict[str, list[Any]] = {}
    template: Path | None = None
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if not word.startswith("-"):
            if template is not None or not word:
                return None  # a second argument, an empty one: typer's message
            template = Path(word)
            continue
        name, eq, value = word.partition("=")
        if name not in OPTS or (eq and not name.startswith("--")):
            return None  # --help, an unknown flag, `-`, `--`, `-cVALUE`, `-c=…`
        param, constant = OPTS[name]
        kind, type_, _ = PARAMS[param]
        if kind == "flag":
            if eq:
                return None
            values[param] = constant
            continue
        if not eq:
            if i >= len(argv) or argv[i].startswith("-"):
                return None  # no value, or one click might read otherwise
            value = argv[i]
            i += 1
        if type_ not in ("str", "path") or (type_ == "path" and not value):
            return None  # numbers and their ranges: typer checks them
        converted = Path(value) if type_ == "path" else value
        if kind == "multiple":
            given.setdefault(param, []).append(converted)
        else:
            values[param] = converted
    if template is None:
        return None
    values.update(given)
    values["template"] = template
    return values

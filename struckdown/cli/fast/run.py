"""`sd run` and `sd check` without typer: their command lines read from a table generated from the typer app.

Building the typer app (typer, its vendored click, a pydantic adapter per parameter) costs
about an eighth of `import pydantic_ai` (SPEC §28: `sd run --model test` ≤ 1.15×). The
flags stay declared once, in the app (`cli/options.RUN_FLAGS` and `run`'s own parameters):
`run_params.py` is generated from the app's `run` and `check` commands by
`python -m struckdown.cli.generate --write` (as the help pages are), and
tests/cli/test_fast_run.py fails when it is out of date.

`parse_args`, the one parser of the start-up paths (`sd run`, and `sd check` through
fast/check.py), reads only what it knows for sure: the template(s), flags spelled as declared,
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
    return parse_args("run", argv)


def parse_args(command: str, argv: list[str]) -> dict[str, Any] | None:
    """A fast command's parameters (after its name) as typer hands them to it, read from the
    table generated from the typer app (`run_params.COMMANDS`); None when typer must decide.
    The one parser of the start-up paths (`sd run`; `sd check` through fast/check.py)."""
    from .run_params import COMMANDS

    params, opts = COMMANDS[command]
    values: dict[str, Any] = {name: default for name, (_kind, _type, default) in params.items()}
    given: dict[str, list[Any]] = {}
    arguments: list[Path] = []
    argument = next(name for name, (kind, _type, _default) in params.items() if kind.startswith("argument"))
    many = params[argument][0] == "arguments"
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if not word.startswith("-"):
            if (arguments and not many) or not word:
                return None  # a second argument, an empty one: typer's message
            arguments.append(Path(word))
            continue
        name, eq, value = word.partition("=")
        if name not in opts or (eq and not name.startswith("--")):
            return None  # --help, an unknown flag, `-`, `--`, `-cVALUE`, `-c=…`
        param, constant = opts[name]
        kind, type_, _ = params[param]
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
    if not arguments:
        return None
    values.update(given)
    values[argument] = arguments if many else arguments[0]
    return values

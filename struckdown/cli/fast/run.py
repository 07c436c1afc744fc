"""`sd run` without typer: its command line read from a table generated from the typer app.

Building the typer app (typer, its vendored click, a pydantic adapter per parameter) costs
about an eighth of `import pydantic_ai` (SPEC §28: `sd run --model test` ≤ 1.15×). The
flags stay declared once, in the app (`cli/options.RUN_FLAGS` and `run`'s own parameters):
`run_params.py` is generated from the app's `run` command by
`python -m struckdown.cli.fast.help --write` (as the help pages are), and
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


def run_fast(values: dict[str, Any]) -> int:
    """What the typer command `run` does (app.py), with the app's callback and
    `reporting_errors` around it; returns the exit code."""
    from ..errors import reported
    from .check import prepare
    from .run_params import FLAG_PARAMS

    prepare()
    flags = {name: values.pop(name) for name in FLAG_PARAMS}

    def body() -> int:
        from ..run_cmd import run_cli

        return run_cli(flags=flags, **values)

    return reported(body)


def generate() -> str:
    """`run_params.py`, derived from the typer app's `run` command."""
    import typer

    from ..app import app
    from ..options import RUN_FLAGS

    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    params: dict[str, tuple[str, str, Any]] = {}
    opts: dict[str, tuple[str, Any]] = {}
    for param in command.params:
        annotation = param.type_descriptor.annotation
        multiple = getattr(annotation, "__origin__", None) is list
        bare = annotation.__args__[0] if multiple else annotation
        type_ = {str: "str", Path: "path", bool: "bool"}.get(bare, "other")
        if param.callback is not None or param.envvar or param.nargs != 1:
            type_ = "other"
        if param.param_type_name == "argument":
            kind = "argument"
        elif getattr(param, "is_flag", False) and type_ == "bool":
            kind = "flag"
        else:
            kind = "multiple" if multiple else "value"
        params[param.name] = (kind, type_, param.default)
        for spelling in getattr(param, "opts", ()) if kind != "argument" else ():
            opts[spelling] = (param.name, True if kind == "flag" else None)
        for spelling in getattr(param, "secondary_opts", ()):
            opts[spelling] = (param.name, False)
    flag_params = tuple(name for name in params if name in RUN_FLAGS)
    option_of = {name: flag.option for name, flag in RUN_FLAGS.items()}
    lines = [
        '"""Generated by `python -m struckdown.cli.fast.help --write` from the typer app: do not edit."""',
        "",
        "# ruff: noqa: E501",
        "",
        "from typing import Any",
        "",
        "#: `sd run`'s parameters: name -> (argument | flag | value | multiple, str | path | bool | other, default).",
        "PARAMS: dict[str, tuple[str, str, Any]] = {",
        *(f"    {name!r}: {spec!r}," for name, spec in params.items()),
        "}",
        "#: each spelling -> (parameter, the value a flag sets; None: the value follows).",
        "OPTS: dict[str, tuple[str, Any]] = {",
        *(f"    {name!r}: {spec!r}," for name, spec in opts.items()),
        "}",
        "#: the parameters `@run_flags` gathers into `flags=`.",
        f"FLAG_PARAMS: tuple[str, ...] = {flag_params!r}",
        "#: every RUN_FLAGS parameter -> the run option it sets (cli/keywords.py reads it without typer).",
        "OPTION_OF: dict[str, str] = {",
        *(f"    {name!r}: {option!r}," for name, option in option_of.items()),
        "}",
        "",
    ]
    return "\n".join(lines)

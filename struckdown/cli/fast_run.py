"""`sd run` and `sd check` without typer: their command lines read from a table generated from the typer app.

Building the typer app (typer, its vendored click, a pydantic adapter per parameter) costs
about an eighth of `import pydantic_ai` (SPEC §28: `sd run --model test` ≤ 1.15×). The
flags stay declared once, in the app (`cli/options.RUN_FLAGS` and `run`'s own parameters):
`run_params.py` is generated from the app's `run` and `check` commands by
`python -m struckdown.cli.fast_help --write` (as the help pages are), and
tests/cli/test_fast_run.py fails when it is out of date.

`parse_args` (the one parser of the fast paths: `sd run`, `sd check` in fast_check.py) reads
only what it knows for sure: the template(s), flags spelled as declared,
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
    The one parser of the fast paths (`sd run`, `sd check`)."""
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


def run_fast(values: dict[str, Any]) -> int:
    """What the typer command `run` does (app.py), with the app's callback and
    `reporting_errors` around it; returns the exit code."""
    from .errors import reported
    from .fast_check import prepare
    from .run_params import FLAG_PARAMS

    prepare()
    flags = {name: values.pop(name) for name in FLAG_PARAMS}

    def body() -> int:
        from .run_cmd import run_cli

        return run_cli(flags=flags, **values)

    return reported(body)


#: The commands with a fast path: their tables are generated from the typer app.
FAST_COMMANDS = ("run", "check")


def generate() -> str:
    """`run_params.py`, derived from the typer app's commands (its flags: `cli/options.RUN_FLAGS`
    and each command's own parameters)."""
    import typer

    from .app import app
    from .options import RUN_FLAGS

    tables: dict[str, tuple[dict[str, tuple[str, str, Any]], dict[str, tuple[str, Any]]]] = {}
    for name in FAST_COMMANDS:
        command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
        tables[name] = _table(command)
    flag_params = tuple(name for name in tables["run"][0] if name in RUN_FLAGS)
    option_of = {name: flag.option for name, flag in RUN_FLAGS.items()}
    lines = [
        '"""Generated by `python -m struckdown.cli.fast_help --write` from the typer app: do not edit."""',
        "",
        "# ruff: noqa: E501",
        "",
        "from typing import Any",
        "",
        "#: each fast command's parameters: name -> (argument | arguments | flag | value | multiple,",
        "#: str | path | bool | other, default), and each spelling -> (parameter, the value a flag sets;",
        "#: None: the value follows).",
        "COMMANDS: dict[str, tuple[dict[str, tuple[str, str, Any]], dict[str, tuple[str, Any]]]] = {",
    ]
    for name, (params, opts) in tables.items():
        lines += [f"    {name!r}: (", "        {"]
        lines += [f"            {param!r}: {spec!r}," for param, spec in params.items()]
        lines += ["        },", "        {"]
        lines += [f"            {spelling!r}: {spec!r}," for spelling, spec in opts.items()]
        lines += ["        },", "    ),"]
    lines += [
        "}",
        "#: the parameters `@run_flags` gathers into `flags=` (sd run).",
        f"FLAG_PARAMS: tuple[str, ...] = {flag_params!r}",
        "#: every RUN_FLAGS parameter -> the run option it sets (cli/keywords.py reads it without typer).",
        "OPTION_OF: dict[str, str] = {",
        *(f"    {name!r}: {option!r}," for name, option in option_of.items()),
        "}",
        "",
    ]
    return "\n".join(lines)


def _table(command: Any) -> tuple[dict[str, tuple[str, str, Any]], dict[str, tuple[str, Any]]]:
    params: dict[str, tuple[str, str, Any]] = {}
    opts: dict[str, tuple[str, Any]] = {}
    for param in command.params:
        annotation = param.type_descriptor.annotation
        multiple = getattr(annotation, "__origin__", None) is list
        bare = annotation.__args__[0] if multiple else annotation
        type_ = {str: "str", Path: "path", bool: "bool"}.get(bare, "other")
        if param.param_type_name == "argument":
            kind = "arguments" if param.nargs == -1 else "argument"
        else:
            if param.callback is not None or param.envvar or param.nargs != 1:
                type_ = "other"
            if getattr(param, "is_flag", False) and type_ == "bool":
                kind = "flag"
            else:
                kind = "multiple" if multiple else "value"
        params[param.name] = (kind, type_, param.default)
        for spelling in getattr(param, "opts", ()) if not kind.startswith("argument") else ():
            opts[spelling] = (param.name, True if kind == "flag" else None)
        for spelling in getattr(param, "secondary_opts", ()):
            opts[spelling] = (param.name, False)
    return params, opts

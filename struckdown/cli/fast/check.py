"""`sd check` without typer: its command line read as the typer app would read it.

Building the typer app (typer, its vendored click, the parameter adapters, every command's
signature) costs more than checking a small template (SPEC §28: `sd check` ≤ 0.2× of
`import pydantic_ai`). Its flags are read by the start-up paths' one parser
(`fast/run.py:parse_args`) from the table generated from the typer app's `check` command
(`run_params.COMMANDS`), so they are declared once, in the app; anything that parser does not
know for sure (`--help`, an unknown or combined flag, `--`, a missing value, no template)
returns None and the command goes through typer as before, which prints its usual messages.
tests/cli/test_fast_check.py runs the same command lines both ways and compares exit code,
stdout and stderr.

This module imports only the standard library's `dataclasses` and `pathlib`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class CheckArgs:
    templates: list[Path] = field(default_factory=list)
    context: Path | None = None
    pairs: list[str] = field(default_factory=list)
    tools: Path | None = None
    include_paths: list[Path] = field(default_factory=list)
    mcp: list[str] = field(default_factory=list)
    mcp_config: Path | None = None


def parse_check_args(argv: list[str]) -> CheckArgs | None:
    """`sd check`'s arguments (after `check`) as typer would read them; None when they are
    anything but plain templates and `--flag VALUE` / `--flag=VALUE` pairs."""
    from .run import parse_args

    values = parse_args("check", argv)
    if values is None:
        return None
    return CheckArgs(
        templates=list(values["templates"]), context=values["context"], pairs=list(values["set_"] or ()),
        tools=values["tools"], include_paths=list(values["include_path"] or ()), mcp=list(values["mcp"] or ()),
        mcp_config=values["mcp_config"],
    )

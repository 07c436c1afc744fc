"""`sd check` without typer: its command line read here, the check run as typer would run it.

Building the typer app (typer, its vendored click, the parameter adapters, every command's
signature) costs more than checking a small template (SPEC §28: `sd check` ≤ 0.2× of
`import pydantic_ai`). `sd check`'s flags are few and plain, so `parse_check_args` reads
them; anything it does not know for sure (`--help`, an unknown or combined flag, `--`, a
missing value, no template) returns None and the command goes through typer as before,
which prints its usual messages. tests/cli/test_fast_check.py runs the same command lines
both ways and compares exit code, stdout and stderr.

This module imports only the standard library's `sys` and `pathlib`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: flag → (field, repeatable); every flag of `sd check` takes a value.
FLAGS: dict[str, tuple[str, bool]] = {
    "--context": ("context", False),
    "-c": ("pairs", True),
    "--set": ("pairs", True),
    "--tools": ("tools", False),
    "-t": ("tools", False),
    "--include-path": ("include_paths", True),
    "-I": ("include_paths", True),
    "--mcp": ("mcp", True),
    "--mcp-config": ("mcp_config", False),
}


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
    args = CheckArgs()
    i = 0
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-") or word == "-":
            if word == "-":
                return None
            args.templates.append(Path(word))
            i += 1
            continue
        name, eq, value = word.partition("=")
        if name not in FLAGS or (eq and not name.startswith("--")):
            return None  # --help, an unknown flag, `--`, `-cVALUE`, `-c=…`: typer decides
        if not eq:
            if i + 1 >= len(argv):
                return None  # a flag without its value: typer's message
            value = argv[i + 1]
            i += 1
        i += 1
        target, repeatable = FLAGS[name]
        if repeatable:
            getattr(args, target).append(value if target in ("pairs", "mcp") else Path(value))
        else:
            setattr(args, target, Path(value))
    return args if args.templates else None

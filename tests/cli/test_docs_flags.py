"""Issue 48 item 9: every flag of every `sd` command is in docs/cli.md, in that command's
section. A section that says its command takes "the run flags of `sd run`" may leave those
to the `sd run` section (the flags both commands have); every other flag is its own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer.main

from struckdown.cli.app import app

DOC = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
INHERITS = "run flags of `sd run`"


def sections() -> dict[str, str]:
    """Each command a `## \\`sd NAME …\\`` heading names → its section's text (a heading may
    name two commands; several headings of one command add up)."""
    found: dict[str, str] = {}
    for match in re.finditer(r"^## (`sd [^\n]*)\n.*?(?=^## |\Z)", DOC, re.S | re.M):
        for name in re.findall(r"`sd ([a-z]+)", match.group(1)):
            found[name] = found.get(name, "") + match.group(0)
    return found


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))
    else:
        yield path, command


def long_flags(command: Any) -> list[str]:
    return [
        flag for param in command.params if type(param).__name__.endswith("Option")
        for flag in (*param.opts, *param.secondary_opts) if flag.startswith("--") and flag != "--help"
    ]  # fmt: skip


def named(flag: str, text: str) -> bool:
    return re.search(re.escape(flag) + r"(?![\w-])", text) is not None


def test_every_flag_of_every_command_is_in_its_section_of_docs_cli_md() -> None:
    documented = sections()
    missing: list[str] = []
    run_flags = set(long_flags(typer.main.get_command(app).commands["run"]))  # type: ignore[attr-defined]
    for path, command in commands(typer.main.get_command(app)):
        name = path[0]
        if name not in documented:
            missing.append(f"sd {name}: no section")
            continue
        text = documented[name]
        for flag in long_flags(command):
            inherited = INHERITS in text and flag in run_flags and named(flag, documented["run"])
            if not (named(flag, text) or inherited):
                missing.append(f"sd {' '.join(path)} {flag}")
    assert missing == []

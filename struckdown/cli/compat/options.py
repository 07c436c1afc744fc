"""Flags 0.x users type that `sd run`, `sd chat` and `sd batch` share (declared once here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperCommand

TypeFileOpt = Annotated[
    Optional[list[Path]],
    typer.Option(
        "--type", metavar="PATH",
        help="A YAML type file, or a folder of them (0.x's one-type files too), loaded before the template "
        "(repeatable). A types/ folder beside the template or in the working directory is loaded as well.",
        show_default=False,
    ),
]


def load_type_files(paths: list[Path] | None) -> None:
    """Each `--type` file or folder, registered on the default Environment (a bad one is exit 2)."""
    from ..errors import CliError
    from ..loading import load_type_path

    for path in paths or ():
        if not path.exists():
            raise CliError(f"--type {path}: no such file or folder")
        load_type_path(path)


# -- sd batch's 0.18 short flags ----------------------------------------------------------------

_YAML = (".yaml", ".yml")


def batch_0x_args(args: list[str]) -> list[str]:
    """`sd batch` arguments with 0.18's short flags read as 0.18 meant them, where today's
    meaning could not apply: `-h N` (a number after it) is `--head N` (`-h` alone is
    help); `-t FILE.yaml` or `-t FOLDER` is `--type` (today's `-t` is `--tools FILE.py`).
    (`-c` is `--compare`'s own short name, as in 0.18.)"""
    out: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        value = args[index + 1] if index + 1 < len(args) else None
        if arg == "--":
            out += args[index:]
            break
        if value is not None and arg == "-h" and value.isdigit():
            out += ["--head", value]
        elif value is not None and arg == "-t" and (value.lower().endswith(_YAML) or Path(value).is_dir()):
            out += ["--type", value]
        else:
            out.append(arg)
            index += 1
            continue
        index += 2
    return out


class Batch0xCommand(TyperCommand):
    """`sd batch`'s click command: 0.18's short flags rewritten before parsing (`batch_0x_args`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, batch_0x_args(args))

"""Flags 0.x users type that `sd run`, `sd chat` and `sd batch` share (declared once here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

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

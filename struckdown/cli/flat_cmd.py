"""`sd flat`: the template with its `<include src=…/>` tags replaced by the files' text."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import EXIT_OK, reporting_errors
from .options import IncludeOpt, TemplateArg


def flat_command(template: Path, output: Path | None, include_paths: Sequence[Path]) -> int:
    from ..syntax.flatten import flatten
    from .io import read_template, write_output

    text = flatten(read_template(template), template_path=template, include_paths=include_paths)
    write_output(output, text)
    return EXIT_OK


def command(
    template: TemplateArg,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Write the result here (default: stdout).", show_default=False)
    ] = None,
    include_path: IncludeOpt = None,
) -> None:
    """Print the template with every <include> inlined; nothing is rendered."""
    with reporting_errors():
        code = flat_command(template, output, include_path or ())
    raise typer.Exit(code)

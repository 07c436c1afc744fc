"""`sd preview`: a template as standalone HTML, highlighted by the `struckdown` Pygments lexer."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import EXIT_OK, reporting_errors
from .io import read_template, write_output
from .options import TemplateArg


def render_html(source: str, title: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    from ..editor.pygments_lexer import StruckdownLexer

    formatter = HtmlFormatter(full=True, title=html.escape(title), linenos="table", wrapcode=True)
    return str(highlight(source, StruckdownLexer(), formatter))


def preview_command(template: Path, output: Path | None) -> int:
    page = render_html(read_template(template), template.name)
    write_output(output, page)
    return EXIT_OK


def command(
    template: TemplateArg,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Write the HTML page here (default: stdout).", show_default=False),
    ] = None,
) -> None:
    """Write a template as a highlighted HTML page (the struckdown Pygments lexer)."""
    with reporting_errors():
        code = preview_command(template, output)
    raise typer.Exit(code)

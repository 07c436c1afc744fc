"""`sd lsp`: start the language server on stdio (needs the `lsp` extra: pygls).

pygls is imported only when the command runs, so `sd --help` stays fast.
"""

from __future__ import annotations

import typer

from .errors import CliError, reporting_errors


def lsp_command() -> int:
    try:
        from ..editor.server import serve
    except ImportError as exc:
        raise CliError(f"sd lsp needs pygls: pip install 'struckdown[lsp]' ({exc})", code=1) from None
    return serve()


def command() -> None:
    """Run the struckdown language server on stdio, for editors (needs struckdown[lsp]).

    Diagnostics as `sd check` reports them, completion of types, options, context variables
    and tools, hover with a slot's plan, and an outline of segments and slots.
    """
    with reporting_errors():
        code = lsp_command()
    raise typer.Exit(code)

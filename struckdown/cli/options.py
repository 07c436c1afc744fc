"""Command-line options that more than one command takes (so each defines them once)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

McpOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--mcp",
        metavar="URL|COMMAND",
        help="An MCP server whose tools agent slots may use (repeatable): a URL (streamable HTTP), or a .py "
        "file or a command run over stdio. NAME=URL|COMMAND names it; its tools are NAME_tool.",
        show_default=False,
    ),
]
McpConfigOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--mcp-config", metavar="FILE", help="MCP servers from an mcp.json (the Claude Desktop format).",
        show_default=False,
    ),
]
TemplateArg = Annotated[Path, typer.Argument(help="The .sd template.", show_default=False)]
IncludeOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--include-path", "-I", help="Extra directory for <include src=…/> (repeatable).", show_default=False),
]

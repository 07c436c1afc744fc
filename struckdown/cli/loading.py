"""What a command loads besides data: the parsed template, the tools file and the model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..tools.files import describe_tool as describe_tool  # the CLI's names for them
from ..tools.files import load_tools as load_tools
from .errors import CliError
from .io import read_template


def load_program(path: Path, include_paths: Sequence[Path] = ()) -> Any:
    """Read and compile a template; a TemplateSyntaxError propagates (exit code 2)."""
    from ..environment import default_environment

    text = read_template(path)
    return default_environment().parse(text, template_path=path, include_paths=include_paths)


def resolve_cli_model(name: str | None) -> Any:
    """What the CLI passes as `model=`: the `--model` string (a model string, an alias,
    or `package.module:factory`), or None for the environment's default."""
    return name


def load_mcp(servers: Sequence[str], config: Path | None) -> list[str] | None:
    """What the CLI passes as `mcp=`: the `--mcp` servers and the `--mcp-config` file,
    checked now (a missing script, program or config is an input error, exit 2)."""
    if not servers and config is None:
        return None
    from ..tools.mcp import resolve_servers

    specs = [*servers, *([str(config)] if config is not None else [])]
    try:
        resolve_servers(specs)
    except (ValueError, TypeError) as exc:
        raise CliError(f"--mcp: {exc}" if config is None or servers else f"--mcp-config: {exc}") from None
    return specs

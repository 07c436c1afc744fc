"""What a command loads besides data: the parsed template, the tools file and the model."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def load_tools(path: Path | None) -> list[Any]:
    """Every public function defined in a Python file (imported names are skipped), plus
    `pydantic_ai.Tool` objects built there. `@struckdown.readonly` marks stay on them."""
    from ..tools.files import module_from_source, public_tools

    if path is None:
        return []
    if not path.is_file():
        raise CliError(f"tools file {path} does not exist")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"tools file {path} cannot be read: {exc}") from None
    try:
        module = module_from_source(str(path.resolve()), source, "struckdown_cli_tools")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit and other BaseExceptions too: never a traceback
        raise CliError(f"tools file {path} failed to load: {type(exc).__name__}: {exc}") from None
    tools = public_tools(module)
    if not tools:
        raise CliError(f"tools file {path} defines no public functions")
    return tools


def describe_tool(tool: Any) -> tuple[str, str, bool]:
    """(name, signature + first docstring line, readonly) for `sd explain`."""
    from ..run.tools import is_readonly, tool_name

    function = getattr(tool, "function", tool)
    try:
        signature = str(inspect.signature(function))
    except (TypeError, ValueError):
        signature = "(…)"
    doc = (inspect.getdoc(function) or "").strip().splitlines()
    summary = f"{signature}  {doc[0]}" if doc else signature
    return tool_name(tool), summary, is_readonly(tool)


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

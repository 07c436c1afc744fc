"""What a command loads besides data: the parsed template, the tools file and the model."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import CliError
from .io import read_template

TEST_MODEL_ENV = "STRUCKDOWN_TEST_MODEL"


def load_program(path: Path, include_paths: Sequence[Path] = ()) -> Any:
    """Read and compile a template; a TemplateSyntaxError propagates (exit code 2)."""
    from ..compile import compile_template

    text = read_template(path)
    return compile_template(text, template_path=path, include_paths=include_paths)


def resolve_cli_model(name: str | None) -> Any:
    """What the CLI passes as `model=`: the `--model` string, or None for the environment.

    `STRUCKDOWN_TEST_MODEL=package.module:factory` (for tests only) replaces the
    environment default with the Model the factory returns.
    """
    if name is None and os.environ.get(TEST_MODEL_ENV):
        return _test_model(os.environ[TEST_MODEL_ENV])
    return name


def _test_model(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep:
        raise CliError(f"{TEST_MODEL_ENV} must look like package.module:factory, got {spec!r}", code=1)
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"{TEST_MODEL_ENV}={spec}: {exc}", code=1) from None
    return factory()


def load_tools(path: Path | None) -> list[Any]:
    """Every public function defined in a Python file (imported names are skipped), plus
    `pydantic_ai.Tool` objects built there. `@struckdown.readonly` marks stay on them."""
    if path is None:
        return []
    if not path.is_file():
        raise CliError(f"tools file {path} does not exist")
    module = _import_file(path)
    tools: list[Any] = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            tools.append(value)
        elif _is_tool_object(value, module.__name__):
            tools.append(value)
    if not tools:
        raise CliError(f"tools file {path} defines no public functions")
    return tools


def _is_tool_object(value: Any, module_name: str) -> bool:
    if "pydantic_ai" not in sys.modules:
        return False
    from pydantic_ai import Tool

    function = getattr(value, "function", None)
    return isinstance(value, Tool) and getattr(function, "__module__", None) == module_name


def _import_file(path: Path) -> Any:
    resolved = path.resolve()
    module_name = f"struckdown_cli_tools_{abs(hash(str(resolved))):x}"
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise CliError(f"tools file {path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    directory = str(resolved.parent)
    sys.path.insert(0, directory)  # so the tools file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        del sys.modules[module_name]
        raise
    except BaseException as exc:  # SystemExit and other BaseExceptions too: never a traceback
        del sys.modules[module_name]
        raise CliError(f"tools file {path} failed to load: {type(exc).__name__}: {exc}") from None
    finally:
        try:
            sys.path.remove(directory)
        except ValueError:
            pass
    return module


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

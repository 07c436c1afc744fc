"""Loading the user's Python by name or by file: tools files, `module:factory` names.

One loader for the front ends (`sd --tools FILE.py`, `--model module:factory`, the
playground's tools file) and the Dask workers (which receive a tools file as text and
names, never objects).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import types
from pathlib import Path
from typing import Any

from ..errors import InputError


def import_name(spec: str) -> Any:
    """`package.module:attr.attr` → that object (ImportError/AttributeError if missing)."""
    module_name, _, attr = spec.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        value = getattr(value, part)
    return value


def module_from_source(path: str, source: str, prefix: str = "struckdown_tools") -> types.ModuleType:
    """A tools file's text executed as a module of its own. Its folder is on sys.path
    while it loads, so it can import its neighbours."""
    name = f"{prefix}_{abs(hash((path, source))):x}"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    folder = str(Path(path).resolve().parent)
    sys.path.insert(0, folder)
    try:
        exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - the user's own tools file (without our __future__ flags)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return module


def public_tools(module: types.ModuleType) -> list[Any]:
    """Public functions defined in the module (not imported ones), and pydantic-ai
    `Tool`s built there; `@struckdown.readonly` marks stay on them."""
    found: list[Any] = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            found.append(value)
        elif _is_tool_object(value, module.__name__):
            found.append(value)
    return found


def _is_tool_object(value: Any, module_name: str) -> bool:
    if "pydantic_ai" not in sys.modules:  # no Tool can have been built without it
        return False
    from pydantic_ai import Tool

    return isinstance(value, Tool) and getattr(value.function, "__module__", None) == module_name


def factory_reference(name: str) -> str | None:
    """`name` as a `package.module:factory` reference, or None when it is a model string.

    `provider:model` and `module:factory` look alike; a name is a factory when the part
    before the colon is a dotted Python name that is not a pydantic-ai provider and
    that Python can find, and the part after it is an identifier.
    """
    module_name, sep, attr = name.partition(":")
    if not sep or not attr.isidentifier() or not all(p.isidentifier() for p in module_name.split(".")):
        return None
    from pydantic_ai.providers import infer_provider_class

    try:
        infer_provider_class(module_name)
        return None  # a provider pydantic-ai knows
    except ImportError:
        return None  # a known provider whose SDK is not installed
    except ValueError:
        pass  # "Unknown provider"
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        found = None
    return name if found is not None else None


def load_tools(path: Path | None) -> list[Any]:
    """Every public function defined in a Python file (imported names are skipped), plus
    `pydantic_ai.Tool` objects built there. `@struckdown.readonly` marks stay on them."""
    if path is None:
        return []
    if not path.is_file():
        raise InputError(f"tools file {path} does not exist")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"tools file {path} cannot be read: {exc}") from None
    try:
        module = module_from_source(str(path.resolve()), source, "struckdown_cli_tools")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit and other BaseExceptions too: never a traceback
        raise InputError(f"tools file {path} failed to load: {type(exc).__name__}: {exc}") from None
    tools = public_tools(module)
    if not tools:
        raise InputError(f"tools file {path} defines no public functions")
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

"""Loading the user's Python by name or by file: tools files, `module:factory` names.

One loader for the front ends (`sd --tools FILE.py`, `--model module:factory`, the
playground's tools file) and the Dask workers (which receive a tools file as text and
names, never objects).
"""

from __future__ import annotations

import inspect
import sys
import types
from pathlib import Path
from typing import Any

from ..errors import InputError


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


class _Written(str):
    """An annotation as its source wrote it: shown without quotes."""

    def __repr__(self) -> str:
        return str(self)


def tool_signature(function: Any) -> str:
    """`(word: str, n: int = 3) -> list[str]`: the annotations as types, also in a file
    with `from __future__ import annotations` (where they are strings); one that cannot be
    resolved (a name imported only under TYPE_CHECKING) is shown as written, unquoted."""
    try:
        signature = inspect.signature(function, eval_str=True)
    except (TypeError, ValueError):
        return "(…)"
    except Exception:  # noqa: BLE001 - NameError and the like: an annotation that does not evaluate
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            return "(…)"

    def shown(annotation: Any) -> Any:
        if not isinstance(annotation, str):
            return annotation
        quoted = len(annotation) > 1 and annotation[0] == annotation[-1] and annotation[0] in "'\""
        return _Written(annotation[1:-1] if quoted else annotation)

    parameters = [p.replace(annotation=shown(p.annotation)) for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=shown(signature.return_annotation)))


def describe_tool(tool: Any) -> tuple[str, str, bool]:
    """(name, signature + first docstring line, readonly) for `sd explain`."""
    from . import is_readonly, tool_name

    function = getattr(tool, "function", tool)
    signature = tool_signature(function)
    doc = (inspect.getdoc(function) or "").strip().splitlines()
    summary = f"{signature}  {doc[0]}" if doc else signature
    return tool_name(tool), summary, is_readonly(tool)

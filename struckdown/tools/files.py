"""Loading the user's Python by name or by file: tools files, `module:factory` names.

One loader for the front ends (`sd --tools FILE.py`, `--model module:factory`, the
playground's tools file) and the Dask workers (which receive a tools file as text and
names, never objects).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
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


#: module name → the mtime of its file when a `module:factory` model last came from it
_FACTORY_STAMPS: dict[str, int | None] = {}


def file_stamp(spec: str) -> int | None:
    """The mtime (ns) of the file that holds `package.module:attr`'s module, None when it
    has none (a namespace package, a frozen or built-in module)."""
    module_name = spec.partition(":")[0]
    module = sys.modules.get(module_name)
    try:
        found = module.__spec__ if module is not None else importlib.util.find_spec(module_name)
        origin = found.origin if found is not None else None
        return os.stat(origin).st_mtime_ns if origin else None
    except (ImportError, ValueError, OSError):
        return None


def import_fresh(spec: str, stamp: int | None) -> Any:
    """`import_name(spec)`, with the module imported again when its file changed since a
    factory last came from it (`stamp`: `file_stamp(spec)` now): a long-lived process (the
    playground's workers, a notebook) runs the edited factory, not the one it first saw.
    Only that module is reloaded, not the modules it imports."""
    module_name = spec.partition(":")[0]
    module = sys.modules.get(module_name)
    if module is not None and module_name in _FACTORY_STAMPS and _FACTORY_STAMPS[module_name] != stamp:
        origin = getattr(module.__spec__, "origin", None)
        if origin and origin.endswith(".py"):  # an edit within the same second keeps the size and mtime a .pyc checks
            with contextlib.suppress(OSError, NotImplementedError, ValueError):
                os.unlink(importlib.util.cache_from_source(origin))
        importlib.reload(module)
    _FACTORY_STAMPS[module_name] = stamp
    return import_name(spec)


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
    from ..run.tools import is_readonly, tool_name

    function = getattr(tool, "function", tool)
    signature = tool_signature(function)
    doc = (inspect.getdoc(function) or "").strip().splitlines()
    summary = f"{signature}  {doc[0]}" if doc else signature
    return tool_name(tool), summary, is_readonly(tool)

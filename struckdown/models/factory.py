"""`package.module:factory` names: a model built by a function of the user's (`model=` a
factory reference, told apart from a `provider:model` string), imported again when its file
changed; and importing a dotted name (the Dask workers' tools and factories)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from typing import Any


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

"""What a scripted model's answers depend on: the code of its functions.

A pydantic-ai `FunctionModel` answers with whatever its Python function computes, so
the response cache keys it on that function's code, not on its name: an edited
function is a new model, and the cache serves it nothing from before the edit.

The digest covers, for each function (the model's `function` and `stream_function`):
its bytecode, constants (nested functions' code included), the names it uses, its
default arguments, and the values it reads through its closure or from its module's
globals when they are plain immutable data (str, bytes, numbers, bool, None, and tuples
or frozensets of those); a function it reads there counts by its own code, recursively,
and so do the functions held by the object of a bound method or a callable object.
Everything else (a list, a dict, an object) counts by its type only: a recording list
that grows with every call must not change the key. docs/caching.md says what that
leaves out.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any

_PLAIN = (str, bytes, int, float, complex, bool, type(None))
_DEPTH = 6  # functions reached through functions; deeper ones count by name


def function_digest(*functions: Any) -> str:
    """A short hex digest of the code of `functions` (None entries are skipped)."""
    digest = hashlib.sha256()
    seen: set[int] = set()
    for function in functions:
        if function is not None:
            _feed(digest, function, seen, 0)
    return digest.hexdigest()[:16]


def _feed(digest: Any, value: Any, seen: set[int], depth: int) -> None:
    owner = getattr(value, "__self__", None) if isinstance(value, types.MethodType) else None
    if owner is None and _function_of(value) is not None and not isinstance(value, types.FunctionType):
        owner = value if not hasattr(value, "func") else None  # an object with __call__ (not a partial)
    if owner is not None and depth <= _DEPTH:
        _feed_methods_of(digest, owner, seen, depth)
    function = _function_of(value)
    if function is None:
        digest.update(_data(value).encode("utf-8", "surrogatepass"))
        return
    digest.update(f"<fn {getattr(function, '__qualname__', '?')}>".encode("utf-8", "surrogatepass"))
    if id(function) in seen or depth > _DEPTH:
        return
    seen.add(id(function))
    code: types.CodeType = function.__code__
    _feed_code(digest, code)
    for default in (*(function.__defaults__ or ()), *(function.__kwdefaults__ or {}).values()):
        _feed(digest, default, seen, depth + 1)
    for name, cell in zip(code.co_freevars, function.__closure__ or (), strict=False):
        digest.update(f"<cell {name}>".encode())
        try:
            contents = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
        _feed(digest, contents, seen, depth + 1)
    module_globals = getattr(function, "__globals__", {})
    for name in _global_names(code):
        if name in module_globals:
            digest.update(f"<global {name}>".encode())
            _feed(digest, module_globals[name], seen, depth + 1)


def _feed_methods_of(digest: Any, owner: Any, seen: set[int], depth: int) -> None:
    """The functions an object holds (a script's `answer=`) count by their code; its data
    (counters, recorded calls) does not."""
    try:
        attributes = sorted(vars(owner).items())
    except TypeError:  # no __dict__ (slots), or names that do not sort
        return
    for name, attribute in attributes:
        if isinstance(attribute, types.FunctionType | types.MethodType):
            digest.update(f"<attr {name}>".encode())
            _feed(digest, attribute, seen, depth + 1)


def _feed_code(digest: Any, code: types.CodeType) -> None:
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode("utf-8", "surrogatepass"))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(digest, const)
        else:
            digest.update(_data(const).encode("utf-8", "surrogatepass"))


def _global_names(code: types.CodeType) -> list[str]:
    """The names `code` (and the code nested in it) may read from its module."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_global_names(const))
    return sorted(set(names))


def _function_of(value: Any) -> Any:
    """The Python function behind `value` (a function, a bound method, a partial's
    function, an object's `__call__`), or None for data."""
    if isinstance(value, types.FunctionType):
        return value
    if isinstance(value, types.MethodType):
        return _function_of(value.__func__)
    func = getattr(value, "func", None)  # functools.partial
    if func is not None and callable(value) and not isinstance(value, type):
        return _function_of(func)
    if callable(value) and not isinstance(value, type | types.BuiltinFunctionType | types.ModuleType):
        call = getattr(type(value), "__call__", None)
        if isinstance(call, types.FunctionType):
            return call
    return None


def _data(value: Any) -> str:
    """A plain immutable value as its repr; anything else as its type's name."""
    if isinstance(value, _PLAIN):
        return repr(value)
    if isinstance(value, tuple | frozenset) and len(value) <= 1000:
        items = sorted(map(_data, value)) if isinstance(value, frozenset) else [_data(v) for v in value]
        return f"{type(value).__name__}({','.join(items)})"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"

"""Parsed templates kept on disk, so `sd run` of a template it has parsed before imports
no lark (SPEC §28: lark's import and its parser's first use were a twentieth of the command).

An Environment keeps parsed templates there only when it is given a store, as Jinja's
`Environment(bytecode_cache=…)` is given its cache: `Environment(template_cache=
TemplateStore(directory))`. The commands give theirs one in the cache folder
(cli/loading.py `command_environment`); the library parses as before. A parsed `Template` is pure data
(frozen dataclasses of syntax/nodes.py holding text, numbers and positions), stored as
JSON: `{"@": class name, field: value, …}`, a tuple as `{"()": […]}`. Reading builds
only those classes, so a file someone else wrote can at worst change the template (as
editing the template would), never run code.

A file is found by a hash of what the parse depends on: the text, the template path as
given (positions name it), the include search paths, the working directory when the path
is relative, struckdown's version and the size and mtime of the grammar and of every
module of this package (an edited parser never meets a stale entry). A template that
`<include>`s files is not stored: which file an include finds depends on the folders and
files there are, which no key tells (the in-memory cache of Environment.parse, which
lives one process, checks only the included files' mtimes). A file that cannot be read, is not valid
JSON or names an unknown class is a miss, never an error; writes go to a temporary file
renamed into place (concurrent writers leave one whole file); failing to write is
ignored. At most `MAX_ENTRIES` files are kept: the least recently used go first. Failed parses are
not stored (the error comes from parsing, every time).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import nodes
from .nodes import Template

MAX_ENTRIES = 500
_SUFFIX = ".json"

#: every class a stored template may hold, by name
_CLASSES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in vars(nodes).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == nodes.__name__
}


class _Unstorable(Exception):
    """A value outside what the JSON form holds exactly."""


@dataclass(frozen=True)
class TemplateStore:
    """Parsed templates kept as files in `directory` (an Environment's `template_cache=`)."""

    directory: Path

    def parse(self, source: str, *, template_path: str | None, include_paths: Sequence[str]) -> Template:
        """`parse_template`, read from the store when it was parsed before (and kept after)."""
        return parse(source, template_path=template_path, include_paths=include_paths, directory=self.directory)


def parse(
    source: str, *, template_path: str | None, include_paths: Sequence[str], directory: Path | None = None
) -> Template:
    """`parse_template`, through the files in `directory` when one is given."""
    from .parser import parse_template

    if directory is None:
        return parse_template(source, template_path=template_path, include_paths=include_paths)
    try:
        file = Path(directory) / (_key(source, template_path, include_paths) + _SUFFIX)
    except OSError:  # a module or the grammar cannot be stat'ed: no store
        return parse_template(source, template_path=template_path, include_paths=include_paths)
    template = _load(file)
    if template is not None:
        return template
    template = parse_template(source, template_path=template_path, include_paths=include_paths)
    _store(file, template)
    return template


def _key(source: str, path: str | None, roots: Sequence[str]) -> str:
    import hashlib
    import json

    from .._version import __version__

    base = "" if path is not None and os.path.isabs(path) else os.getcwd()
    what = [__version__, _code_stamp(), source, path, [str(r) for r in roots], base]
    return hashlib.sha256(json.dumps(what, ensure_ascii=True).encode()).hexdigest()


def _code_stamp() -> list[Any]:
    """Size and mtime of the grammar and of this package's modules."""
    from .parser import grammar_path

    here = Path(__file__).resolve().parent
    files = sorted((p for p in os.scandir(here) if p.name.endswith(".py")), key=lambda p: p.name)
    stamp: list[Any] = [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]
    grammar = grammar_path().stat()
    stamp.append(["grammar", grammar.st_size, grammar.st_mtime_ns])
    return stamp


# -- the JSON form -----------------------------------------------------------------------
def encode(value: Any) -> Any:
    """A value of a parsed template as JSON data; `_Unstorable` for anything else."""
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return value
    if kind is tuple:
        return {"()": [encode(v) for v in value]}
    if _CLASSES.get(kind.__name__) is kind:
        out = {"@": kind.__name__}
        out.update({f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)})
        return out
    raise _Unstorable(kind.__name__)


def decode(data: Any) -> Any:
    """The value `encode` gave `data` for; ValueError for data it never gives."""
    if data is None or type(data) in (str, int, float, bool):
        return data
    if type(data) is dict:
        if "()" in data and len(data) == 1 and type(data["()"]) is list:
            return tuple(decode(v) for v in data["()"])
        name = data.get("@")
        cls = _CLASSES.get(name) if type(name) is str else None
        if cls is not None:
            try:
                return cls(**{k: decode(v) for k, v in data.items() if k != "@"})
            except TypeError as exc:  # a field it does not have, or one missing
                raise ValueError(str(exc)) from None
    raise ValueError(f"not a stored template value: {type(data).__name__}")


# -- the files ---------------------------------------------------------------------------
def _load(file: Path) -> Template | None:
    import json

    try:
        template = decode(json.loads(file.read_bytes()))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(template, Template) or template.included_files:
        return None
    try:
        os.utime(file)  # used now: the last to be pruned
    except OSError:
        pass
    return template


def _store(file: Path, template: Template) -> None:
    import json

    if template.included_files:  # see the module's text
        return
    try:
        data = encode(template)
    except (_Unstorable, RecursionError):
        return
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    if encode(decode(json.loads(text))) != data:  # only what reads back exactly is kept
        return
    import threading

    temporary = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text, encoding="ascii")
        os.replace(temporary, file)
        _prune(file.parent)
    except OSError:
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass


def _prune(directory: Path) -> None:
    """Keep the newest `MAX_ENTRIES` entries."""
    entries = [e for e in os.scandir(directory) if e.name.endswith(_SUFFIX) and not e.name.startswith(".")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for entry in entries[: len(entries) - MAX_ENTRIES]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass

"""Files the commands read and write: templates, context files, `-c` pairs, JSON output.

Every problem with them is a `CliError` with exit code 2 and a message naming the file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import CliError


def read_text(path: Path, what: str = "file") -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise CliError(f"{what} {path} is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {what} {path}: {exc}") from None


def read_template(path: Path) -> str:
    return read_text(path, "template")


def load_context(context_file: Path | None, pairs: Iterable[str] = ()) -> dict[str, Any]:
    """The context file's mapping, with `-c key=value` pairs laid over it."""
    context: dict[str, Any] = {}
    if context_file is not None:
        context.update(load_mapping_file(context_file))
    for pair in pairs:
        key, value = parse_pair(pair)
        context[key] = value
    return context


def load_mapping_file(path: Path) -> dict[str, Any]:
    """A JSON or YAML file whose top level is a mapping (YAML for .yaml/.yml, else JSON)."""
    text = read_text(path, "context file")
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"context file {path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except Exception as exc:  # yaml.YAMLError and friends
        raise CliError(f"context file {path}: invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise CliError(f"context file {path} must hold a mapping of names to values, not a {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def parse_pair(pair: str) -> tuple[str, Any]:
    """`key=value`: the value is JSON when it parses as JSON (`n=3`, `xs=[1,2]`), else text."""
    key, sep, raw = pair.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise CliError(f"-c expects key=value with an identifier as key, got {pair!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key, value


def dumps(data: Any, *, indent: int | None = 2) -> str:
    """JSON for people and pipes: UTF-8 kept, anything odd (dates, models) made plain."""
    from ..codec import jsonable

    return json.dumps(jsonable(data), ensure_ascii=False, indent=indent)


def write_atomically(path: Path, write: Any, *, binary: bool = False) -> None:
    """Write via a temporary file in the same directory, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        handle = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
        with handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: Path, data: Any) -> None:
    try:
        write_atomically(path, lambda handle: handle.write(dumps(data) + "\n"))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc}", code=1) from None

"""Files the commands read and write: templates, context files, `-c` pairs, JSON output.

Every problem with them is a `CliError` (or the library's `InputError`, from `fileio`)
with exit code 2 and a message naming the file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..fileio import BOM, write_atomically
from ..fileio import parse_json as parse_json  # the CLI's names for them
from ..fileio import read_text as read_text
from ..fileio import write_error as write_error
from .errors import CliError


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
    text = read_text(path, "context file").removeprefix(BOM)
    if path.suffix.lower() in (".yaml", ".yml"):
        data = _yaml(text, path)
    else:
        data = parse_json(text, f"context file {path}")
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise CliError(f"context file {path} must hold a mapping of names to values, not a {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def _yaml(text: str, path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise CliError(f"context file {path}: invalid YAML: nested too deeply") from None
    except Exception as exc:  # yaml.YAMLError and friends
        raise CliError(f"context file {path}: invalid YAML: {exc}") from None


def parse_pair(pair: str) -> tuple[str, Any]:
    """`key=value`: the value is JSON when it parses as JSON (`n=3`, `xs=[1,2]`), else text;
    `key=@path` reads a file (cli/attachments.py)."""
    key, sep, raw = pair.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise CliError(f"-c expects key=value with an identifier as key, got {pair!r}")
    if raw.startswith("@"):  # a file: an image, a document, or text (`@@` is a literal `@`)
        from .attachments import pair_value

        return key, pair_value(key, raw)
    try:
        value: Any = json.loads(raw)
    except RecursionError:
        raise CliError(f"-c {key}=…: the JSON value is nested too deeply for this parser") from None
    except ValueError:
        value = raw
    return key, value


def dumps(data: Any, *, indent: int | None = 2) -> str:
    """JSON for people and pipes: UTF-8 kept, anything odd (dates, models) made plain."""
    from ..codec import jsonable
    from .text import json_text

    return json_text(json.dumps(jsonable(data), ensure_ascii=False, indent=indent))


def write_text_file(path: Path, text: str) -> None:
    """`text` into the output file `path` (as `write_atomically` writes); any failure is
    `write_error`'s CliError."""
    try:
        write_atomically(path, lambda handle: handle.write(text))
    except OSError as exc:
        raise write_error(path, exc) from None


def write_json(path: Path, data: Any) -> None:
    write_text_file(path, dumps(data) + "\n")


def write_output(output: Path | None, text: str) -> None:
    """A command's text result: to stdout, or into the `-o` file with `wrote PATH` on stderr."""
    if output is None:
        sys.stdout.write(text)
        return
    write_text_file(output, text)
    sys.stderr.write(f"wrote {output}\n")

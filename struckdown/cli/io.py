"""Files the commands read and write: templates, context files, `-c` pairs, JSON output.

Every problem with them is a `CliError` with exit code 2 and a message naming the file.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import CliError

BOM = "\ufeff"  # a UTF-8 byte order mark, as some editors write at the start of a file


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


def parse_json(text: str, where: str, *, position: bool = True) -> Any:
    """`json.loads`, with every failure a CliError starting with `where` (then `:line:col`
    when `position`)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f":{exc.lineno}:{exc.colno}" if position else ""
        raise CliError(f"{where}{at}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise CliError(f"{where}: invalid JSON: nested too deeply for this parser") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise CliError(f"{where}: invalid JSON: {exc}") from None


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


def write_atomically(path: Path, write: Any, *, binary: bool = False) -> None:
    """Write an output file the way a careful shell redirection would.

    A regular file (or a new one) is written to a temporary file beside it and renamed
    over it, so a crash never leaves half a file. A symlink is written through: its
    target is replaced and the link stays. Anything else that already exists (a
    device such as /dev/null, a FIFO) is opened and written in place, never replaced.
    A new file gets the umask's mode (0666 less the umask), a replaced file keeps its
    mode (and its owner, where we may set it). A directory is an error.
    """
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "it is a directory")
    if info is not None and not stat.S_ISREG(info.st_mode):
        with _open_for_writing(target, binary) as handle:
            write(handle)
        return
    if target is path:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_temporary(target)
    try:
        if info is not None:
            _copy_ownership(tmp, info)
        with _open_for_writing(tmp, binary) as handle:
            write(handle)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _new_temporary(target: Path) -> Path:
    """An empty file beside `target`, created with mode 0666 so the umask decides its mode."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {target}")


def _copy_ownership(tmp: Path, info: os.stat_result) -> None:
    """The replacement keeps the replaced file's mode, and its owner when we may set it."""
    try:
        os.chown(tmp, info.st_uid, info.st_gid)
    except OSError:
        pass  # not ours to give away: the mode still follows
    os.chmod(tmp, stat.S_IMODE(info.st_mode))


def _open_for_writing(path: Path, binary: bool) -> Any:
    if binary:
        return open(path, "wb")
    return open(path, "w", encoding="utf-8", newline="")


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


def check_writable(path: Path) -> None:
    """Before any paid work: the `-o` file can be written where `write_atomically` will
    write it (a symlink's target, whose folder must exist; a new file's nearest existing
    folder), else the CliError the write would end with (issue 39 N17)."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if target.is_dir():
        raise write_error(path, IsADirectoryError(errno.EISDIR, "it is a directory"))
    if target.exists():
        return
    folder = target.parent
    if target is not path:
        if not folder.is_dir():
            raise CliError(f"cannot write {path}: it is a symlink to {target}, whose folder does not exist", code=1)
    else:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # write_atomically makes the missing folders
        if not folder.is_dir():
            raise CliError(f"cannot write {path}: {folder} is not a folder", code=1)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise write_error(path, PermissionError(errno.EACCES, f"{folder} is not writable"))


def write_error(path: Path, exc: OSError) -> CliError:
    """`cannot write PATH: reason`, naming the output the user gave (never a temporary file)."""
    return CliError(f"cannot write {path}: {exc.strerror or exc}", code=1)

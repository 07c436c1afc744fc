"""Batch rows in and out: CSV, XLSX, JSON, JSONL and text files.

Rows are plain dicts (column → value). Reading keeps the input's column order;
writing takes the columns explicitly so every format has the same layout.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Callable, TextIO

from ..codec import json_text
from ..errors import InputError
from ..fileio import BOM, parse_json, write_atomically, write_error

OUTPUT_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".xlsx": "xlsx"}

#: What a spreadsheet cell may hold: XML 1.0 characters only, at most 32,767 of them.
XLSX_CELL_MAX = 32_767
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: A CSV cell starting with one of these is a formula to Excel, LibreOffice and Sheets.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def read_inputs(specs: Sequence[str], warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Every row of every input, in order, as a list. `-` reads JSONL from stdin.

    `warn` hears about rows holding lone surrogates (valid JSON, not valid Unicode):
    they run, but a provider reached over HTTP refuses them. `sd batch` reads
    `InputRows` instead, one row at a time."""
    inputs = InputRows(specs)
    try:
        rows: list[dict[str, Any]] = []
        for spec, number, row in inputs.numbered():
            if warn is not None:
                warn_lone_surrogates(spec, number, row, warn)
            rows.append(row)
        return rows
    finally:
        inputs.close()


class InputRows:
    """The rows of every input in order, read lazily, one at a time; iterating again
    reads the files again (stdin is copied to a temporary file on the first read, so
    it can be read again too). Nothing holds more than the row at hand, except a
    `.json` value that is not a list, and a plain text file (one row each)."""

    def __init__(self, specs: Sequence[str]) -> None:
        if sum(spec == "-" for spec in specs) > 1:
            raise InputError("'-' (stdin) can be given only once")
        self.specs = list(specs)
        self._stdin_copy: Path | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for _, _, row in self.numbered():
            yield row

    def numbered(self) -> Iterator[tuple[str, int, dict[str, Any]]]:
        """`(input, row number within it, row)` for every row."""
        for spec in self.specs:
            rows = self._stdin_rows() if spec == "-" else iter_file(Path(spec))
            for number, row in enumerate(rows, 1):
                yield spec, number, row

    def _stdin_rows(self) -> Iterator[dict[str, Any]]:
        if self._stdin_copy is None:
            self._stdin_copy = _copy_stdin()
        with self._stdin_copy.open(encoding="utf-8", errors="surrogateescape", newline="") as handle:
            first = handle.readline()
            while first and not first.strip():
                first = handle.readline()
            handle.seek(0)
            first = first.lstrip(BOM + " \t")
            start = first[:1]
            if start == "{" and _is_json_object(first):
                yield from _jsonl(handle, "<stdin>")
            elif start in ("[", "{"):  # one JSON value: a list of objects, or one object
                yield from _json(handle, Path("<stdin>"))
            else:  # plain text, as 0.18 read it: one row
                from .documents import text_row

                yield text_row(handle.read(), "<stdin>", "<stdin>")

    def close(self) -> None:
        """Remove the copy of stdin."""
        if self._stdin_copy is not None:
            self._stdin_copy.unlink(missing_ok=True)
            self._stdin_copy = None


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _copy_stdin() -> Path:
    import shutil
    import tempfile

    fd, name = tempfile.mkstemp(prefix="sd-batch-stdin-", suffix=".jsonl")
    with open(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as copy:
        shutil.copyfileobj(sys.stdin, copy)
    return Path(name)


def warn_lone_surrogates(spec: str, number: int, row: dict[str, Any], warn: Callable[[str], None]) -> None:
    if _has_lone_surrogate(row):
        warn(f"{spec}: row {number} holds a lone surrogate (valid JSON, not valid Unicode): "
             "providers reached over HTTP will refuse that row")


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]  # a loop, not recursion: a row may be nested as deep as JSON allows
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def read_file(path: Path) -> list[dict[str, Any]]:
    """Every row of one input file, as a list."""
    return list(iter_file(path))


def iter_file(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of one input file, one at a time (the file is opened on the first)."""
    suffix = path.suffix.lower()
    if suffix == ".xlsx":
        return _xlsx(path)
    if suffix == ".csv":
        return _lines_of(path, lambda handle: _csv(handle, path))
    if suffix == ".json":
        return _lines_of(path, lambda handle: _json(handle, path))
    if suffix in (".jsonl", ".ndjson"):
        return _lines_of(path, lambda handle: _jsonl(handle, str(path)))
    return _file_row(path)


def _file_row(path: Path) -> Iterator[dict[str, Any]]:
    """A text or document file: one row of its text (input, content, source, filename,
    basename), as 0.18 read them (batch/documents.py)."""
    from .documents import file_row

    yield file_row(path)


def _lines_of(path: Path, rows: Callable[[TextIO], Iterator[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """`rows(handle)` over the file opened as UTF-8 text (a byte order mark dropped);
    a file that cannot be opened or decoded is a InputError naming it."""
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise InputError(f"input {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"input {path} is a directory") from None
    except OSError as exc:
        raise InputError(f"cannot read input {path}: {exc}") from None
    with handle:
        try:
            yield from rows(handle)
        except UnicodeDecodeError as exc:
            raise InputError(f"cannot read input {path}: {exc}") from None
        except IsADirectoryError:
            raise InputError(f"input {path} is a directory") from None
        except OSError as exc:
            raise InputError(f"cannot read input {path}: {exc}") from None


def _csv(handle: TextIO, path: Path) -> Iterator[dict[str, Any]]:
    reader = csv.reader(handle)
    header = next(reader, None)
    if header is None:
        return
    _unique_columns(header, path)
    width = len(header)
    while True:
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            raise InputError(f"{path}:{reader.line_num}: {exc}") from None
        if cells is None:
            return
        if not cells:
            continue  # a blank line, as csv.DictReader skips it
        if len(cells) > width:
            raise InputError(f"{path}:{reader.line_num}: more cells than header columns")
        yield dict(zip(header, cells + [""] * (width - len(cells))))


def _unique_columns(header: Sequence[str], path: Path) -> None:
    """A repeated column name would silently keep only its last cell: refuse it."""
    first: dict[str, int] = {}
    for position, name in enumerate(header, 1):
        if name in first:
            raise InputError(
                f"{path}: column {name!r} appears twice in the header (columns {first[name]} and {position}): "
                "rename one"
            )
        first[name] = position


def _as_row(item: Any) -> dict[str, Any]:
    return item if isinstance(item, dict) else {"input": item}


def _json(handle: TextIO, path: Path) -> Iterator[dict[str, Any]]:
    """A list of rows, item by item (`JsonItems`); any other value is one row."""
    items = JsonItems(handle, str(path))
    if items.opens_list():
        for item in items:
            yield _as_row(item)
    else:
        yield _as_row(parse_json(items.rest(), str(path)))


def _jsonl(stream: TextIO, name: str) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(stream, 1):
        if number == 1:
            line = line.removeprefix(BOM)
        if not line.strip():
            continue
        yield _as_row(parse_json(line, f"{name}:{number}", position=False))


class JsonItems:
    """The items of a JSON list read from a text stream one at a time, so a list of a
    million rows is never in memory at once. Errors are InputErrors as `parse_json`
    words them, `where:line:col: invalid JSON: …`, positioned in the whole file."""

    CHUNK = 1 << 16

    def __init__(self, handle: TextIO, where: str) -> None:
        self.handle = handle
        self.where = where
        self.buffer = ""
        self.pos = 0
        self.eof = False
        self.lines_before = 0  # newlines in the text dropped from the buffer
        self.column_before = 0  # characters after the last of them
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        """Read on (keeping what is not consumed); False at the end of the file."""
        if self.eof:
            return False
        chunk = self.handle.read(max(self.CHUNK, len(self.buffer) - self.pos))
        if not chunk:
            self.eof = True
            return False
        consumed = self.buffer[: self.pos]
        newlines = consumed.count("\n")
        if newlines:
            self.lines_before += newlines
            self.column_before = len(consumed) - consumed.rfind("\n") - 1
        else:
            self.column_before += len(consumed)
        self.buffer = self.buffer[self.pos :] + chunk
        self.pos = 0
        return True

    def _peek(self) -> str:
        """The next character that is not white space ('' at the end)."""
        while True:
            match = _JSON_SPACE.match(self.buffer, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buffer) or not self._more():
                return self.buffer[self.pos : self.pos + 1]

    def _error(self, message: str, pos: int) -> InputError:
        newlines = self.buffer.count("\n", 0, pos)
        line = self.lines_before + newlines + 1
        if newlines:
            column = pos - self.buffer.rfind("\n", 0, pos)
        else:
            column = self.column_before + pos + 1
        return InputError(f"{self.where}:{line}:{column}: invalid JSON: {message}")

    def opens_list(self) -> bool:
        if self._peek() == "[":
            self.pos += 1
            return True
        return False

    def rest(self) -> str:
        """The whole text for a top-level value that is not a list, with the white space
        already dropped put back as such (so errors keep their line and column)."""
        return "\n" * self.lines_before + " " * self.column_before + self.buffer + self.handle.read()

    def _value(self) -> Any:
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue  # the value may go on in the next chunk
                raise self._error(exc.msg, exc.pos) from None
            except RecursionError:
                raise InputError(f"{self.where}: invalid JSON: nested too deeply for this parser") from None
            except ValueError as exc:  # e.g. an integer of more digits than Python converts
                raise InputError(f"{self.where}: invalid JSON: {exc}") from None
            if end == len(self.buffer) and self._more():
                continue  # a number cut by the chunk's end: read it whole
            self.pos = end
            return value

    def __iter__(self) -> Iterator[Any]:
        if self._peek() == "]":
            self.pos += 1
        else:
            while True:
                if self._peek() == "":
                    raise self._error("Expecting value", self.pos)
                yield self._value()
                following = self._peek()
                if following == ",":
                    self.pos += 1
                    continue
                if following == "]":
                    self.pos += 1
                    break
                raise self._error("Expecting ',' delimiter", self.pos)
        if self._peek() != "":
            raise self._error("Extra data", self.pos)


def _xlsx(path: Path) -> Iterator[dict[str, Any]]:
    """The first sheet's rows, read-only (openpyxl streams the sheet's XML)."""
    openpyxl = _openpyxl()
    if not path.is_file():
        raise InputError(f"input {path} does not exist")
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    try:
        values = book.active.iter_rows(values_only=True)
        header = next(values, None)
        if header is None:
            return
        columns = [str(c) if c is not None else f"column_{i + 1}" for i, c in enumerate(header)]
        _unique_columns(columns, path)
        for cells in values:
            if any(c is not None for c in cells):
                yield dict(zip(columns, cells))
    finally:
        book.close()


def _openpyxl() -> Any:
    try:
        import openpyxl
    except ImportError:
        raise InputError("XLSX needs openpyxl: pip install 'struckdown[xlsx]'") from None
    return openpyxl


def columns_of(rows: Iterable[dict[str, Any]]) -> list[str]:
    """Every column, in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def output_format(path: Path) -> str:
    fmt = OUTPUT_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(f"cannot tell the output format of {path}: use .jsonl, .json, .csv or .xlsx")
    if fmt == "xlsx":
        _openpyxl()
    return fmt


def json_line(row: dict[str, Any]) -> str:
    from ..codec import jsonable

    return json_text(json.dumps(jsonable(row), ensure_ascii=False))


def write_table(path: Path, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
    """Write `rows` (read one at a time: a generator is never held whole) in the
    format `path` names, atomically (see `write_atomically`)."""
    fmt = output_format(path)
    try:
        if fmt == "xlsx":
            write_atomically(path, lambda handle: _write_xlsx(handle, rows, columns), binary=True)
        else:
            write_atomically(path, lambda handle: _WRITERS[fmt](handle, rows, columns))
    except OSError as exc:
        raise write_error(path, exc) from None


def _write_jsonl(handle: TextIO, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
    for row in rows:
        handle.write(json_line(row) + "\n")


def _write_json(handle: TextIO, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
    """The text `json.dumps(rows, indent=2)` gives, written a row at a time."""
    from ..codec import jsonable

    opened = False
    for row in rows:
        item = json_text(json.dumps(jsonable(row), ensure_ascii=False, indent=2))
        handle.write((",\n  " if opened else "[\n  ") + item.replace("\n", "\n  "))
        opened = True
    handle.write("\n]\n" if opened else "[]\n")


def _write_csv(handle: TextIO, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
    writer = csv.writer(handle)
    writer.writerow([_csv_cell(c) for c in columns])
    for row in rows:
        writer.writerow([_csv_cell(row.get(c)) for c in columns])


def _csv_cell(value: Any) -> str:
    """The cell's text, never a formula: text starting with `=`, `+`, `-`, `@`, tab or CR
    gets a leading `'` (numbers stay numbers); lone surrogates are written as `\\ud800`
    so the file stays UTF-8."""
    text = _LONE_SURROGATE.sub(_escape_char, _text_cell(value))
    if isinstance(value, (bool, int, float)):
        return text
    if text.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code > 0xFF else f"\\x{code:02x}"


def _text_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    from ..codec import jsonable

    plain = jsonable(value)
    return plain if isinstance(plain, str) else json.dumps(plain, ensure_ascii=False)


def _write_xlsx(handle: Any, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
    """A write-only workbook: openpyxl streams each row to disk as it is appended."""
    openpyxl = _openpyxl()
    from openpyxl.cell import WriteOnlyCell

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Sheet")

    def cell(value: Any) -> Any:
        value = _xlsx_cell(value)
        if not isinstance(value, str):
            return value
        text = WriteOnlyCell(sheet, value=value)
        text.data_type = "s"  # text is never a formula (=…) or an error value (#N/A)
        return text

    sheet.append([cell(c) for c in columns])
    for row in rows:
        sheet.append([cell(row.get(c)) for c in columns])
    book.save(handle)


def _xlsx_cell(value: Any) -> Any:
    if value is None or isinstance(value, (int, float, bool, _dt.date, _dt.time)):
        return value
    return _xlsx_text(value if isinstance(value, str) else _text_cell(value))


def _xlsx_text(text: str) -> str:
    """What a cell can hold: characters XML cannot carry as `\\x1b`/`\\ud800` escapes, and
    at most 32,767 characters (longer text is cut, ending in `…`; JSONL keeps it whole)."""
    text = _NOT_XML.sub(_escape_char, text)
    return text if len(text) <= XLSX_CELL_MAX else text[: XLSX_CELL_MAX - 1] + "…"


_WRITERS = {"jsonl": _write_jsonl, "json": _write_json, "csv": _write_csv}

"""Batch rows in and out: CSV, XLSX, JSON, JSONL and text files.

Rows are plain dicts (column → value). Reading keeps the input's column order;
writing takes the columns explicitly so every format has the same layout.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Callable, TextIO

from .errors import CliError
from .io import BOM, parse_json, read_text, write_atomically, write_error
from .text import json_text

OUTPUT_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".xlsx": "xlsx"}

#: What a spreadsheet cell may hold: XML 1.0 characters only, at most 32,767 of them.
XLSX_CELL_MAX = 32_767
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: A CSV cell starting with one of these is a formula to Excel, LibreOffice and Sheets.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def read_inputs(specs: Sequence[str], warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Every row of every input, in order. `-` reads JSONL from stdin.

    `warn` hears about rows holding lone surrogates (valid JSON, not valid Unicode):
    they run, but a provider reached over HTTP refuses them."""
    rows: list[dict[str, Any]] = []
    if sum(spec == "-" for spec in specs) > 1:
        raise CliError("'-' (stdin) can be given only once")
    for spec in specs:
        if spec == "-":
            found = _jsonl(sys.stdin, "<stdin>")
        else:
            found = read_file(Path(spec))
        if warn is not None:
            for number, row in enumerate(found, 1):
                if _has_lone_surrogate(row):
                    warn(f"{spec}: row {number} holds a lone surrogate (valid JSON, not valid Unicode): "
                         "providers reached over HTTP will refuse that row")
        rows += found
    return rows


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
    suffix = path.suffix.lower()
    if suffix == ".xlsx":
        return _xlsx(path)
    text = read_text(path, "input")
    if suffix == ".csv":
        return _csv(text, path)
    if suffix == ".json":
        return _json(text, path)
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl(io.StringIO(text), str(path))
    return [{"input": text, "filename": path.name}]


def _csv(text: str, path: Path) -> list[dict[str, Any]]:
    reader = csv.reader(io.StringIO(text.removeprefix(BOM)))
    header = next(reader, None)
    if header is None:
        return []
    _unique_columns(header, path)
    rows: list[dict[str, Any]] = []
    for cells in reader:
        if not cells:
            continue  # a blank line, as csv.DictReader skips it
        if len(cells) > len(header):
            raise CliError(f"{path}:{reader.line_num}: more cells than header columns")
        rows.append(dict(zip(header, cells + [""] * (len(header) - len(cells)))))
    return rows


def _unique_columns(header: Sequence[str], path: Path) -> None:
    """A repeated column name would silently keep only its last cell: refuse it."""
    first: dict[str, int] = {}
    for position, name in enumerate(header, 1):
        if name in first:
            raise CliError(
                f"{path}: column {name!r} appears twice in the header (columns {first[name]} and {position}): "
                "rename one"
            )
        first[name] = position


def _json(text: str, path: Path) -> list[dict[str, Any]]:
    data = parse_json(text.removeprefix(BOM), str(path))
    items = data if isinstance(data, list) else [data]
    return [item if isinstance(item, dict) else {"input": item} for item in items]


def _jsonl(stream: TextIO, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(stream, 1):
        if number == 1:
            line = line.removeprefix(BOM)
        if not line.strip():
            continue
        item = parse_json(line, f"{name}:{number}", position=False)
        rows.append(item if isinstance(item, dict) else {"input": item})
    return rows


def _xlsx(path: Path) -> list[dict[str, Any]]:
    openpyxl = _openpyxl()
    if not path.is_file():
        raise CliError(f"input {path} does not exist")
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    values = book.active.iter_rows(values_only=True)
    header = next(values, None)
    if header is None:
        return []
    columns = [str(c) if c is not None else f"column_{i + 1}" for i, c in enumerate(header)]
    _unique_columns(columns, path)
    rows = [dict(zip(columns, cells)) for cells in values if any(c is not None for c in cells)]
    book.close()
    return rows


def _openpyxl() -> Any:
    try:
        import openpyxl
    except ImportError:
        raise CliError("XLSX needs openpyxl: pip install 'struckdown[xlsx]'") from None
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
        raise CliError(f"cannot tell the output format of {path}: use .jsonl, .json, .csv or .xlsx")
    if fmt == "xlsx":
        _openpyxl()
    return fmt


def json_line(row: dict[str, Any]) -> str:
    from ..codec import jsonable

    return json_text(json.dumps(jsonable(row), ensure_ascii=False))


def write_table(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    fmt = output_format(path)
    try:
        if fmt == "xlsx":
            write_atomically(path, lambda handle: _write_xlsx(handle, rows, columns), binary=True)
        else:
            write_atomically(path, lambda handle: _WRITERS[fmt](handle, rows, columns))
    except OSError as exc:
        raise write_error(path, exc) from None


def _write_jsonl(handle: TextIO, rows: list[dict[str, Any]], columns: list[str]) -> None:
    for row in rows:
        handle.write(json_line(row) + "\n")


def _write_json(handle: TextIO, rows: list[dict[str, Any]], columns: list[str]) -> None:
    from ..codec import jsonable

    handle.write(json_text(json.dumps(jsonable(rows), ensure_ascii=False, indent=2)) + "\n")


def _write_csv(handle: TextIO, rows: list[dict[str, Any]], columns: list[str]) -> None:
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


def _write_xlsx(handle: Any, rows: list[dict[str, Any]], columns: list[str]) -> None:
    openpyxl = _openpyxl()
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append([_xlsx_cell(c) for c in columns])
    for row in rows:
        sheet.append([_xlsx_cell(row.get(c)) for c in columns])
    for cells in sheet.iter_rows():
        for cell in cells:
            if isinstance(cell.value, str):
                cell.data_type = "s"  # text is never a formula (=…) or an error value (#N/A)
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

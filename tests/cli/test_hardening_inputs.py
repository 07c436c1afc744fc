"""Small input edges of the command line: each is a clear error or just works.

Deep `-c`/context values, JSON errors labelled as JSON, a UTF-8 BOM in every input
format, duplicate CSV/XLSX headers, tools files that raise BaseException, a closed
stdout, and `sd cache stats|clear`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, sd, use_model  # noqa: F401
from cli_models import scripted

DEEP = "[" * 5000 + "]" * 5000
# PyYAML's parser is Python code, at least a frame per level: nesting as deep as the recursion
# limit always exceeds it (its scanner is quadratic in the depth: 5,000 levels took a second)
DEEP_YAML = "[" * sys.getrecursionlimit() + "]" * sys.getrecursionlimit()


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def last_line(result: Any) -> str:
    return str(result.stderr).strip().splitlines()[-1]


@pytest.fixture
def template(tmp_path: Path) -> Path:
    return write(tmp_path / "t.sd", "Row {{ n }} [[answer]]\n")


@pytest.fixture(autouse=True)
def echo(use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: f"echo: {prompt.strip()}"))


# -- deep values and labels ---------------------------------------------------------------


def test_a_deep_set_value_is_a_clear_error(template: Path) -> None:
    result = sd("run", template, "-c", f"n={DEEP}")
    assert result.exit_code == 2
    assert last_line(result) == "error: -c n=…: the JSON value is nested too deeply for this parser"


def test_a_deep_json_context_is_labelled_json(tmp_path: Path, template: Path) -> None:
    context = write(tmp_path / "ctx.json", '{"n": ' + DEEP + "}")
    result = sd("run", template, "--context", context)
    assert result.exit_code == 2
    assert last_line(result) == f"error: context file {context}: invalid JSON: nested too deeply for this parser"


def test_a_json_context_that_python_cannot_convert_is_labelled_json(tmp_path: Path, template: Path) -> None:
    context = write(tmp_path / "ctx.json", '{"n": ' + "1" * 5000 + "}")
    result = sd("run", template, "--context", context)
    assert result.exit_code == 2
    assert last_line(result).startswith(f"error: context file {context}: invalid JSON: Exceeds the limit")


def test_a_deep_yaml_context_is_a_clear_error(tmp_path: Path, template: Path) -> None:
    context = write(tmp_path / "ctx.yaml", "n: " + DEEP_YAML + "\n")
    result = sd("run", template, "--context", context)
    assert result.exit_code == 2
    assert last_line(result) == f"error: context file {context}: invalid YAML: nested too deeply"


def test_a_deep_jsonl_row_is_a_clear_error(tmp_path: Path, template: Path) -> None:
    rows = write(tmp_path / "rows.jsonl", '{"n": 1}\n{"n": ' + DEEP + "}\n")
    result = sd("batch", template, rows)
    assert result.exit_code == 2
    assert last_line(result) == f"error: {rows}:2: invalid JSON: nested too deeply for this parser"


# -- a UTF-8 BOM is accepted everywhere ---------------------------------------------------


def test_a_bom_is_accepted_in_a_json_context(tmp_path: Path, template: Path) -> None:
    context = tmp_path / "ctx.json"
    context.write_text('\ufeff{"n": 7}', encoding="utf-8")
    result = sd("run", template, "--context", context)
    assert result.exit_code == 0, result.output
    assert "answer: echo: Row 7" in result.stdout


@pytest.mark.parametrize(("name", "text"), [("rows.json", '[{"n": 7}]'), ("rows.jsonl", '{"n": 7}\n'), ("rows.csv", "n\n7\n")])
def test_a_bom_is_accepted_in_batch_inputs(tmp_path: Path, template: Path, name: str, text: str) -> None:
    rows = tmp_path / name
    rows.write_text("\ufeff" + text, encoding="utf-8")
    result = sd("batch", template, rows)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["answer"] == "echo: Row 7"


def test_a_bom_is_accepted_on_stdin(template: Path) -> None:
    result = sd("batch", template, "-", input='\ufeff{"n": 7}\n')
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["answer"] == "echo: Row 7"


# -- duplicate headers ---------------------------------------------------------------------


def test_duplicate_csv_headers_are_an_error(tmp_path: Path, template: Path) -> None:
    rows = write(tmp_path / "rows.csv", "n,text,n\n1,a,2\n")
    result = sd("batch", template, rows)
    assert result.exit_code == 2
    assert last_line(result) == (
        f"error: {rows}: column 'n' appears twice in the header (columns 1 and 3): rename one"
    )


def test_duplicate_xlsx_headers_are_an_error(tmp_path: Path, template: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["n", "n"])
    book.active.append([1, 2])
    rows = tmp_path / "rows.xlsx"
    book.save(rows)
    result = sd("batch", template, rows)
    assert result.exit_code == 2
    assert "column 'n' appears twice in the header (columns 1 and 2)" in last_line(result)


def test_short_csv_rows_still_fill_with_empty_cells(tmp_path: Path, template: Path) -> None:
    rows = write(tmp_path / "rows.csv", "n,text\n1\n\n2,b\n")
    result = sd("batch", template, rows)
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["text"] for line in result.stdout.splitlines()] == ["", "b"]


# -- tools files raising BaseException -------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
        ("class Boom(BaseException):\n    pass\n\nraise Boom('no')\n", "Boom: no"),
    ],
)
def test_a_tools_file_raising_base_exception_is_a_clear_error(tmp_path: Path, template: Path, body: str, shown: str) -> None:
    tools = write(tmp_path / "tools.py", body + "\ndef f() -> str:\n    return 'x'\n")
    result = sd("run", template, "-c", "n=1", "--tools", tools)
    assert result.exit_code == 2
    assert last_line(result) == f"error: tools file {tools} failed to load: {shown}"


# -- a closed stdout ---------------------------------------------------------------------------


@pytest.mark.process  # the point: a real process whose stdout reader went away
@pytest.mark.parametrize("command", [["run", "--json"], ["run"], ["batch"]])
def test_a_closed_stdout_is_one_clear_line(tmp_path: Path, template: Path, command: list[str]) -> None:
    rows = write(tmp_path / "rows.jsonl", '{"n": 1}\n{"n": 2}\n')
    args = [command[0], template, *([rows] if command[0] == "batch" else ["-c", "n=1"]), *command[1:]]
    process = subprocess.Popen(
        [sys.executable, "-m", "struckdown.cli", *map(str, args), "--model", "test"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader goes away before anything is written
    stderr = process.stderr.read().decode("utf-8")
    assert process.wait(60) == 1
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    assert stderr.splitlines()[-1] == "error: stdout was closed before everything was written (broken pipe)"


# -- sd cache stats | clear ----------------------------------------------------------------------


def test_cache_stats_and_clear(tmp_path: Path, template: Path) -> None:
    cache = tmp_path / "cache" / "responses.sqlite3"
    empty = sd("cache", "stats")
    assert empty.exit_code == 0
    assert empty.stdout.splitlines() == [
        f"path: {cache} (not created yet)", "entries: 0", "size: 0 bytes of 500.0 MiB (STRUCKDOWN_CACHE_MAX_MB)",
    ]  # fmt: skip
    assert sd("run", template, "-c", "n=1").exit_code == 0
    assert sd("run", template, "-c", "n=2").exit_code == 0
    stats = sd("cache", "stats", "--json")
    assert stats.exit_code == 0
    numbers = json.loads(stats.stdout)
    assert numbers["path"] == str(cache) and numbers["entries"] == 2 and numbers["bytes"] > 0
    cleared = sd("cache", "clear")
    assert cleared.exit_code == 0 and cleared.stdout == f"removed 2 entries from {cache}\n"
    assert json.loads(sd("cache", "stats", "--json").stdout)["entries"] == 0


def test_cache_commands_take_a_directory(tmp_path: Path, template: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(elsewhere))
    assert sd("run", template, "-c", "n=1").exit_code == 0
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "cache"))
    assert json.loads(sd("cache", "stats", "--json", "--dir", elsewhere).stdout)["entries"] == 1
    assert sd("cache", "clear", "--dir", elsewhere).stdout.startswith("removed 1 entry from ")


def test_a_damaged_cache_file_is_a_clear_error(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "responses.sqlite3").write_bytes(b"this is not a database" * 100)
    stats = sd("cache", "stats")
    assert stats.exit_code == 1
    assert last_line(stats).startswith(f"error: cannot read the response cache {cache / 'responses.sqlite3'}: ")
    cleared = sd("cache", "clear")
    assert cleared.exit_code == 1
    assert last_line(cleared).endswith("(if it is damaged, delete the file)")

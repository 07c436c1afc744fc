"""Images and files from the command line: `-c photo=@path`, `sd batch --file-columns`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import struckdown as sd
from cli_support import plain_environment, sd as sd_cli, use_model  # noqa: F401
from media_support import PDF, png, shape, user_contents
from scripted import Call, Script, auto_answer

RED = png(4, 3, 200)
BLUE = png(5, 2, 50)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def sent(call: Call) -> list[Any]:
    return [shape(c) for c in user_contents(call.messages)]


def test_run_sends_an_at_file_as_an_image_and_names_it(tmp_path: Path, use_model: Any) -> None:
    (tmp_path / "receipt.png").write_bytes(RED)
    template = write(tmp_path / "t.sd", "Receipt: {{ photo }} Total? [[total]] Currency? [[currency]]\n")
    script = Script(lambda call: "8.60")
    use_model(script.model())
    result = sd_cli("run", template, "-c", f"photo=@{tmp_path / 'receipt.png'}", "--no-cache")
    assert result.exit_code == 0, result.output
    assert sent(script.calls[0]) == [["Receipt: ", ("binary", "image/png", RED), " Total?"]]
    # named once, by the first slot that sent it, as that slot completes
    assert result.stdout.startswith(f"total: 8.60\nattached receipt.png (image/png, {len(RED)} B) → slot total\ncurrency: 8.60\n")
    assert result.stdout.count("attached ") == 1


def test_at_files_of_text_json_and_pdf_and_a_literal_at(tmp_path: Path, use_model: Any) -> None:
    write(tmp_path / "notes.txt", "Bring snacks.\n")
    write(tmp_path / "data.json", '{"n": 41}')
    (tmp_path / "terms.pdf").write_bytes(PDF)
    template = write(tmp_path / "t.sd", "{{ notes }}|{{ data.n + 1 }}|{{ handle }}|{{ doc }} [[a]]\n")
    script = Script(lambda call: "ok")
    use_model(script.model())
    result = sd_cli("run", template, "-c", f"notes=@{tmp_path / 'notes.txt'}", "-c", f"data=@{tmp_path / 'data.json'}",
                    "-c", "handle=@@ada", "-c", f"doc=@{tmp_path / 'terms.pdf'}", "--no-cache")
    assert result.exit_code == 0, result.output
    assert sent(script.calls[0]) == [["Bring snacks.\n|42|@ada|", ("binary", "application/pdf", PDF)]]
    assert "attached terms.pdf (application/pdf" in result.stdout


def test_a_missing_at_file_is_an_input_error(tmp_path: Path, use_model: Any) -> None:
    template = write(tmp_path / "t.sd", "{{ photo }} [[a]]\n")
    script = Script(lambda call: "ok")
    use_model(script.model())
    result = sd_cli("run", template, "-c", f"photo=@{tmp_path / 'nope.png'}")
    assert result.exit_code == 2
    assert f"error: -c photo=@…: no such file: {tmp_path / 'nope.png'}" in result.stderr
    assert script.calls == []


def test_batch_file_columns_read_paths_relative_to_the_input(tmp_path: Path, use_model: Any) -> None:
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "red.png").write_bytes(RED)
    (tmp_path / "imgs" / "blue.png").write_bytes(BLUE)
    rows = tmp_path / "rows.csv"
    write(rows, "id,photo\n1,imgs/red.png\n2,imgs/missing.png\n3,imgs/blue.png\n4,\n")
    template = write(tmp_path / "t.sd", "Row {{ id }}: {{ photo }} Colour? [[colour]]\n")
    script = Script(lambda call: "seen")
    use_model(script.model())
    out = tmp_path / "out.jsonl"
    result = sd_cli("batch", template, rows, "--file-columns", "photo", "-o", out, "-j", "1", "--no-cache")
    assert result.exit_code == 1, result.output  # row 2 failed
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["photo"], r.get("colour"), r.get("_error")) for r in lines] == [
        ("1", "imgs/red.png", "seen", None),
        ("2", "imgs/missing.png", None, f"TemplateRuntimeError: rendering failed: MediaError: --file-columns photo: no such file: "
                                      f"{tmp_path / 'imgs' / 'missing.png'}"),
        ("3", "imgs/blue.png", "seen", None),
        ("4", "", "seen", None),
    ]
    assert [sent(c) for c in script.calls] == [
        [["Row 1: ", ("binary", "image/png", RED), " Colour?"]],
        [["Row 3: ", ("binary", "image/png", BLUE), " Colour?"]],
        ["Row 4:  Colour?"],
    ]


def test_batch_file_columns_take_a_json_list_of_paths(tmp_path: Path, use_model: Any) -> None:
    (tmp_path / "a.png").write_bytes(RED)
    (tmp_path / "b.png").write_bytes(BLUE)
    rows = write(tmp_path / "rows.jsonl", json.dumps({"photos": ["a.png", "b.png"]}) + "\n")
    template = write(tmp_path / "t.sd", "{{ photos }} Compare. [[a]]\n")
    script = Script(lambda call: "same")
    use_model(script.model())
    result = sd_cli("batch", template, rows, "--file-columns", "photos", "--no-cache")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0]) == {"photos": ["a.png", "b.png"], "a": "same"}
    assert sent(script.calls[0]) == [[("binary", "image/png", RED), ("binary", "image/png", BLUE), " Compare."]]


def test_batch_file_columns_naming_no_column_fails_before_any_row(tmp_path: Path, use_model: Any) -> None:
    rows = write(tmp_path / "rows.csv", "id,photo\n1,a.png\n")
    template = write(tmp_path / "t.sd", "{{ photo }} [[a]]\n")
    script = Script(lambda call: "x")
    use_model(script.model())
    result = sd_cli("batch", template, rows, "--file-columns", "id,picture")
    assert result.exit_code == 2
    assert "error: --file-columns: no input row has a column 'picture' (columns: id, photo)" in result.stderr
    assert script.calls == []


def test_the_receipt_example_sends_its_bundled_image_with_every_question() -> None:
    path = EXAMPLES / "receipt.sd"
    image = sd.Image(EXAMPLES / "receipt.png")
    assert image.media_type == "image/png" and 1_000 < (image.size or 0) < 10_000
    script = Script(auto_answer)
    result = sd.complete(path.read_text(), {"receipt": image}, model=script.model(), template_path=path)
    assert list(result) == ["merchant", "issued", "total", "items", "card"]
    assert len(script.calls) == 5
    for call in script.calls:
        header = sent(call)[0]
        assert header == ["A photo of a receipt:\n\n", ("binary", "image/png", image.data)]
        assert call.instructions is not None and call.instructions.startswith("You read photographed receipts.")

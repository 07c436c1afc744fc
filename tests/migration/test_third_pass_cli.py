"""Issue 55 (SPEC §37): 0.x's CLI habits — `sd chat -o` writes `{slot: answer}`,
`sd batch -h N` is `--head N`, `-c` is `--compare`, `-t FILE.yaml` is `--type`, and a
text input's `filename` column is its path, as in 0.18."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from cli_models import scripted
from cli_support import plain_environment, use_model  # noqa: F401
from cli_support import sd as cli


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def rows_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


def test_chat_output_is_the_answers_as_0x_wrote_them(here: Path, use_model: Any) -> None:
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or ("Knock knock." if "joke" in prompt else True)))
    result = cli("chat", "Tell me a joke [[joke]] Was it funny? [[bool:funny]]", "-o", "out.json")
    assert result.exit_code == 0, result.output
    assert json.loads((here / "out.json").read_text()) == {"joke": "Knock knock.", "funny": True}
    assert prompts == ["Tell me a joke", "Was it funny?"]
    # `sd run -o` keeps the full record
    (here / "t.sd").write_text("Tell me a joke [[joke]]\n")
    assert cli("run", "t.sd", "-o", "run.json").exit_code == 0
    assert set(json.loads((here / "run.json").read_text())) >= {"answers", "usage", "halted"}


def test_batch_h_with_a_number_is_head(here: Path, use_model: Any) -> None:
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or "ok"))
    (here / "t.sd").write_text("Summarise: {{ text }} [[s]]\n")
    rows_csv(here / "rows.csv", [("one", "a"), ("two", "b"), ("three", "c")])
    result = cli("batch", "t.sd", "rows.csv", "-h", "1", "-o", "out.jsonl")
    assert result.exit_code == 0, result.output
    assert prompts == ["Summarise: one"]
    assert [json.loads(line)["s"] for line in (here / "out.jsonl").read_text().splitlines()] == ["ok"]
    assert "Usage:" not in result.output
    assert cli("batch", "-h").output.startswith("Usage: sd batch")  # -h alone is help


def test_batch_c_compares_as_in_0x(here: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: "love" in prompt))
    (here / "t.sd").write_text("Classify: {{ text }} [[bool:happy]]\n")
    rows_csv(here / "rows.csv", [("I love it", "yes"), ("awful", "no"), ("love love", "yes"), ("meh", "no")])
    result = cli("batch", "t.sd", "rows.csv", "-c", "label=happy")
    assert result.exit_code == 0, result.output
    assert "compare label with answer happy (bool): 4 rows\n  accuracy 1.000" in result.stderr


def test_batch_t_loads_a_yaml_type_as_in_0x(here: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: {"title": "Lamp", "price": 3.5}))
    (here / "item.yaml").write_text("name: item\nfields:\n  title: {type: str, required: true}\n  price: number\n")
    (here / "t.sd").write_text("Describe {{ text }} [[item:it]]\n")
    rows_csv(here / "rows.csv", [("a lamp", "x")])
    result = cli("batch", "t.sd", "rows.csv", "-t", "item.yaml")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["it"] == {"title": "Lamp", "price": 3.5}


def test_batch_filename_is_the_path_as_matched(here: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: "ok"))
    (here / "docs").mkdir()
    (here / "docs" / "a.txt").write_text("Apples.")
    result = cli("batch", "About {{ filename }} ({{ basename }}): {{ input }} [[s]]", "-i", "docs/*.txt")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout.splitlines()[0])
    assert (row["filename"], row["basename"], row["source"]) == ("docs/a.txt", "a", "docs/a.txt")

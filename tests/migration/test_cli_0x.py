"""The commands 0.x users know (SPEC §11): sd chat, graph, flat, test, batch --head/--compare."""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cli_models import scripted
from cli_support import plain_environment, runner, sd, use_model  # noqa: F401

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def echo(prompt: str, info: Any) -> Any:
    return {"triggered": False, "reason": "fine"} if info.output_tools else f"echo: {prompt.strip()}"


# -- sd chat -----------------------------------------------------------------------------------


def test_chat_takes_an_inline_prompt_with_the_test_model() -> None:
    result = sd("chat", "Tell me a joke [[joke]]", "--model", "test", "--json", "--no-stream")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"joke": "success (no tool calls)"}


def test_chat_joins_words_and_reads_stdin(use_model: Any) -> None:
    use_model(scripted(echo))
    words = sd("chat", "Tell", "me", "a", "joke", "[[joke]]", "--json")
    assert json.loads(words.stdout) == {"joke": "echo: Tell me a joke"}
    piped = sd("chat", "--json", input="Hi {{ name }} [[x]]\n", )
    assert piped.exit_code == 0 and json.loads(piped.stdout) == {"x": "echo: Hi"}
    named = sd("chat", "--json", "-c", "name=Ann", input="Hi {{ name }} [[x]]\n")
    assert json.loads(named.stdout) == {"x": "echo: Hi Ann"}


def test_chat_without_a_slot_is_answered_and_a_file_is_a_template(use_model: Any, tmp_path: Path) -> None:
    use_model(scripted(echo))
    assert json.loads(sd("chat", "Say hello", "--json").stdout) == {"response": "echo: Say hello"}
    template = write(tmp_path / "t.sd", "From a file [[a]]\n")
    assert json.loads(sd("chat", template, "--json").stdout) == {"a": "echo: From a file"}
    assert json.loads(sd("chat", "-p", template, "--json").stdout) == {"a": "echo: From a file"}


def test_chat_with_a_history_file(use_model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    seen: list[Any] = []

    def reply(prompt: str, info: Any) -> str:
        seen.append(prompt)
        return "ok"

    use_model(scripted(reply))
    (tmp_path / "chat.txt").write_text("user: my name is Ann\nassistant: hello Ann\n")
    result = sd("chat", "[[@history]] What is my name? [[a]]", "--history", "chat.txt", "--json")
    assert json.loads(result.stdout)["history"] == [{"role": "user", "content": "my name is Ann"},
                                                    {"role": "assistant", "content": "hello Ann"}]


def test_chat_without_any_prompt_says_how() -> None:
    result = sd("chat", "--model", "test", input="")
    assert result.exit_code == 2
    assert result.stderr.startswith('error: no prompt: sd chat "Tell me a joke [[joke]]"')


# -- sd graph and sd flat ----------------------------------------------------------------------


def test_graph_prints_mermaid_of_segments_and_what_they_wait_for() -> None:
    result = sd("graph", EXAMPLES / "research_chain.sd")
    assert result.exit_code == 0
    assert result.stdout == (
        "flowchart TD\n"
        '    s0["<b>segment 0</b><br/>outline"]\n'
        '    s1["<b>segment 1: Draft</b><br/>draft"]\n'
        '    s2["<b>segment 2: Review</b><br/>improvements<br/>bool:ready"]\n'
        '    s0 -->|"outline"| s1\n'
        '    s1 -->|"draft"| s2\n'
    )


def test_graph_shows_independent_segments_guards_and_actions(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", """
        Bad? [[halt:g]] A [[a]]
        <checkpoint>"Quoted" & {{ x }}</checkpoint>
        B [[bool:b]] [[@timestamp]]
        <checkpoint>
        Both {{ a }} {{ b }} [[c]]
    """)
    assert sd("graph", template).stdout == (
        "flowchart TD\n"
        '    s0["<b>segment 0</b><br/>halt:g<br/>a"]\n'
        '    s1["<b>segment 1: #quot;Quoted#quot; #amp; {{ x }}</b><br/>bool:b<br/>@timestamp"]\n'
        '    s2["<b>segment 2</b><br/>c"]\n'
        '    s0 -->|"a"| s2\n'
        '    s1 -->|"b"| s2\n'
    )


def test_flat_inlines_includes_and_renders_nothing(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    write(tmp_path / "parts" / "system.sd", '<system>Be brief.</system>\n<include src="footer.sd"/>')
    write(tmp_path / "parts" / "footer.sd", "{# kept #}Thanks, {{ name }}.\n")
    template = write(tmp_path / "t.sd", '<include src="parts/system.sd"/>\nHello {{ name }} [[a]]\n')
    result = sd("flat", template)
    assert result.exit_code == 0
    assert result.stdout == "<system>Be brief.</system>\n{# kept #}Thanks, {{ name }}.\n\nHello {{ name }} [[a]]\n"
    import struckdown

    flat = struckdown.parse(result.stdout)
    assert flat.keys == struckdown.parse(template.read_text(), template_path=template).keys


def test_flat_reports_a_missing_include_where_it_is(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", 'Hi\n<include src="nope.sd"/>\n')
    result = sd("flat", template)
    assert result.exit_code == 2
    assert "t.sd:2:1: included file 'nope.sd' not found" in result.stderr


# -- sd test -----------------------------------------------------------------------------------


def test_test_sends_one_request_and_says_ok(use_model: Any) -> None:
    prompts: list[str] = []

    def reply(prompt: str, info: Any) -> str:
        prompts.append(prompt)
        return "OK"

    use_model(scripted(reply))
    result = sd("test")
    assert result.exit_code == 0
    assert result.stdout.startswith("ok: scripted answered 'OK' in ")  # cli_models' FunctionModel, by its model_name=
    assert prompts == ["Reply with the single word OK."]


def test_test_says_why_it_failed(use_model: Any) -> None:
    def broken(prompt: str, info: Any) -> str:
        raise RuntimeError("the server fell over")

    use_model(scripted(broken))
    result = sd("test")
    assert result.exit_code == 1
    assert result.stderr == "failed: scripted: RuntimeError: the server fell over\n"  # the probe's own slot unnamed


# -- sd batch ----------------------------------------------------------------------------------

ROWS = [
    ("I love it", "positive"), ("awful", "negative"), ("meh", "neutral"), ("great", "positive"),
    ("terrible", "negative"), ("fine", "neutral"),
]


def classify(prompt: str, info: Any) -> str:
    text = prompt.split("Classify: ", 1)[1]
    return {"I love it": "positive", "awful": "negative", "meh": "positive", "great": "positive",
            "terrible": "neutral", "fine": "neutral"}[text.strip()]


def rows_file(tmp_path: Path, rows: list[tuple[str, str]] = ROWS) -> Path:
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


def test_compare_prints_accuracy_f1_and_kappa(use_model: Any, tmp_path: Path) -> None:
    use_model(scripted(classify))
    template = write(tmp_path / "t.sd", "Classify: {{ text }} [[pick:label|positive,negative,neutral]]\n")
    result = sd("batch", template, rows_file(tmp_path), "-o", tmp_path / "out.csv", "--compare", "label")
    assert result.exit_code == 0, result.output
    report = result.stderr[result.stderr.index("compare label"):]
    assert report == (
        "compare label with answer label (pick): 6 rows\n"
        "  accuracy 0.667 · macro F1 0.656 · weighted F1 0.656 · Cohen's kappa 0.500\n"
        "  class     precision  recall     F1  support\n"
        "  negative      1.000   0.500  0.667        2\n"
        "  neutral       0.500   0.500  0.500        2\n"
        "  positive      0.667   1.000  0.800        2\n"
    )
    assert "warning: answers named like input columns are written beside them, not over them: 'label' as 'label_answer'" \
        in result.stderr
    with (tmp_path / "out.csv").open() as handle:
        out = list(csv.DictReader(handle))
    assert [(r["label"], r["label_answer"]) for r in out] == [(truth, classify(f"Classify: {text}", None))
                                                             for text, truth in ROWS]


def test_compare_a_named_slot_with_yes_no_labels(use_model: Any, tmp_path: Path) -> None:
    use_model(scripted(lambda prompt, info: "love" in prompt or "great" in prompt))
    template = write(tmp_path / "t.sd", "Classify: {{ text }} [[bool:happy]]\n")
    rows = [(t, "yes" if lbl == "positive" else "no") for t, lbl in ROWS]
    result = sd("batch", template, rows_file(tmp_path, rows), "--compare", "label=happy")
    assert result.exit_code == 0, result.output
    assert "compare label with answer happy (bool): 6 rows\n  accuracy 1.000 · macro F1 1.000" in result.stderr
    assert "Cohen's kappa 1.000" in result.stderr


def test_compare_checks_its_column_and_slot_before_running(use_model: Any, tmp_path: Path) -> None:
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or "x"))
    template = write(tmp_path / "t.sd", "A {{ text }} [[a]] B [[b]]\n")
    missing = sd("batch", template, rows_file(tmp_path), "--compare", "truth")
    assert missing.exit_code == 2 and "--compare 'truth': no such input column (columns: text, label)" in missing.stderr
    unclear = sd("batch", template, rows_file(tmp_path), "--compare", "label")
    assert unclear.exit_code == 2 and "say which slot with label=SLOT (slots: a, b)" in unclear.stderr
    assert prompts == []


def test_head_runs_the_first_rows_and_projects_all(use_model: Any, tmp_path: Path) -> None:
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or "positive"))
    template = write(tmp_path / "t.sd", "Classify: {{ text }} [[pick:sentiment|positive,negative,neutral]]\n")
    result = sd("batch", template, rows_file(tmp_path), "--head", "2", "-o", tmp_path / "out.jsonl", "--no-cache")
    assert result.exit_code == 0, result.output
    assert sorted(prompts) == sorted(["Classify: I love it", "Classify: awful"])  # the two rows run side by side (-j 8)
    head, projection = result.stderr.strip().splitlines()[-2:]
    assert head.startswith("--head 2: 2 of 6 rows in ") and head.endswith(" tokens, cost unknown")
    tokens = int(head.split(", ")[1].split(" ")[0].replace(",", ""))
    assert projection.startswith("projection for all 6 rows at -j 8: ~")
    assert f" · ~{tokens * 3:,} tokens · cost unknown (no prices for this model)" in projection
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2


def test_head_projects_cost_when_the_usage_has_one() -> None:
    from struckdown.cli.batch_report import projection

    entries = [{"usage": {"total_tokens": 100, "cost": 0.002}}, {"usage": {"total_tokens": 300, "cost": 0.004}}]
    # issue 40 item 15: the two rows ran side by side (N < -j), so 100 rows at -j 8 take
    # 100 / 8 row times (50 s), not 100 / 2 (200 s)
    assert projection(entries, 4.0, 100, 8) == (
        "--head 2: 2 of 100 rows in 4.0 s, 400 tokens, $0.0060\n"
        "projection for all 100 rows at -j 8: ~50.0 s · ~20,000 tokens · ~$0.30"
    )
    assert projection(entries * 4, 10.0, 100, 4).splitlines()[1].startswith(  # type: ignore[union-attr]
        "projection for all 100 rows at -j 4: ~2 min · "  # N >= -j: 8 rows, 4 at a time, in 10 s: 100 rows in 125 s
    )
    assert projection(entries, 4.0, 5, 8).splitlines()[1].startswith("projection for all 5 rows at -j 8: ~4.0 s · ")  # type: ignore[union-attr]
    assert projection([], 1.0, 100, 8) is None


# -- STRUCKDOWN_CACHE --------------------------------------------------------------------------


def test_struckdown_cache_in_the_cli(use_model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or "ok"))
    template = write(tmp_path / "t.sd", "Q [[a]]\n")
    monkeypatch.setenv("STRUCKDOWN_CACHE", "0")
    for _ in range(2):
        assert sd("run", template, "--json").exit_code == 0
    assert len(prompts) == 2 and not (tmp_path / "cache").exists()  # the CLI's default cache is off
    monkeypatch.setenv("STRUCKDOWN_CACHE", str(tmp_path / "mine"))
    for _ in range(2):
        assert sd("run", template, "--json").exit_code == 0
    assert len(prompts) == 3 and (tmp_path / "mine").is_dir()  # the second run was served from there
    assert str(tmp_path / "mine") in sd("cache", "stats").stdout

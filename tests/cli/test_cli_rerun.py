"""`sd run --journal` again after an edit, `--rerun-from`, and `sd batch --resume` after a
template edit (SPEC §25): only the slots the edit reaches send requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_models import scripted
from cli_support import plain_environment, sd, use_model  # noqa: F401

THREE = "Name a fruit. [[a]]\nName a colour. [[b]]\nName a city. [[c]]\n"


def echo(prompts: list[str]) -> Any:
    def reply(prompt: str, info: Any) -> str:
        prompts.append(prompt)
        return f"re {prompt}"

    return reply


def test_a_run_again_after_an_edit_shows_what_it_reused_and_old_to_new(tmp_path: Path, use_model: Any) -> None:
    prompts: list[str] = []
    use_model(scripted(echo(prompts)))
    template, journal = tmp_path / "t.sd", tmp_path / "run.journal"
    template.write_text(THREE, encoding="utf-8")
    first = sd("run", template, "--journal", journal, "--no-stream", "--no-cache")
    assert first.exit_code == 0, first.output
    assert len(prompts) == 3 and "reused" not in first.output  # a first run: nothing to report
    template.write_text(THREE.replace("a city", "a river"), encoding="utf-8")
    prompts.clear()
    again = sd("run", template, "--journal", journal, "--no-stream", "--no-cache")
    assert again.exit_code == 0, again.output
    assert prompts == ["Name a river."]
    lines = again.stdout.splitlines()
    assert lines[-2:] == ["reused 2 slots, re-ran 1", "  c: re Name a city. → re Name a river."]
    assert "1 request ·" in again.stdout


def test_rerun_from_runs_that_slot_and_the_rest(tmp_path: Path, use_model: Any) -> None:
    prompts: list[str] = []
    use_model(scripted(echo(prompts)))
    template, journal = tmp_path / "t.sd", tmp_path / "run.journal"
    template.write_text(THREE, encoding="utf-8")
    assert sd("run", template, "--journal", journal, "--no-stream", "--no-cache").exit_code == 0
    prompts.clear()
    again = sd("run", template, "--journal", journal, "--rerun-from", "b", "--no-stream", "--no-cache")
    assert again.exit_code == 0, again.output
    assert prompts == ["Name a colour.", "Name a city."]
    assert "reused 1 slot, re-ran 2" in again.stdout


def test_rerun_from_a_slot_that_is_not_there_is_refused_before_any_request(tmp_path: Path, use_model: Any) -> None:
    prompts: list[str] = []
    use_model(scripted(echo(prompts)))
    template, journal = tmp_path / "t.sd", tmp_path / "run.journal"
    template.write_text(THREE, encoding="utf-8")
    unknown = sd("run", template, "--journal", journal, "--rerun-from", "d")
    assert unknown.exit_code == 2
    assert unknown.stderr.strip() == f"error: --rerun-from 'd' is not a slot of {template} (slots: a, b, c)"
    alone = sd("run", template, "--rerun-from", "b")
    assert alone.exit_code == 2
    assert alone.stderr.strip() == "error: --rerun-from re-runs part of a journaled run: give --journal FILE too"
    assert prompts == [] and not journal.exists()


def test_batch_resume_after_a_template_edit_reruns_only_the_edited_slot(tmp_path: Path, use_model: Any) -> None:
    prompts: list[str] = []
    use_model(scripted(echo(prompts)))
    template = tmp_path / "t.sd"
    template.write_text("Row {{ id }}. [[answer]]\nAnd a word. [[word]]\n", encoding="utf-8")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(3)), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    args = ["batch", template, inputs, "-o", out, "--no-cache", "-j", "1"]
    assert sd(*args, "--keep-journal").exit_code == 0
    assert len(prompts) == 6
    template.write_text("Row {{ id }}. [[answer]]\nAnd a fun word. [[word]]\n", encoding="utf-8")
    prompts.clear()
    resumed = sd(*args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert prompts == ["And a fun word."] * 3  # each row's first slot answered from the journal
    assert "3 rows whose input or job (template, includes, model, tools) changed run again" in resumed.stderr
    assert "· 3 requests ·" in resumed.stderr and "reused 3 slots, re-ran 3" in resumed.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["answer"], r["word"]) for r in rows] == [(f"re Row {i}.", "re And a fun word.") for i in range(3)]

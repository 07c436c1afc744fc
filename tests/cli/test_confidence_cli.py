"""SPEC §27 in the CLI: `sd batch` writes each row's confidence in `_confidence`, and
`--compare` on a slot with `confidence=` reports its calibration (expected calibration
error over 10 bins, the reliability table, accepted and escalated accuracy) and, with
`--target-accuracy`, the cheapest threshold. Logprobs from a scripted OpenAI-compatible server.
"""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, sd, use_model  # noqa: F401
from logprob_server import LogprobServer, answer_tokens
from struckdown.cli.calibration import Scored, calibrate
from struckdown.models import openai_compatible

# (text, the label, the model's answer, its probability): 5 of 8 right, confidences known
ROWS = [
    ("a", "pos", "pos", 0.95), ("b", "pos", "pos", 0.95), ("c", "neg", "neg", 0.85), ("d", "neg", "pos", 0.85),
    ("e", "pos", "pos", 0.72), ("f", "neg", "pos", 0.55), ("g", "pos", "neg", 0.55), ("h", "neg", "neg", 0.65),
]
TEMPLATE = "Classify: {{ text }} [[pick:label|pos, neg, confidence=logprobs]]\n"


def by_text(body: dict[str, Any]) -> Any:
    text = body["messages"][-1]["content"].removeprefix("Classify: ")
    _, _, answer, probability = next(r for r in ROWS if r[0] == text)
    return answer_tokens(answer, probability)


def files(tmp_path: Path) -> tuple[Path, Path]:
    template = tmp_path / "t.sd"
    template.write_text(TEMPLATE, encoding="utf-8")
    rows = tmp_path / "rows.csv"
    rows.write_text("text,truth\n" + "".join(f"{t},{label}\n" for t, label, _, _ in ROWS), encoding="utf-8")
    return template, rows


def test_batch_writes_the_confidence_and_compare_reports_calibration(use_model: Any, tmp_path: Path) -> None:
    server = LogprobServer({"small": by_text})
    template, rows = files(tmp_path)
    with server.serving() as url:
        use_model(openai_compatible("small", url, None))
        result = sd("batch", template, rows, "-o", tmp_path / "out.csv", "--compare", "truth=label",
                    "--target-accuracy", "0.8")
    assert result.exit_code == 0, result.output
    report = result.stderr[result.stderr.index("compare truth"):]
    assert report == textwrap.dedent("""\
        compare truth with answer label (pick): 8 rows
          accuracy 0.625 · macro F1 0.619 · weighted F1 0.619 · Cohen's kappa 0.250
          class  precision  recall     F1  support
          neg        0.667   0.500  0.571        4
          pos        0.600   0.750  0.667        4
          calibration over 8 rows: expected calibration error 0.316 (10 bins)
          confidence    rows  mean conf  accuracy
          0.5–0.6         2      0.550     0.000
          0.6–0.7         1      0.650     1.000
          0.7–0.8         1      0.720     1.000
          0.8–0.9         2      0.850     0.500
          0.9–1.0         2      0.950     1.000
          accepted: 8 rows, accuracy 0.625 · escalated: 0 rows
          --target-accuracy 0.800: min_confidence=0.650 escalates 2 of 8 rows; the accepted rows' accuracy is 0.833
        """)
    with (tmp_path / "out.csv").open() as handle:
        out = list(csv.DictReader(handle))
    assert list(out[0]) == ["text", "truth", "label", "_confidence"]
    assert [(r["label"], round(float(r["_confidence"]), 6)) for r in out] == [(a, p) for _, _, a, p in ROWS]


def test_target_accuracy_needs_compare(tmp_path: Path) -> None:
    template, rows = files(tmp_path)
    result = sd("batch", template, rows, "--target-accuracy", "0.9")
    assert result.exit_code == 2 and "--target-accuracy needs --compare" in result.stderr


def test_calibration_of_accepted_and_escalated_rows() -> None:
    rows = [Scored(0.9, True, False), Scored(0.9, False, False), Scored(0.3, True, True), Scored(0.2, True, True),
            Scored(0.8, True, False)]
    result = calibrate(rows, target=0.99)
    assert result.rows == 3  # escalated rows' confidence belongs to an answer that was replaced
    assert result.accepted == (3, pytest.approx(2 / 3)) and result.escalated == (2, 1.0)
    assert result.ece == pytest.approx((2 * abs(0.5 - 0.9) + abs(1.0 - 0.8)) / 3)
    assert result.threshold is None  # 0.9 still holds a wrong answer
    assert calibrate(rows, target=0.6).threshold == (0.0, 0, pytest.approx(2 / 3))


def test_run_pauses_for_a_less_confident_answer_and_resume_takes_it(tmp_path: Path) -> None:
    template = tmp_path / "sky.sd"
    template.write_text("Sky? [[pick:c|red, blue, confidence=vote:3, temperature=1, min_confidence=0.9, "
                        "escalate=approve]] Then [[d]]\n", encoding="utf-8")
    state = tmp_path / "state.json"
    paused = sd("run", template, "--pause-to", state, "--model", "logprob_server:split_vote_model")
    assert paused.exit_code == 4, paused.output
    assert 'c.1  @answer(answer="red", confidence=0.6666666666666666, choices=["red", "blue"])' in paused.stderr
    wrong = sd("resume", state, "--answer", "d=blue", "--trust-state")
    assert wrong.exit_code == 2 and "no slot 'd' waits for an answer (waiting: c)" in wrong.stderr
    resumed = sd("resume", state, "--answer", "c=blue", "--json", "--model", "logprob_server:split_vote_model")
    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"c": "blue", "d": "after blue"}


def test_sd_run_shows_and_records_the_confidence(tmp_path: Path) -> None:
    template = tmp_path / "sky.sd"
    template.write_text("Sky? [[pick:c|red, blue, confidence=vote:3, temperature=1]]\n", encoding="utf-8")
    result = sd("run", template, "--model", "logprob_server:split_vote_model", "-o", tmp_path / "out.json")
    assert result.exit_code == 0, result.output
    assert "c: red\nc: confidence 0.67\n" in result.stdout
    record = json.loads((tmp_path / "out.json").read_text())
    assert record["answers"] == {"c": "red"} and record["confidence"] == {"c": pytest.approx(2 / 3)}
    assert record["usage"]["requests"] == 3 and "escalated" not in record


def test_escalate_approve_with_nobody_to_answer_is_refused_before_any_call(tmp_path: Path) -> None:
    """SPEC §29: a batch (any engine), no terminal, or --approve none: nobody answers."""
    template = tmp_path / "sky.sd"
    template.write_text("Sky? [[pick:c|red, blue, confidence=vote:3, min_confidence=0.9, escalate=approve]]\n",
                        encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"n": 1}\n')
    model = ["--model", "logprob_server:split_vote_model"]
    batch = sd("batch", template, rows, "-o", tmp_path / "out.jsonl", *model)
    assert batch.exit_code == 2 and not (tmp_path / "out.jsonl").exists()
    assert batch.stderr.strip().splitlines()[-1] == (
        "error: slot 'c' has escalate=approve, and sd batch has no person to answer it (its rows cannot pause): "
        "give escalate=a model instead, or --approve all to keep the model's answers"
    )
    workers = sd("batch", template, rows, "-o", tmp_path / "out.jsonl", "--workers", "2", *model)
    assert workers.exit_code == 2 and "and sd batch with --workers has no person" in workers.stderr
    alone = sd("run", template, *model)  # the test runner has no terminal
    assert alone.exit_code == 2
    assert alone.stderr.strip().splitlines()[-1] == (
        "error: slot 'c' has escalate=approve and there is no terminal to ask: give --pause-to FILE (decide later "
        "with sd resume), --approve all (keep the model's answers) or run it on a terminal"
    )
    none = sd("run", template, "--approve", "none", *model)
    assert none.exit_code == 2 and "escalate=approve and --approve none rejects every answer" in none.stderr
    kept = sd("run", template, "--approve", "all", "--json", *model)
    assert kept.exit_code == 0, kept.output

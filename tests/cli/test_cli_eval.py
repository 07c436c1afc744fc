"""`sd eval` (SPEC §23): the printed report, --json / --junit / --baseline / --blame, exit codes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from cli_support import plain_environment, sd, use_model  # noqa: F401
from scripted import Call, Script

TEMPLATE = "Summarise: {{ message }}\n[[summary]]\n\nHow urgent? [[pick:urgency|high,low]]\n"
EVAL = """\
repeat: 2
cases:
  - name: refund
    context: {message: refund please}
    expect: {summary: refund wanted, urgency: high}
  - name: other
    context: {message: money back}
    expect: {summary: refund wanted, urgency: high}
"""


def answer(call: Call) -> Any:
    if "Summarise" in call.last_user:
        return "refund wanted" if "refund" in call.last_user else "hello there"
    return "high" if "refund wanted" in " ".join(t for _, t in call.turns) else "low"


def files(tmp_path: Path, eval_text: str = EVAL) -> Path:
    (tmp_path / "triage.sd").write_text(TEMPLATE, encoding="utf-8")
    (tmp_path / "triage.eval.yaml").write_text(eval_text, encoding="utf-8")
    return tmp_path / "triage.sd"


def test_sd_eval_prints_the_report_writes_json_and_junit_and_exits_1_on_a_failing_case(
    tmp_path: Path, use_model: Any
) -> None:
    script = Script(answer)
    use_model(script.model("m"))
    template = files(tmp_path)

    result = sd("eval", template, "-m", "m", "--json", tmp_path / "r.json", "--junit", tmp_path / "r.xml", "--blame")

    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if not line.startswith("eval:")]
    assert lines[0] == "triage.sd · m"
    assert lines[1].startswith("  ✓ refund  2/2  100 %  [34–100 %]  $0.0000  ")
    assert lines[2].startswith("  ✗ other   0/2    0 %  [0–66 %]  $0.0000  ")
    assert lines[3:7] == [
        '      repeat 1: summary: expected "refund wanted", got "hello there"',
        '      repeat 1: urgency: expected "high", got "low"',
        '      repeat 2: summary: expected "refund wanted", got "hello there"',
        '      repeat 2: urgency: expected "high", got "low"',
    ]
    assert lines[7] == "  slots: summary 2/4 (50 %), urgency 2/4 (50 %)"
    assert lines[8].startswith("m: 1/2 cases pass, 0 flaky, 2/4 runs, $0.0000, ")
    assert lines[9:] == [
        "blame:",
        "  summary: causes 2 failures / only passes 0 on",
        "    fixing `summary` fixes 100 % of wrong `urgency` (2/2)",
        "  2 re-runs, 2 requests, $0.0000",
    ]
    assert len(script.calls) == 10
    data = json.loads((tmp_path / "r.json").read_text())
    assert [(c["name"], c["passed"], c["runs"]) for c in data["cases"]] == [("refund", 2, 2), ("other", 0, 2)]
    assert data["template"] == "triage.sd" and data["models"] == ["m"]
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert [c.get("name") for c in root.iter("testcase")] == ["refund", "other"]
    assert [c.find("failure") is not None for c in root.iter("testcase")] == [False, True]


def test_min_pass_and_a_baseline(tmp_path: Path, use_model: Any) -> None:
    use_model(Script(answer).model("m"))
    template = files(tmp_path)
    first = sd("eval", template, "-m", "m", "--json", tmp_path / "old.json")
    assert first.exit_code == 1

    fixed = Script(lambda call: "refund wanted" if "Summarise" in call.last_user else "high")
    use_model(fixed.model("m"))
    second = sd("eval", template, "-m", "m", "--baseline", tmp_path / "old.json")

    assert second.exit_code == 0, second.output
    assert second.output.splitlines()[-2:] == ["baseline: 0 regressed, 1 fixed, p = 1.00", "  fixed: other (m)"]
    lenient = sd("eval", template, "-m", "m", "--min-pass", "0")
    assert lenient.exit_code == 0


def test_a_broken_eval_file_exits_2_with_its_position_and_asks_nothing(tmp_path: Path, use_model: Any) -> None:
    script = Script(answer)
    use_model(script.model("m"))
    template = files(tmp_path, "cases:\n  - name: a\n    expect: {urgncy: high}\n")

    result = sd("eval", template, "-m", "m")

    assert result.exit_code == 2
    assert f"{tmp_path / 'triage.eval.yaml'}:3:22: expect.urgncy: triage.sd has no slot 'urgncy'" in result.output
    assert script.calls == []


def test_no_eval_file_and_a_bad_baseline_are_input_errors(tmp_path: Path, use_model: Any) -> None:
    use_model(Script(answer).model("m"))
    (tmp_path / "lone.sd").write_text(TEMPLATE)
    missing = sd("eval", tmp_path / "lone.sd")
    assert missing.exit_code == 2
    assert "no lone.eval.yaml beside it" in missing.output
    template = files(tmp_path)
    (tmp_path / "bad.json").write_text("{}")
    bad = sd("eval", template, "--baseline", tmp_path / "bad.json")
    assert bad.exit_code == 2
    assert "not a report written by sd eval --json" in bad.output


def test_cases_flag_names_another_eval_file(tmp_path: Path, use_model: Any) -> None:
    use_model(Script(answer).model("m"))
    template = files(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text("cases:\n  - name: one\n    context: {message: refund}\n    expect: {urgency: high}\n")
    result = sd("eval", template, "--cases", other, "-m", "m")
    assert result.exit_code == 0, result.output
    assert "✓ one  1/1" in result.output


def test_several_templates_a_flaky_case_and_a_budget_stop(tmp_path: Path, use_model: Any) -> None:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.usage import RequestUsage

    answers = iter(["yes", "no", "yes", "no"])
    use_model(Script(lambda call: next(answers)).model("m"))
    (tmp_path / "coin.sd").write_text("Say yes [[answer]]")
    (tmp_path / "coin.eval.yaml").write_text("cases:\n  - name: coin\n    expect: {answer: 'yes'}\n")
    (tmp_path / "dice.sd").write_text("Say yes again [[answer]]")
    (tmp_path / "dice.eval.yaml").write_text("cases:\n  - name: dice\n    expect: {answer: 'yes'}\n")

    result = sd("eval", tmp_path / "coin.sd", tmp_path / "dice.sd", "-m", "m", "--repeat", "2", "-j", "1",
                "--min-pass", "0.5")

    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if not line.startswith("eval:")]
    assert lines[0] == "coin.sd · m"
    assert lines[1].startswith("  ~ coin  1/2   50 %  [9–91 %]  $0.0000  ") and lines[1].endswith("  flaky")
    assert lines[2] == '      repeat 2: answer: expected "yes", got "no"'
    assert "dice.sd · m" in lines
    assert any(line.startswith("  ~ dice  1/2") for line in lines)  # flaky, but 1 of 2 meets --min-pass 0.5

    priced = Script(lambda call: ModelResponse(parts=[TextPart("yes")], usage=RequestUsage(input_tokens=1_000_000)))
    use_model(priced.model("priced"))
    (tmp_path / "prices.json").write_text(json.dumps({"priced": {"input": 1.0, "output": 1.0}}))
    stopped = sd("eval", tmp_path / "coin.sd", "-m", "priced", "--repeat", "3", "-j", "1", "--max-cost", "0.5",
                 "--prices", tmp_path / "prices.json")
    assert stopped.exit_code == 1
    assert "the budget was spent: runs not started count as failed" in stopped.output
    assert "      repeat 2: run: not run: the budget was spent" in stopped.output
    assert len(priced.calls) == 1

"""sd.evaluate (SPEC §23): assertion kinds, repeats and flaky cases, baseline, blame, budget."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd
from scripted import Call, Script, Tools
from struckdown.eval import EvalFileError
from struckdown.eval.stats import mcnemar, wilson

TWO_SLOTS = "Summarise: {{ message }}\n[[summary]]\n\nHow urgent? [[pick:urgency|high,low]]\n"


def summary_then_urgency(call: Call) -> Any:
    """`summary` echoes 'refund wanted' for a refund message; `urgency` reads the summary."""
    if "Summarise" in call.last_user:
        return "refund wanted" if "refund" in call.last_user else "hello there"
    history = " ".join(text for _, text in call.turns)
    return "high" if "refund wanted" in history else "low"


def case(name: str, message: str, **expect: Any) -> dict[str, Any]:
    return {"name": name, "context": {"message": message}, "expect": expect}


def test_two_cases_repeated_give_pass_rates_wilson_intervals_and_slot_accuracy() -> None:
    script = Script(summary_then_urgency)
    cases = {"repeat": 3, "cases": [
        case("refund", "refund please", summary="refund wanted", urgency="high"),
        case("other", "money back", summary="refund wanted", urgency="high"),
    ]}

    report = sd.evaluate(TWO_SLOTS, cases, model=script.model("m"))

    assert len(script.calls) == 12  # 2 cases × 3 repeats × 2 slots: no response cache
    assert [(c.name, c.model, c.passed, c.runs, c.flaky) for c in report.cases] == [
        ("refund", "m", 3, 3, False), ("other", "m", 0, 3, False),
    ]
    assert report.pass_rate == 0.5
    assert report.by_slot == {"summary": (3, 6), "urgency": (3, 6)}
    assert [c.name for c in report.failing()] == ["other"]
    data = json.loads(report.to_json())
    assert data["cases"][0]["interval"] == [0.438503, 1.0]
    assert data["cases"][1]["failures"][0] == {
        "repeat": 1, "assertion": "summary", "reason": 'expected "refund wanted", got "hello there"'
    }
    assert data["summary"]["m"]["passing"] == 1 and data["summary"]["m"]["passed_runs"] == 3


def test_a_case_that_passes_some_repeats_is_flaky_and_min_pass_decides_failing() -> None:
    answers = iter(["yes", "no", "yes", "yes"])
    script = Script(lambda call: next(answers))
    cases = {"cases": [{"name": "coin", "expect": {"answer": "yes"}}]}

    report = sd.evaluate("Say yes [[answer]]", cases, model=script.model(), repeat=4, concurrency=1, min_pass=0.75)

    (only,) = report.cases
    assert (only.passed, only.runs, only.flaky, only.pass_rate) == (3, 4, True, 0.75)
    assert report.failing() == []
    strict = sd.evaluate("Say yes [[answer]]", cases, model=Script(lambda call: "no").model(), repeat=2)
    assert [c.name for c in strict.failing()] == ["coin"]


@pytest.mark.parametrize(
    ("expect", "answer", "reason"),
    [
        ("refund", "refund", None),
        ("refund", "Refund", 'expected "refund", got "Refund"'),
        ({"one_of": ["a", "b"]}, "b", None),
        ({"one_of": ["a", "b"]}, "c", 'expected one of ["a", "b"], got "c"'),
        ({"contains": "REFUND"}, "a refund now", None),
        ({"contains": ["refund", "order"]}, "a refund now", "does not contain 'order': \"a refund now\""),
        ({"not_contains": "sorry"}, "Sorry!", "contains 'sorry': \"Sorry!\""),
        ({"matches": r"^A\d+$"}, "A12", None),
        ({"matches": r"^A\d+$"}, "B12", "does not match '^A\\\\d+$': \"B12\""),
        ({"length": {"min": 2, "max": 4}}, "abcde", "length 5, expected {'min': 2, 'max': 4}"),
        ({"length": 3}, "abc", None),
        ({"type": "str"}, "x", None),
    ],
)
def test_text_assertion_kinds(expect: Any, answer: str, reason: str | None) -> None:
    report = sd.evaluate("Go [[reply]]", [{"name": "c", "expect": {"reply": expect}}], model=Script(lambda c: answer).model())
    assert report.outcomes[0].assertions == {"reply": reason}


@pytest.mark.parametrize(
    ("expect", "reason"),
    [
        ({"min": 2, "max": 4}, None),
        ({"min": 4}, "3 is below the minimum 4"),
        ({"max": 2}, "3 is above the maximum 2"),
        ({"type": "int"}, None),
        ({"type": "str"}, "expected a str, got int"),
        (3, None),
        ("3", None),  # a table's text gold equals the typed answer
    ],
)
def test_number_assertion_kinds(expect: Any, reason: str | None) -> None:
    report = sd.evaluate("Score [[int:score]]", [{"name": "c", "expect": {"score": expect}}], model=Script(lambda c: 3).model())
    assert report.outcomes[0].assertions == {"score": reason}


def test_json_subset_of_a_record_answer() -> None:
    template = "Extract [[json:order]]"
    model = Script(lambda c: {"id": "A1", "items": [{"sku": "x", "n": 2}, {"sku": "y", "n": 1}]}).model()
    good = sd.evaluate(template, [{"name": "c", "expect": {"order": {"id": "A1", "items": [{"sku": "y"}]}}}], model=model)
    bad = sd.evaluate(template, [{"name": "c", "expect": {"order": {"items": [{"sku": "z"}]}}}], model=model)
    assert good.outcomes[0].assertions == {"order": None}
    assert bad.outcomes[0].assertions == {"order": 'items: no item matches {"sku": "z"}'}


def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: paid"


def issue_refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded"


def test_tool_trajectory_called_not_called_order_and_args() -> None:
    def answer(call: Call) -> Any:
        done = [t for r, t in call.turns if r == "return"]
        if not done:
            return Tools([("lookup_order", {"order_id": "A1"})])
        if len(done) == 1:
            return Tools([("issue_refund", {"order_id": "A1"})])
        return "done"

    template = "Handle it [[reply|use_tools=true, max_iter=5]]"
    expectations = [
        ({"called": ["lookup_order", "issue_refund"], "order": ["lookup_order", "issue_refund"]}, None),
        ({"not_called": ["issue_refund"]}, "issue_refund was called"),
        ({"order": ["issue_refund", "lookup_order"]},
         "calls not in the order issue_refund → lookup_order (calls: lookup_order, issue_refund)"),
        ({"args": {"lookup_order": {"order_id": "A1"}}}, None),
        ({"args": {"lookup_order": {"order_id": "B2"}}},
         'no call of lookup_order had arguments {"order_id": "B2"} (calls: [{"order_id": "A1"}])'),
        ({"called": ["cancel"]}, "cancel was not called (calls: lookup_order, issue_refund)"),
    ]
    cases = [{"name": f"t{i}", "expect": {"tools": e}} for i, (e, _) in enumerate(expectations)]
    report = sd.evaluate(template, cases, model=Script(answer).model(), tools=[lookup_order, issue_refund])
    assert [o.assertions["tools"] for o in report.outcomes] == [reason for _, reason in expectations]


def test_halted_and_its_reason_and_usage_limits() -> None:
    template = "Check {{ message }} [[halt:check]]\n\nReply to {{ message }} [[reply]]"

    def answer(call: Call) -> Any:
        if call.last_user.startswith("Check"):
            bad = "attack" in call.last_user
            return {"triggered": bad, "reason": "an attack" if bad else ""}
        return "fine"

    cases = [
        case("stops", "attack now", halted={"reason": "attack"}),
        case("runs", "hello", halted=False, usage={"max_requests": 2}),
        case("too many", "hello", usage={"max_requests": 1}),
        case("wrong reason", "attack now", halted={"reason": "spam"}),
    ]
    report = sd.evaluate(template, cases, model=Script(answer).model())
    assert [o.assertions for o in report.outcomes] == [
        {"halted": None},
        {"halted": None, "usage": None},
        {"usage": "2 requests, at most 1 expected"},
        {"halted": "the reason 'an attack' does not contain 'spam'"},
    ]


def test_a_judge_grades_on_its_own_model_and_its_cost_is_kept_apart() -> None:
    judge = Script(lambda call: "polite" in call.last_user and "Thank you" in call.last_user)
    cases = [
        case("kind", "x", reply={"judge": "polite and brief", "model": "grader"}),
        case("rude", "y", reply={"judge": "polite and brief", "model": "grader", "contains": "Thank"}),
    ]
    replies = {"x": "Thank you!", "y": "Go away"}
    model = Script(lambda call: replies[call.last_user.split()[-1]])

    report = sd.evaluate("Reply to {{ message }} [[reply]]", cases, model=model.model(),
                         judge_models={"grader": judge.model("grader")})

    assert len(judge.calls) == 1  # the rude answer failed `contains` already: no judge asked
    assert "Rubric: polite and brief" in judge.calls[0].last_user
    assert [o.assertions for o in report.outcomes] == [
        {"reply": None}, {"reply": "does not contain 'Thank': \"Go away\""},
    ]


def test_a_model_matrix_reports_each_model() -> None:
    good, bad = Script(summary_then_urgency), Script(lambda call: "low" if "urgent" in call.last_user else "nope")
    cases = [case("refund", "refund please", summary="refund wanted", urgency="high")]
    report = sd.evaluate(TWO_SLOTS, cases, models={"good": good.model(), "bad": bad.model()})
    assert [(c.model, c.passed) for c in report.cases] == [("good", 1), ("bad", 0)]
    assert report.slot_accuracy("bad") == {"summary": (0, 1), "urgency": (0, 1)}


def test_blame_gives_the_first_slot_gold_and_reruns_only_what_reads_it() -> None:
    script = Script(summary_then_urgency)
    cases = [
        case("ok", "refund please", summary="refund wanted", urgency="high"),
        case("wrong summary", "money back", summary="refund wanted", urgency="high"),
    ]

    report = sd.evaluate(TWO_SLOTS, cases, model=script.model(), blame=True)

    assert len(script.calls) == 5  # 4 first runs + urgency again: the summary is not asked twice
    rerun = script.calls[-1]
    assert ("assistant", "refund wanted") in rerun.turns and "How urgent?" in rerun.last_user
    assert report.blame.lines() == [
        "summary: causes 1 failure / only passes 0 on",
        "  fixing `summary` fixes 100 % of wrong `urgency` (1/1)",
    ]
    assert report.blame.to_dict()["slots"]["summary"]["later"] == {"urgency": {"wrong": 1, "fixed": 1, "broken": 0}}
    assert (report.blame.reruns, report.blame.requests) == (1, 1)


def test_baseline_counts_regressed_and_fixed_with_mcnemar() -> None:
    names = [f"c{i}" for i in range(8)]
    old_pass = {"c0", "c1", "c2"}  # c0, c1 regress; c3..c7 get fixed
    new_pass = {"c2", "c3", "c4", "c5", "c6", "c7"}
    template = "{{ name }} [[answer]]"

    def run(passing: set[str]) -> Any:
        model = Script(lambda call: "ok" if call.last_user.split()[0] in passing else "no").model("m")
        return sd.evaluate(template, [{"name": n, "context": {"name": n}, "expect": {"answer": "ok"}} for n in names],
                           model=model, baseline=None)

    old = json.loads(run(old_pass).to_json())
    model = Script(lambda call: "ok" if call.last_user.split()[0] in new_pass else "no").model("m")
    report = sd.evaluate(template, [{"name": n, "context": {"name": n}, "expect": {"answer": "ok"}} for n in names]
                         + [{"name": "fresh", "context": {"name": "fresh"}, "expect": {"answer": "ok"}}],
                         model=model, baseline=old)
    assert report.baseline.line() == "2 regressed, 5 fixed, 1 new (not in the baseline), p = 0.45"
    assert report.baseline.changes[("c0", "m")] == "regressed"
    assert report.baseline.changes[("c2", "m")] == "unchanged"
    assert report.baseline.changes[("c3", "m")] == "fixed"
    assert report.baseline.changes[("fresh", "m")] == "new"


def test_budget_stops_new_runs_and_they_count_as_not_run() -> None:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.usage import RequestUsage

    script = Script(lambda call: ModelResponse(parts=[TextPart("x")], usage=RequestUsage(input_tokens=1_000_000)))
    cases = [{"name": f"c{i}", "expect": {"answer": "x"}} for i in range(3)]
    report = sd.evaluate("Go [[answer]]", cases, model=script.model("priced"), concurrency=1, max_cost=0.5,
                         prices={"priced": {"input": 1.0, "output": 1.0}})
    assert report.budget_stopped is True
    assert [o.error for o in report.outcomes] == [None, "not run: the budget was spent", "not run: the budget was spent"]
    assert len(script.calls) == 1


def test_junit_has_one_testcase_per_case_and_model() -> None:
    cases = [case("refund", "refund please", summary="refund wanted"), case("other", "money back", summary="x")]
    report = sd.evaluate(TWO_SLOTS, cases, model=Script(summary_then_urgency).model("m"), repeat=2)
    root = ET.fromstring(report.to_junit())
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "2", "1")
    cases_xml = root.findall("testsuite/testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases_xml] == [("<template>.m", "refund"), ("<template>.m", "other")]
    failure = cases_xml[1].find("failure")
    assert failure is not None
    assert failure.get("message") == "passed 0/2 (95 % CI 0.00–0.66), below min-pass 1"
    assert failure.text == (
        'repeat 1: summary: expected "x", got "hello there"\nrepeat 2: summary: expected "x", got "hello there"'
    )
    assert cases_xml[0].find("failure") is None


def test_statistics() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    low, high = wilson(3, 3)
    assert (round(low, 4), high) == (0.4385, 1.0)
    low, high = wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert mcnemar(0, 0) == 1.0
    assert round(mcnemar(2, 5), 4) == 0.4531
    assert round(mcnemar(0, 6), 5) == 0.03125


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cases:\n  - name: a\n    expect: {x: 1}\n  - name: a\n    expect: {x: 2}\n",
         "4:5: name: 'a' names two cases (the first at line 2)"),
        ("repeat: 0\ncases: []\n", "1:9: repeat: a whole number of at least 1, not 0"),
        ("cases:\n  - name: a\n    expect:\n      x: {type: str, between: 3}\n",
         "4:10: expect.x: unknown check 'between'; expected equals, one_of, contains"),
        ("cases:\n  - name: a\n    expect: {tools: {calls: [a]}}\n",
         "3:21: expect.tools: a mapping of called, not_called, order, args"),
        ("cases:\n  - name: a\n    contxt: {}\n    expect: {x: 1}\n",
         "3:5: contxt: unknown key in the case 1; expected one of name, context, expect, rows"),
        ("cases:\n  - name: a\n", "2:5: expect: case 'a' has no `expect:`"),
        ("cases: [\n", "2:1: yaml:"),
        ("cases:\n  - name: a\n    expect: {y: 1}\n", "3:17: expect.y: <template> has no slot 'y' (its slots: x;"),
        ("cases:\n  - name: a\n    expect:\n      x: {matches: '('}\n", "4:10: expect.x: matches: not a regular expression"),
    ],
)
def test_a_malformed_eval_file_is_a_positioned_error_before_any_request(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.eval.yaml"
    path.write_text(text, encoding="utf-8")
    script = Script(lambda call: "1")
    with pytest.raises(EvalFileError) as raised:
        sd.evaluate("Go [[x]]", path, model=script.model())
    assert str(raised.value).startswith(f"{path}:{message}"), str(raised.value)
    assert script.calls == []


def test_rows_of_a_table_become_cases_with_expect_columns_as_gold(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("message,expect.summary\nrefund please,refund wanted\nhi,refund wanted\n")
    (tmp_path / "t.eval.yaml").write_text("cases:\n  - rows: rows.csv\n")
    report = sd.evaluate(TWO_SLOTS, tmp_path / "t.eval.yaml", model=Script(summary_then_urgency).model())
    assert [(c.name, c.passed) for c in report.cases] == [("rows row 1", 1), ("rows row 2", 0)]


def test_blame_reruns_what_reads_the_slot_and_restores_a_segment_that_does_not() -> None:
    template = (
        "Summarise: {{ message }}\n[[summary]]\n\nHow urgent? [[pick:urgency|high,low]]\n<checkpoint>\n"
        "Language of {{ message }}? [[language]]\n<checkpoint>\nRoute {{ summary }} [[team]]\n"
    )

    def answer(call: Call) -> Any:
        user = call.last_user
        if user.startswith("Language"):
            return "en"
        if user.startswith("Route"):
            return "billing" if "refund wanted" in user else "general"
        return summary_then_urgency(call)

    script = Script(answer)
    expect = {"summary": "refund wanted", "urgency": "high", "language": "fr", "team": "billing"}
    report = sd.evaluate(template, [case("c", "money back", **expect)], model=script.model(), blame=True)

    asked = [call.last_user.split()[0] for call in script.calls]
    assert sorted(asked[:4]) == ["How", "Language", "Route", "Summarise:"]
    assert sorted(asked[4:]) == ["How", "Route"]  # the language segment reads no summary: restored, not asked
    assert report.blame.to_dict()["slots"] == {
        "summary": {"causes": 2, "only_passes": 0, "later": {
            "urgency": {"wrong": 1, "fixed": 1, "broken": 0}, "team": {"wrong": 1, "fixed": 1, "broken": 0}}},
    }  # `language` is wrong too, but no gold slot reaches it


def test_a_later_slot_that_only_passes_on_a_wrong_answer_is_counted() -> None:
    def answer(call: Call) -> Any:
        if "Summarise" in call.last_user:
            return "hello there"
        history = " ".join(text for _, text in call.turns)
        return "low" if "refund wanted" in history else "high"  # right only with the wrong summary

    report = sd.evaluate(TWO_SLOTS, [case("c", "x", summary="refund wanted", urgency="high")],
                         model=Script(answer).model(), blame=True)
    assert report.blame.lines() == ["summary: causes 0 failures / only passes 1 on"]


def test_blame_stops_at_the_budget() -> None:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.usage import RequestUsage

    def answer(call: Call) -> Any:
        return ModelResponse(parts=[TextPart(str(summary_then_urgency(call)))], usage=RequestUsage(input_tokens=100_000))

    cases = [case(f"c{i}", "money back", summary="refund wanted", urgency="high") for i in range(3)]
    script = Script(answer)
    report = sd.evaluate(TWO_SLOTS.replace("pick:urgency|high,low", "urgency"), cases, model=script.model("priced"),
                         concurrency=1, max_cost=0.75, blame=True, prices={"priced": {"input": 1.0, "output": 0.0}})
    assert report.budget_stopped is False and report.pass_rate == 0
    # $0.10 a request: the runs spend 0.60; the first re-run 0.10; the second crosses the 0.05 left
    # (it fails, its request counted); the third does not start
    assert (report.blame.reruns, report.blame.failed, report.blame.skipped) == (1, 1, 1)
    assert (report.blame.requests, round(report.blame.cost, 6)) == (2, 0.2)
    assert len(script.calls) == 8


def test_the_json_report_holds_each_runs_answers() -> None:
    report = sd.evaluate(TWO_SLOTS, [case("c", "refund please", summary="refund wanted")],
                         model=Script(summary_then_urgency).model())
    (detail,) = json.loads(report.to_json())["cases"][0]["runs_detail"]
    assert {k: detail[k] for k in ("repeat", "passed", "answers", "error", "requests", "cost")} == {
        "repeat": 1, "passed": True, "answers": {"summary": "refund wanted", "urgency": "high"}, "error": None,
        "requests": 2, "cost": 0.0,
    }


def test_python_contexts_keep_their_values() -> None:
    import datetime as dt

    seen: list[str] = []
    script = Script(lambda call: seen.append(call.last_user) or "ok")
    report = sd.evaluate("On {{ day.year }} [[answer]]", [{"name": "c", "context": {"day": dt.date(2024, 5, 1)},
                                                            "expect": {"answer": "ok"}}], model=script.model())
    assert report.pass_rate == 1.0 and seen == ["On 2024"]


def test_the_models_of_the_matrix_run_beside_each_other() -> None:
    import asyncio

    from scripted import MEET_GUARD_S

    arrived = {"a": asyncio.Event(), "b": asyncio.Event()}

    def meets(me: str, other: str) -> Any:
        async def gate(call: Call) -> None:  # each model's request waits for the other's: sequential models hang
            arrived[me].set()
            await asyncio.wait_for(arrived[other].wait(), MEET_GUARD_S)
        return gate

    a, b = Script(lambda c: "ok", gate=meets("a", "b")), Script(lambda c: "ok", gate=meets("b", "a"))
    report = sd.evaluate("Go [[answer]]", [{"name": "c", "expect": {"answer": "ok"}}],
                         models={"a": a.model(), "b": b.model()}, concurrency=2)
    assert [(c.model, c.passed) for c in report.cases] == [("a", 1), ("b", 1)]


def test_a_judge_that_fails_fails_its_check_and_the_report_is_still_made() -> None:
    """Issue 48 item 5: a judge model's failure ended the whole eval, naming the judge
    template's slot `passes`; now it is that check's failure, and every other case reports."""

    def down(call: Call) -> Any:
        raise RuntimeError("judge backend down")

    cases = [
        case("kind", "x", reply={"judge": "polite", "model": "grader"}),
        case("brief", "y", reply={"length": {"max": 50}}),
    ]
    model = Script(lambda call: "Thank you!")
    report = sd.evaluate("Reply to {{ message }} [[reply]]", cases, model=model.model("m"),
                         judge_models={"grader": Script(down).model("grader")})  # fmt: skip
    assert [(o.case, o.assertions, o.error) for o in report.outcomes] == [
        ("kind", {"reply": "the judge (grader) failed: RuntimeError: judge backend down"}, None),
        ("brief", {"reply": None}, None),
    ]
    assert "passes" not in report.to_json()


def test_a_baseline_saved_under_another_model_name_says_nothing_matched() -> None:
    """Issue 48 item 6: every case was unmatched (`new` only in the JSON) and the line said
    "0 regressed, 0 fixed"; it says there is nothing to compare, naming both runs' models."""
    cases = [{"name": n, "expect": {"answer": "ok"}} for n in ("a", "b")]
    old = json.loads(sd.evaluate("[[answer]]", cases, model=Script(lambda call: "ok").model("old-model")).to_json())
    report = sd.evaluate("[[answer]]", cases, model=Script(lambda call: "no").model("m"), baseline=old)
    assert report.baseline.line() == (
        "nothing to compare: no case of this run is in the baseline (its models: old-model; this run's: m)"
    )
    assert json.loads(report.to_json())["baseline"] == {
        "regressed": 0, "fixed": 0, "new": 2, "p_value": 1.0,
        "cases": [{"name": "a", "model": "m", "change": "new"}, {"name": "b", "model": "m", "change": "new"}],
    }  # fmt: skip

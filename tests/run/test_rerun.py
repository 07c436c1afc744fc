"""Incremental re-runs (SPEC §25): a journaled run again after an edit reuses every slot whose
request is unchanged and re-runs the first changed slot, what follows it in its conversation
and the segments that read its answers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from scripted import Call, Script, Tools  # noqa: E402

THREE = "Name a fruit. [[a]]\nName a colour. [[b]]\nName a city. [[c]]\n"


def echo(call: Call) -> str:
    return f"re: {call.last_user}"


def asked(script: Script) -> list[str]:
    return [call.last_user for call in script.calls]


def run(template: str, journal: Path, context: dict[str, Any] | None = None, **options: Any) -> tuple[Any, Script]:
    script = Script(options.pop("answer", echo))
    result = sd.complete(template, context or {}, model=script.model(), journal=journal, **options)
    return result, script


def test_a_first_run_reports_nothing_and_an_unchanged_run_sends_no_request(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    first, script = run(THREE, journal)
    assert len(script.calls) == 3 and first.reruns is None
    again, script = run(THREE, journal)
    assert script.calls == []
    assert dict(again) == dict(first)
    assert again.reruns == sd.RerunReport(reused=("a", "b", "c"), rerun=(), previous={})
    assert all(again.results[k].reused and again.results[k].usage == sd.Usage() for k in "abc")
    assert again.usage.requests == 0


def test_an_edit_of_the_last_slot_sends_one_request(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    run(THREE, journal)
    result, script = run(THREE.replace("a city", "a river"), journal)
    assert asked(script) == ["Name a river."]
    assert [turn for turn in script.calls[0].turns] == [
        ("user", "Name a fruit."), ("assistant", "re: Name a fruit."),
        ("user", "Name a colour."), ("assistant", "re: Name a colour."), ("user", "Name a river."),
    ]
    assert result["c"] == "re: Name a river."
    assert result.reruns.reused == ("a", "b") and result.reruns.rerun == ("c",)
    assert result.reruns.previous == {"c": "re: Name a city."}
    assert (result.reruns.reused_count, result.reruns.rerun_count) == (2, 1)
    assert result.reruns.summary() == "reused 2 slots, re-ran 1"


def test_an_edit_of_the_first_slot_reruns_every_slot_of_its_conversation(tmp_path: Path) -> None:
    """The later slots re-run even though their own requests would be the same (the model
    gives the first slot the same answer): what follows a changed slot is not trusted."""
    journal = tmp_path / "run.journal"

    def same_first(call: Call) -> str:
        return "apple" if "fruit" in call.last_user else echo(call)

    run(THREE, journal, answer=same_first)
    result, script = run(THREE.replace("Name a fruit.", "Name one fruit."), journal, answer=same_first)
    assert asked(script) == ["Name one fruit.", "Name a colour.", "Name a city."]
    assert result.reruns.reused == () and result.reruns.rerun == ("a", "b", "c")


SEGMENTS = (
    "Name a fruit. [[a]]\n<checkpoint>\n"
    "Greet {{ name }}. [[greeting]]\nAnd say bye. [[bye]]\n<checkpoint>\n"
    "Praise the {{ a }}. [[praise]]\n"
)


def test_a_context_value_read_only_by_a_later_segment_reruns_only_that_segment(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    first, script = run(SEGMENTS, journal, {"name": "Ann"})
    assert len(script.calls) == 4
    result, script = run(SEGMENTS, journal, {"name": "Bob"})
    assert sorted(asked(script)) == ["And say bye.", "Greet Bob."]
    assert result.reruns.rerun == ("greeting", "bye")
    assert set(result.reruns.reused) == {"a", "praise"}
    assert result["praise"] == first["praise"]


def test_a_segment_that_reads_a_rerun_answer_runs_again(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    fruit = ["apple"]

    def answer(call: Call) -> str:
        return fruit[0] if "fruit" in call.last_user else echo(call)

    run(SEGMENTS, journal, {"name": "Ann"}, answer=answer)
    fruit[0] = "pear"
    result, script = run(SEGMENTS.replace("Name a fruit.", "Name any fruit."), journal, {"name": "Ann"}, answer=answer)
    assert sorted(asked(script)) == ["Name any fruit.", "Praise the pear."]
    assert set(result.reruns.reused) == {"greeting", "bye"}
    assert result.reruns.previous == {"a": "apple", "praise": "re: Praise the apple."}


def test_a_segment_reruns_even_when_the_answer_it_reads_came_out_the_same(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"

    def answer(call: Call) -> str:
        return "apple" if "fruit" in call.last_user else echo(call)

    run(SEGMENTS, journal, {"name": "Ann"}, answer=answer)
    result, script = run(SEGMENTS.replace("Name a fruit.", "Name any fruit."), journal, {"name": "Ann"}, answer=answer)
    assert sorted(asked(script)) == ["Name any fruit.", "Praise the apple."]


TOOLED = "Name a fruit. [[a]]\nLook up order 7. [[order|use_tools=true]]\n<checkpoint>\nSay hi. [[hi]]\n"


def order_answer(call: Call) -> Any:
    if call.tool_names and not any(role == "return" for role, _ in call.turns):
        return Tools([("lookup", {"order": "7"})])
    return echo(call) if not call.tool_names else f"found: {[t for r, t in call.turns if r == 'return'][-1]}"


def test_an_edit_of_a_tools_code_reruns_the_slots_that_call_it(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    ran: list[str] = []

    def lookup(order: str) -> str:
        """Look an order up."""
        ran.append(order)
        return f"order {order}: open"

    run(TOOLED, journal, tools=[sd.readonly(lookup)], answer=order_answer)
    assert ran == ["7"]
    again, script = run(TOOLED, journal, tools=[sd.readonly(lookup)], answer=order_answer)
    # the same code: reused, no request; its read-only call ran again and agreed (SPEC §29)
    assert script.calls == [] and ran == ["7", "7"]

    def lookup(order: str) -> str:  # type: ignore[no-redef]  # the tool's code edited
        """Look an order up."""
        ran.append(order)
        return f"order {order}: shipped"

    result, script = run(TOOLED, journal, tools=[sd.readonly(lookup)], answer=order_answer)
    assert ran == ["7", "7", "7"]  # its call ran again
    assert len(script.calls) == 2  # the tool call, then the answer: the two requests of `order`
    assert result["order"] == "found: order 7: shipped"
    assert result.reruns.rerun == ("order",) and set(result.reruns.reused) == {"a", "hi"}


def test_an_identical_write_tool_call_replays_from_the_journal(tmp_path: Path) -> None:
    """The slot runs again (its prompt changed) and makes the same call: answered from the
    journal, the tool does not run a second time."""
    journal = tmp_path / "run.journal"
    refunds: list[str] = []

    def lookup(order: str) -> str:
        """Refund an order (moves money)."""
        refunds.append(order)
        return f"refunded {order}"

    run(TOOLED, journal, tools=[lookup], answer=order_answer)
    result, script = run(TOOLED.replace("order 7.", "order 7 now."), journal, tools=[lookup], answer=order_answer)
    assert refunds == ["7"]
    assert len(script.calls) == 2 and result["order"] == "found: refunded 7"
    assert result.results["order"].tool_calls[0].output == "refunded 7"


def test_a_model_change_reruns_every_slot(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    run(THREE, journal)
    script = Script(echo)
    result = sd.complete(THREE, model=script.model(), journal=journal, settings={"temperature": 0.5})
    assert len(script.calls) == 3 and result.reruns.rerun == ("a", "b", "c")


def test_rerun_from_forces_that_slot_and_every_slot_after_it(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    run(SEGMENTS, journal, {"name": "Ann"})
    result, script = run(SEGMENTS, journal, {"name": "Ann"}, rerun_from="bye")
    assert sorted(asked(script)) == ["And say bye.", "Praise the re: Name a fruit.."]
    assert result.reruns.reused == ("a", "greeting") and set(result.reruns.rerun) == {"bye", "praise"}


def test_rerun_from_an_unknown_slot_is_an_error_before_any_request(tmp_path: Path) -> None:
    script = Script(echo)
    with pytest.raises(ValueError, match=r"rerun_from='by' is not a slot of this template .*did you mean 'bye'\?"):
        sd.complete(SEGMENTS, {"name": "Ann"}, model=script.model(), journal=tmp_path / "j", rerun_from="by")
    with pytest.raises(ValueError, match=r"rerun_from='bye' re-runs part of a journaled run: give journal="):
        sd.complete(SEGMENTS, {"name": "Ann"}, model=script.model(), rerun_from="bye")
    with pytest.raises(ValueError, match="rerun_from= takes a slot's name"):
        sd.complete(SEGMENTS, {"name": "Ann"}, model=script.model(), journal=tmp_path / "j", rerun_from=3)
    assert script.calls == [] and not (tmp_path / "j").exists()


def test_together_members_are_reused_one_by_one(tmp_path: Path) -> None:
    template = "<together>\nA fruit? [[x]]\nA colour? [[y]]\n</together>\nCombine. [[z]]\n"
    journal = tmp_path / "run.journal"
    run(template, journal)
    result, script = run(template.replace("A colour?", "A shade?"), journal)
    assert sorted(asked(script)) == ["A shade?", "Combine."]
    assert result.reruns.reused == ("x",)


def test_a_batch_reuses_each_rows_unchanged_slots(tmp_path: Path) -> None:
    journal = tmp_path / "batch.journal"
    rows = [{"n": 1}, {"n": 2}]
    template = "Count to {{ n }}. [[count]]\nName a city. [[city]]\n"
    script = Script(echo)
    sd.complete_batch(template, rows, model=script.model(), journal=journal)
    assert len(script.calls) == 4
    script = Script(echo)
    results = sd.complete_batch(template.replace("a city", "a river"), rows, model=script.model(), journal=journal)
    assert asked(script) == ["Name a river.", "Name a river."]
    assert [r.reruns.reused for r in results] == [("count",), ("count",)]
    assert [r["count"] for r in results] == ["re: Count to 1.", "re: Count to 2."]


def test_the_journal_holds_one_answer_line_per_slot_that_ran(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    run(THREE, journal)
    run(THREE.replace("a city", "a river"), journal)
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    answers = [(line["answer"], line["result"]["output"]) for line in lines if "answer" in line]
    assert answers == [("a", "re: Name a fruit."), ("b", "re: Name a colour."), ("c", "re: Name a city."),
                       ("c", "re: Name a river.")]


def test_a_cut_answer_line_is_run_again(tmp_path: Path) -> None:
    """A kill in the middle of writing an answer line: that slot runs again, nothing breaks."""
    journal = tmp_path / "run.journal"
    run(THREE, journal)
    text = journal.read_text()
    journal.write_text(text[: len(text) - 40])  # the last answer line (c) cut short
    result, script = run(THREE, journal)
    assert asked(script) == ["Name a city."] and result.reruns.reused == ("a", "b")


def test_an_answer_with_a_lone_surrogate_is_journaled_and_reused(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    first, _ = run(THREE, journal, answer=lambda call: "odd \udfff answer")
    again, script = run(THREE, journal)
    assert script.calls == [] and again["c"] == first["c"] == "odd \udfff answer"


def test_reused_slots_are_completed_events_of_the_stream(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    run(THREE, journal)
    script = Script(echo)
    events = list(sd.complete_incremental(THREE.replace("a city", "a river"), model=script.model(), journal=journal))
    done = [(e.slot, e.result.reused) for e in events if e.type == "slot_completed"]
    assert done == [("a", True), ("b", True), ("c", False)]
    assert events[-1].type == "processing_complete" and events[-1].result.reruns.rerun == ("c",)


def test_a_guard_is_reused_like_a_slot(tmp_path: Path) -> None:
    template = "Is this rude: hello? [[halt:rude]]\nName a fruit. [[a]]\n"
    journal = tmp_path / "run.journal"

    def answer(call: Call) -> Any:
        return {"triggered": False, "reason": "polite"} if "rude" in call.last_user else echo(call)

    run(template, journal, answer=answer)
    result, script = run(template.replace("a fruit", "a pear"), journal, answer=answer)
    assert asked(script) == ["Name a pear."]
    assert result.results["rude"].reused and result.reruns.reused == ("rude",)

"""Durable runs (SPEC §25): each tool effect exactly once with a journal (`journal=`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

import struckdown as sd
from struckdown.errors import InputError

TEMPLATE = "Refund order R7. [[reply|use_tools=true, max_iter=3]]"


class Crash(BaseException):
    """The process dying in the middle of a tool call (no handler catches it)."""


def refund_model(requests: list[str], *, fail_after_tool: int | None = None) -> FunctionModel:
    """Calls refund(R7), then answers with what it returned. `fail_after_tool=N`: the
    request after the tool call fails with HTTP N once."""
    failed: list[bool] = []

    def reply(messages: Any, info: Any) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        requests.append("answer" if returns else "call")
        if not returns:
            return ModelResponse(parts=[ToolCallPart("refund", {"order": "R7"})])
        if fail_after_tool is not None and not failed:
            failed.append(True)
            raise ModelHTTPError(fail_after_tool, "scripted", {"error": {"message": "scripted failure"}})
        return ModelResponse(parts=[TextPart(f"done: {returns[-1].content}")])

    return FunctionModel(reply)


class Shop:
    """The refund tool and what it did: `refunds` are its side effects, `ids` the effect
    ids it was given; `crash` makes the next call die after its side effect."""

    def __init__(self) -> None:
        self.refunds: list[str] = []
        self.ids: list[str] = []
        self.crash = False

    def tool(self) -> Any:
        def refund(ctx: RunContext[Any], order: str) -> str:
            """Refund an order. Moves money."""
            self.ids.append(getattr(ctx, "effect_id", None))
            self.refunds.append(order)
            if self.crash:
                self.crash = False
                raise Crash
            return f"refunded {order} ({len(self.refunds)})"

        return refund


def records(journal: Path) -> list[dict[str, Any]]:
    """The header and the effect lines (the slots' answer lines, for re-runs, left out)."""
    return [json.loads(line) for line in journal.read_text().splitlines() if not line.startswith('{"answer"')]


def crashed_run(shop: Shop, journal: Path) -> None:
    shop.crash = True
    with pytest.raises((Crash, BaseExceptionGroup)):
        sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    assert [r.get("state") for r in records(journal)] == [None, "started"]


def test_a_finished_effect_is_answered_from_the_journal(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    first = sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    requests: list[str] = []
    unchanged = sd.complete(TEMPLATE, model=refund_model(requests), tools=[shop.tool()], journal=journal)
    assert requests == [] and unchanged.results["reply"].reused  # the same request: the answer reused
    second = sd.complete(TEMPLATE, model=refund_model(requests), tools=[shop.tool()], journal=journal,
                         rerun_from="reply")
    assert shop.refunds == ["R7"]
    assert first["reply"] == second["reply"] == "done: refunded R7 (1)"
    assert requests == ["call", "answer"]  # the model asked again; the tool did not run again
    lines = records(journal)
    assert [line.get("state") for line in lines] == [None, "started", "done"]
    assert lines[0]["journal"] == "struckdown effects"
    assert lines[1].pop("sig") != lines[2].pop("sig")  # each line signed (SPEC §29)
    assert lines[1] == {"effect": shop.ids[0], "state": "started", "tool": "refund", "arguments": {"order": "R7"},
                        "slot": "reply", "row": None}
    assert lines[2]["output"] == "refunded R7 (1)" and lines[2]["ok"] is True


def test_without_a_journal_the_tool_runs_each_time(tmp_path: Path) -> None:
    shop = Shop()
    sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()])
    sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()])
    assert shop.refunds == ["R7", "R7"]


def test_an_interrupted_call_goes_to_the_reconcile_hook(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    crashed_run(shop, journal)
    asked: list[tuple[str, dict[str, Any]]] = []

    def look_up(effect_id: str, arguments: dict[str, Any]) -> str | None:
        asked.append((effect_id, arguments))
        return f"refunded {arguments['order']} (found at the bank)"

    tool = sd.effect(reconcile=look_up)(shop.tool())
    result = sd.complete(TEMPLATE, model=refund_model([]), tools=[tool], journal=journal)
    assert shop.refunds == ["R7"]  # the crashed call's effect, once
    assert asked == [(shop.ids[0], {"order": "R7"})]
    assert result["reply"] == "done: refunded R7 (found at the bank)"
    assert records(journal)[-1]["state"] == "done"
    again = sd.complete(TEMPLATE, model=refund_model([]), tools=[tool], journal=journal)
    assert again["reply"] == result["reply"] and len(asked) == 1 and shop.refunds == ["R7"]


def test_reconcile_none_means_it_did_not_happen_and_the_call_runs(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    crashed_run(shop, journal)

    async def look_up(effect_id: str, arguments: dict[str, Any]) -> None:
        return None

    result = sd.complete(TEMPLATE, model=refund_model([]), tools=[sd.effect(reconcile=look_up)(shop.tool())],
                         journal=journal)
    assert result["reply"] == "done: refunded R7 (2)"
    assert shop.ids == [shop.ids[0]] * 2  # the run again has the same effect id (its idempotency key)


def test_an_interrupted_call_without_a_hook_pauses_marked_outcome_unknown(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    crashed_run(shop, journal)
    with pytest.raises(sd.Paused) as stopped:
        sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    (request,) = stopped.value.requests
    assert (request.tool_name, request.arguments, request.outcome) == ("refund", {"order": "R7"}, "unknown")
    assert request.label() == 'outcome unknown: did refund(order="R7") happen?'
    assert request.kind == "unknown_outcome"
    assert shop.refunds == ["R7"]
    state = json.loads(json.dumps(stopped.value.state))
    assert state["requests"][0]["outcome"] == "unknown" and state["options"]["journal"] == str(journal)
    assert state["requests"][0]["kind"] == "unknown_outcome"
    denied = sd.resume(state, {request.id: "It was refunded already."}, model=refund_model([]), tools=[shop.tool()])
    assert denied["reply"] == "done: It was refunded already." and shop.refunds == ["R7"]
    approved = sd.resume(state, {request.id: True}, model=refund_model([]), tools=[shop.tool()])
    assert approved["reply"] == "done: refunded R7 (2)" and shop.ids == [shop.ids[0]] * 2


def test_approve_decides_an_unknown_outcome_inline(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    crashed_run(shop, journal)
    seen: list[sd.ApprovalRequest] = []

    def decide(request: sd.ApprovalRequest) -> bool | str:
        seen.append(request)
        return "Do not refund twice."

    result = sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal, approve=decide)
    assert [r.outcome for r in seen] == ["unknown"] and result["reply"] == "done: Do not refund twice."
    assert shop.refunds == ["R7"]


@pytest.mark.parametrize("as_json", [False, True])
def test_happened_answers_with_the_given_result_and_never_runs_the_call(tmp_path: Path, as_json: bool) -> None:
    text = "refunded R7 (at the bank)"
    decision = {"happened": text} if as_json else sd.Happened(text)
    shop, journal = Shop(), tmp_path / "run.journal"
    crashed_run(shop, journal)
    with pytest.raises(sd.Paused) as stopped:
        sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    state = json.loads(json.dumps(stopped.value.state))
    result = sd.resume(state, {stopped.value.requests[0].id: decision}, model=refund_model([]), tools=[shop.tool()])
    assert result["reply"] == "done: refunded R7 (at the bank)" and shop.refunds == ["R7"]
    last = records(journal)[-1]
    assert (last["state"], last["output"], last["decided"], last["by"]) == ("done", "refunded R7 (at the bank)",
                                                                           "happened", "user")
    again = sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal, rerun_from="reply")
    assert again["reply"] == "done: refunded R7 (at the bank)" and shop.refunds == ["R7"]


def test_happened_is_refused_for_a_call_whose_outcome_is_known(tmp_path: Path) -> None:
    shop = Shop()
    with pytest.raises(ValueError, match="says the call happened, but its outcome is not unknown"):
        sd.complete("Refund order R7. [[reply|use_tools=true, max_iter=3, approve=refund]]", model=refund_model([]),
                    tools=[shop.tool()], approve=lambda request: sd.Happened())
    assert shop.refunds == []


def test_an_answer_built_on_an_undecided_call_is_never_reused(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    crashed_run(shop, journal)
    denied = sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal, approve=False)
    assert denied["reply"] == "done: The user denied this call."
    with pytest.raises(sd.Paused) as stopped:  # the call stays undecided: asked again, not the old answer reused
        sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    assert stopped.value.requests[0].kind == "unknown_outcome" and shop.refunds == ["R7"]


def test_a_changed_approval_decision_reruns_the_denied_slot(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    template = "Refund order R7. [[reply|use_tools=true, max_iter=3, approve=refund]]"
    denied = sd.complete(template, model=refund_model([]), tools=[shop.tool()], journal=journal, approve=False)
    assert denied["reply"] == "done: The user denied this call." and shop.refunds == []
    allowed = sd.complete(template, model=refund_model([]), tools=[shop.tool()], journal=journal, approve=True)
    assert allowed["reply"] == "done: refunded R7 (1)" and not allowed.results["reply"].reused
    assert shop.refunds == ["R7"]


def test_a_retried_request_runs_the_effect_once(tmp_path: Path) -> None:
    shop, journal, requests = Shop(), tmp_path / "run.journal", []
    result = sd.complete(TEMPLATE, model=refund_model(requests, fail_after_tool=503), tools=[shop.tool()],
                         journal=journal, retries=1, retry_base_delay=0)
    assert requests == ["call", "answer", "answer"] and result["reply"] == "done: refunded R7 (1)"
    assert shop.refunds == ["R7"]
    assert [line.get("state") for line in records(journal)] == [None, "started", "done"]


def test_a_fallback_and_another_model_keep_the_effect_id(tmp_path: Path) -> None:
    shop, journal, first, backup = Shop(), tmp_path / "run.journal", [], []
    result = sd.complete(TEMPLATE, model=refund_model(first, fail_after_tool=400), tools=[shop.tool()],
                         journal=journal, fallback=[refund_model(backup)])
    assert first == ["call", "answer"] and backup == ["call", "answer"]  # the slot restarted on the backup
    assert result["reply"] == "done: refunded R7 (1)" and shop.refunds == ["R7"]
    other: list[str] = []
    again = sd.complete(TEMPLATE, model=refund_model(other), tools=[shop.tool()], journal=journal, rerun_from="reply")
    assert other == ["call", "answer"] and again["reply"] == "done: refunded R7 (1)" and shop.refunds == ["R7"]


def test_batch_rows_have_their_own_effects(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "batch.journal"
    rows = [{}, {}]
    results = sd.complete_batch(TEMPLATE, rows, model=refund_model([]), tools=[shop.tool()], journal=journal)
    assert [r["reply"] for r in results] == ["done: refunded R7 (1)", "done: refunded R7 (2)"] or \
        sorted(r["reply"] for r in results) == ["done: refunded R7 (1)", "done: refunded R7 (2)"]
    started = [line for line in records(journal) if line.get("state") == "started"]
    assert sorted(line["row"] for line in started) == [0, 1] and len(set(shop.ids)) == 2
    sd.complete_batch(TEMPLATE, rows, model=refund_model([]), tools=[shop.tool()], journal=journal)
    assert shop.refunds == ["R7", "R7"]  # the second batch answers both rows from the journal


def test_a_readonly_tool_is_not_journaled(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    sd.complete(TEMPLATE, model=refund_model([]), tools=[sd.readonly(shop.tool())], journal=journal)
    assert [line.get("state") for line in records(journal)] == [None]


def test_a_journal_another_process_writes_is_refused(tmp_path: Path) -> None:
    import fcntl
    import os

    journal = tmp_path / "run.journal"
    fd = os.open(f"{journal}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(sd.StruckdownError, match="is being written by another process"):
            sd.complete(TEMPLATE, model=refund_model([]), tools=[Shop().tool()], journal=journal)
    finally:
        os.close(fd)


def test_journal_takes_a_path() -> None:
    with pytest.raises(ValueError, match="journal= takes a file path, not int"):
        sd.complete(TEMPLATE, model=refund_model([]), journal=3)  # type: ignore[arg-type]


def test_a_tool_takes_the_effect_id_as_a_parameter(tmp_path: Path) -> None:
    keys: list[str] = []
    schemas: list[Any] = []

    def refund(order: str, effect_id: str) -> str:
        """Refund an order. Moves money."""
        keys.append(effect_id)
        return f"refunded {order}"

    def reply(messages: Any, info: Any) -> ModelResponse:
        schemas.append(info.function_tools[0].parameters_json_schema)
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("refund", {"order": "R7"})])
        return ModelResponse(parts=[TextPart(f"done: {returns[-1].content}")])

    journal = tmp_path / "run.journal"
    result = sd.complete(TEMPLATE, model=FunctionModel(reply), tools=[refund], journal=journal)
    assert result["reply"] == "done: refunded R7"
    assert list(schemas[0]["properties"]) == ["order"]  # the model never sees effect_id
    started = [line for line in records(journal) if line.get("state") == "started"]
    assert keys == [started[0]["effect"]]
    sd.complete(TEMPLATE, model=FunctionModel(reply), tools=[refund])
    assert keys[1] == ""  # no journal: no effect id


def test_a_file_that_is_not_a_journal_is_refused_untouched(tmp_path: Path) -> None:
    shop, table = Shop(), tmp_path / "w.csv"
    table.write_text("order,amount\nR7,49\n")
    with pytest.raises(InputError) as refused:
        sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=table)
    assert str(refused.value) == (f"journal {table} exists and is not a struckdown journal (line 1 is not a journal's "
                                  "header); give a new file (or one struckdown wrote as a journal)")
    assert table.read_text() == "order,amount\nR7,49\n" and shop.refunds == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.csv"]  # no lock file left behind


def test_a_header_cut_short_by_a_kill_is_a_journal(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    journal.write_text('{"journal": "struckdown eff')
    first = sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    again = sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    assert first["reply"] == again["reply"] == "done: refunded R7 (1)" and again.results["reply"].reused


def test_a_line_nested_too_deeply_is_refused_naming_its_line(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    journal.write_text('{"journal": "struckdown effects", "version": 1, "job": "ab"}\n' + "[" * 100000 + "]" * 100000
                       + "\n")
    with pytest.raises(InputError, match=rf"^journal {journal} line 2: nested too deeply to be a journal line"):
        sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    assert shop.refunds == []


def test_replayed_and_reconciled_calls_say_so_in_their_events(tmp_path: Path) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    crashed_run(shop, journal)
    tool = sd.effect(reconcile=lambda effect_id, arguments: "refunded R7 (found at the bank)")(shop.tool())

    def sources(**options: Any) -> list[Any]:
        events = list(sd.complete_incremental(TEMPLATE, model=refund_model([]), tools=[tool], journal=journal,
                                              stream=False, **options))
        return [(e.tool_name, e.source) for e in events if e.type == "tool_completed"]

    assert sources() == [("refund", "reconciled: happened")]
    assert sources(rerun_from="reply") == [("refund", "replayed from the journal")]
    fresh = tmp_path / "fresh.journal"
    events = list(sd.complete_incremental(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=fresh,
                                          stream=False))
    assert [e.source for e in events if e.type == "tool_completed"] == [None]  # it ran


def test_a_reused_slot_runs_again_when_a_readonly_tool_answers_differently(tmp_path: Path) -> None:
    journal, stock = tmp_path / "run.journal", {"R7": 3}
    asked: list[str] = []

    @sd.readonly
    def in_stock(order: str) -> int:
        """How many are in stock."""
        return stock[order]

    def model(messages: Any, info: Any) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        asked.append("answer" if returns else "call")
        if not returns:
            return ModelResponse(parts=[ToolCallPart("in_stock", {"order": "R7"})])
        return ModelResponse(parts=[TextPart(f"{returns[-1].content} left")])

    first = sd.complete(TEMPLATE, model=FunctionModel(model), tools=[in_stock], journal=journal)
    same = sd.complete(TEMPLATE, model=FunctionModel(model), tools=[in_stock], journal=journal)
    assert first["reply"] == same["reply"] == "3 left" and same.results["reply"].reused
    assert asked == ["call", "answer"]  # the tool ran again and agreed: no request
    stock["R7"] = 0
    changed = sd.complete(TEMPLATE, model=FunctionModel(model), tools=[in_stock], journal=journal)
    assert changed["reply"] == "0 left" and not changed.results["reply"].reused
    assert asked == ["call", "answer", "call", "answer"]
    assert changed.reruns is not None and changed.reruns.rerun == ("reply",)


def test_an_edit_to_a_helper_a_tool_uses_reruns_its_slot(tmp_path: Path) -> None:
    journal = tmp_path / "run.journal"
    source = tmp_path / "shop_tools.py"
    import importlib.util

    def load(rate: str) -> Any:
        source.write_text(f"RATE = {rate}\n\ndef price(order: str) -> float:\n    '''The price.'''\n"
                          "    return total(order)\n\ndef total(order):\n    return 10 * RATE\n")
        spec = importlib.util.spec_from_file_location(f"shop_tools_{rate.replace('.', '_')}", source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return sd.readonly(module.price)

    def model(messages: Any, info: Any) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("price", {"order": "R7"})])
        return ModelResponse(parts=[TextPart(f"costs {returns[-1].content}")])

    first = sd.complete(TEMPLATE, model=FunctionModel(model), tools=[load("1.0")], journal=journal)
    edited = sd.complete(TEMPLATE, model=FunctionModel(model), tools=[load("2.25")], journal=journal)
    assert (first["reply"], edited["reply"]) == ("costs 10.0", "costs 22.5")
    assert not edited.results["reply"].reused


@pytest.mark.parametrize("edit", ["answer", "effect"])
def test_an_edited_journal_line_is_refused_naming_its_line(tmp_path: Path, edit: str) -> None:
    shop, journal = Shop(), tmp_path / "run.journal"
    sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    lines = journal.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if line.startswith('{"answer"' if edit == "answer" else '{"effect"')
                  and ('"done"' in line or edit == "answer"))
    lines[number] = lines[number].replace("refunded R7 (1)", "refunded R7 (1) and a bonus")
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=rf"^journal {journal} line {number + 1}: its signature does not match"):
        sd.complete(TEMPLATE, model=refund_model([]), tools=[shop.tool()], journal=journal)
    assert shop.refunds == ["R7"]

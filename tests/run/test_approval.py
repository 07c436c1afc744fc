"""Human approval of tool calls (SPEC §12): who declares it, deciding inline, pausing,
resuming, guards before anyone is asked, one decision per identical call."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import ApprovalRequired

import struckdown as sd
from scripted import Call, Script, Tools

DENIED = "The user denied this call."


class Ledger:
    """Tools that record every body that ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

        def lookup(order_id: str) -> str:
            """Look an order up."""
            self.ran.append(("lookup", {"order_id": order_id}))
            return f"order {order_id}: 30 EUR"

        def issue_refund(order_id: str, amount: float) -> str:
            """Refund an order."""
            self.ran.append(("issue_refund", {"order_id": order_id, "amount": amount}))
            return f"refunded {amount:g} for {order_id}"

        def send_email(to: str) -> str:
            """Send an email."""
            self.ran.append(("send_email", {"to": to}))
            return "sent"

        self.lookup = sd.readonly(lookup)
        self.issue_refund = issue_refund
        self.send_email = send_email

    def tools(self, *, refund: Any = None) -> list[Any]:
        return [self.lookup, refund if refund is not None else self.issue_refund, self.send_email]


def agent(first: Tools, final: str = "done") -> Any:
    """An agent slot's model: `first` on its first request, then `final: <tool returns>`;
    other slots answer `ok: <their question>`."""

    def answer(call: Call) -> Any:
        if not call.tool_names:
            return "ok: " + call.last_user.splitlines()[-1]
        returns = [text for role, text in call.turns if role == "return"]
        slot_calls = [text for role, text in call.turns if role == "call"]
        if not slot_calls:
            return first
        return f"{final}: " + " | ".join(returns)

    return answer


REFUND = Tools([("lookup", {"order_id": "A1"}), ("issue_refund", {"order_id": "A1", "amount": 30})])
TEMPLATE = "Greet. [[intro]]\n\nRefund A1. [[reply|use_tools=true]]\n\nSum up {{ reply }}. [[after]]"


def events_of(template: str, script: Script, **options: Any) -> list[Any]:
    return list(sd.complete_incremental(template, model=script.model(), **options))


def kinds(events: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        if e.type == "approval_requested":
            out.append((e.type, e.request_id, e.tool_name, e.arguments))
        elif e.type == "approval_decided":
            out.append((e.type, e.request_id, e.approved, e.message))
        elif e.type in ("tool_started", "tool_completed"):
            out.append((e.type, e.tool_name))
    return out


# -- declaring approval ------------------------------------------------------------------
def test_needs_approval_denied_call_never_runs_and_the_model_reads_the_denial() -> None:
    ledger = Ledger()
    script = Script(agent(REFUND))
    asked: list[sd.ApprovalRequest] = []
    events = events_of(
        TEMPLATE, script, tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)),
        approve=lambda request: asked.append(request) or False,
    )
    assert asked == [sd.ApprovalRequest("reply.1", "reply", "issue_refund", {"order_id": "A1", "amount": 30})]
    assert ledger.ran == [("lookup", {"order_id": "A1"})]  # the denied body never ran
    assert kinds(events) == [
        ("tool_started", "lookup"), ("tool_completed", "lookup"),
        ("approval_requested", "reply.1", "issue_refund", {"order_id": "A1", "amount": 30}),
        ("approval_decided", "reply.1", False, DENIED),
    ]
    after = script.calls[2]  # the agent slot's second request
    assert after.turns[-2:] == [("return", "order A1: 30 EUR"), ("return", DENIED)]
    result = events[-1].result
    assert result["reply"] == f"done: order A1: 30 EUR | {DENIED}"
    assert [c.tool_name for c in result.results["reply"].tool_calls] == ["lookup"]


def test_pydantic_ai_requires_approval_and_a_reason_string_the_model_reads() -> None:
    ledger = Ledger()
    script = Script(agent(REFUND))
    refund = Tool(ledger.issue_refund, requires_approval=True)
    result = sd.complete(
        TEMPLATE, model=script.model(), tools=ledger.tools(refund=refund), approve=lambda r: "over the 20 EUR limit"
    )
    assert ledger.ran == [("lookup", {"order_id": "A1"})]
    assert script.calls[2].turns[-1] == ("return", "over the 20 EUR limit")
    assert result["reply"] == "done: order A1: 30 EUR | over the 20 EUR limit"


@pytest.mark.parametrize(
    ("option", "asked"),
    [
        ("approve=issue_refund", ["issue_refund"]),
        ('approve="issue_refund, send_email"', ["issue_refund", "send_email"]),
        ('approve="*"', ["issue_refund", "send_email"]),  # every tool but the @readonly lookup
    ],
)
def test_the_template_adds_approval_by_name_list_or_star(option: str, asked: list[str]) -> None:
    ledger = Ledger()
    first = Tools([("lookup", {"order_id": "A1"}), ("issue_refund", {"order_id": "A1", "amount": 5}),
                   ("send_email", {"to": "a@b"})])
    script = Script(agent(first))
    seen: list[str] = []
    sd.complete(
        f"Go [[reply|use_tools=true, {option}]]", model=script.model(), tools=ledger.tools(),
        approve=lambda r: seen.append(r.tool_name) or True,
    )
    assert seen == asked
    assert sorted(name for name, _ in ledger.ran) == ["issue_refund", "lookup", "send_email"]


def test_a_template_cannot_remove_the_hosts_approval() -> None:
    ledger = Ledger()
    first = Tools([("issue_refund", {"order_id": "A1", "amount": 5}), ("send_email", {"to": "a@b"})])
    script = Script(agent(first))
    seen: list[str] = []
    sd.complete(
        "Go [[reply|use_tools=true, approve=send_email]]", model=script.model(),
        tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)),
        approve=lambda r: seen.append(r.tool_name) or True,
    )
    assert seen == ["issue_refund", "send_email"]


def test_an_approve_name_that_is_no_tool_is_an_error_before_any_model_call() -> None:
    ledger = Ledger()
    script = Script(agent(REFUND))
    with pytest.raises(sd.TemplateSyntaxError) as info:
        sd.complete("Intro [[a]]\nGo [[reply|use_tools=true, approve=issue_refnd]]", model=script.model(),
                    tools=ledger.tools(), approve=True)
    error = info.value
    assert (error.line, error.column) == (2, 36)
    assert "approve= names 'issue_refnd', which is not a tool of this run" in str(error)
    assert error.hint is not None and "did you mean 'issue_refund'?" in error.hint
    assert script.calls == []
    with pytest.raises(sd.TemplateSyntaxError, match="bad value for approve"):
        sd.parse("[[reply|use_tools=true, approve=true]]")


def test_approval_wins_over_readonly_for_the_guard_join() -> None:
    """A read-only tool that needs approval: the slot waits for the guard before it
    starts (it would run beside it otherwise), so a trip leaves it unasked and unsent."""
    ledger = Ledger()
    script = Script(lambda call: {"triggered": True, "reason": "abuse"} if call.schema else REFUND)
    asked: list[Any] = []
    with pytest.raises(sd.Halted):
        sd.complete(
            "Abusive? [[halt:g]]\nGo [[reply|use_tools=true, approve=lookup]]", model=script.model(),
            tools=[ledger.lookup], approve=lambda r: asked.append(r) or True,
        )
    assert [c.schema is not None for c in script.calls] == [True]  # only the guard's request
    assert asked == [] and ledger.ran == []


# -- deciding inline ---------------------------------------------------------------------
def test_an_async_callback_approves_and_the_call_runs() -> None:
    ledger = Ledger()
    script = Script(agent(REFUND))

    async def decide(request: sd.ApprovalRequest) -> bool:
        await asyncio.sleep(0)
        return request.arguments["amount"] <= 50

    events = events_of(TEMPLATE, script, tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)),
                       approve=decide)
    assert ledger.ran == [("lookup", {"order_id": "A1"}), ("issue_refund", {"order_id": "A1", "amount": 30})]
    assert kinds(events)[2:] == [
        ("approval_requested", "reply.1", "issue_refund", {"order_id": "A1", "amount": 30}),
        ("approval_decided", "reply.1", True, None),
        ("tool_started", "issue_refund"), ("tool_completed", "issue_refund"),
    ]
    assert events[-1].result["reply"] == "done: order A1: 30 EUR | refunded 30 for A1"


def test_the_environment_default_decides_and_a_call_keyword_overrides_it() -> None:
    ledger = Ledger()
    env = sd.Environment(tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)), approve=False)
    script = Script(agent(REFUND))
    assert env.complete(TEMPLATE, model=script.model())["reply"].endswith(DENIED)
    assert env.complete(TEMPLATE, model=script.model(), approve=True)["reply"].endswith("refunded 30 for A1")


def test_a_callback_answer_that_is_no_decision_is_an_error() -> None:
    ledger = Ledger()
    script = Script(agent(REFUND))
    with pytest.raises(ValueError, match="the decision for 'reply.1' is 3"):
        sd.complete(TEMPLATE, model=script.model(), tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)),
                    approve=lambda r: 3)
    assert ("issue_refund", {"order_id": "A1", "amount": 30}) not in ledger.ran


# -- pausing and resuming ------------------------------------------------------------------
def paused_run(template: str, script: Script, **options: Any) -> sd.Paused:
    with pytest.raises(sd.Paused) as info:
        sd.complete(template, model=script.model(), **options)
    return info.value


def test_without_approve_the_run_pauses_with_requests_results_and_a_json_state() -> None:
    ledger = Ledger()
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))
    script = Script(agent(REFUND))
    paused = paused_run(TEMPLATE, script, tools=tools)
    assert isinstance(paused, sd.StruckdownError)
    assert paused.requests == [sd.ApprovalRequest("reply.1", "reply", "issue_refund", {"order_id": "A1", "amount": 30})]
    assert dict(paused.results) == {"intro": "ok: Greet."}
    assert paused.results.paused is paused
    assert paused.results.usage.requests == 2  # the intro, and the reply's request that asked
    assert ledger.ran == [("lookup", {"order_id": "A1"})]
    assert json.loads(json.dumps(paused.state)) == paused.state
    assert str(paused) == "paused: 1 tool call awaits approval (reply.1: issue_refund)"


def test_the_incremental_api_ends_with_processing_complete_paused() -> None:
    ledger = Ledger()
    script = Script(agent(REFUND))
    events = events_of(TEMPLATE, script, tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)))
    final = events[-1]
    assert (final.type, final.early_termination, final.paused) == ("processing_complete", False, True)
    assert final.to_dict()["paused"] is True
    assert [r.id for r in final.result.paused.requests] == ["reply.1"]
    assert kinds(events)[-1] == ("approval_requested", "reply.1", "issue_refund", {"order_id": "A1", "amount": 30})
    assert "slot_completed" not in [e.type for e in events if getattr(e, "slot", None) == "reply"]


def test_resume_gives_the_result_of_an_inline_approval_without_sending_anything_twice() -> None:
    ledger = Ledger()
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))
    inline_script = Script(agent(REFUND))
    inline = sd.complete(TEMPLATE, model=inline_script.model(), tools=tools, approve=True)
    inline_ran = list(ledger.ran)

    ledger.ran.clear()
    script = Script(agent(REFUND))
    paused = paused_run(TEMPLATE, script, tools=tools)
    state = json.loads(json.dumps(paused.state))
    before = len(script.calls)
    resumed = sd.resume(state, {"reply.1": True}, model=script.model(), tools=tools)

    assert dict(resumed) == dict(inline)
    assert resumed.usage == inline.usage
    assert ledger.ran == inline_ran  # lookup once (before the pause), the refund once (after)
    sent_after = [c.turns for c in script.calls[before:]]
    assert sent_after == [c.turns for c in inline_script.calls[2:]]  # neither intro nor the asking request again
    assert [c.tool_name for c in resumed.results["reply"].tool_calls] == ["lookup", "issue_refund"]
    assert len(resumed.results["intro"].messages) == len(inline.results["intro"].messages) == 2


def test_resume_with_a_denial_and_as_events() -> None:
    ledger = Ledger()
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))
    script = Script(agent(REFUND))
    state = paused_run(TEMPLATE, script, tools=tools).state

    async def run() -> list[Any]:
        return [e async for e in sd.resume_incremental_async(state, {"reply.1": "not today"}, model=script.model(),
                                                             tools=tools)]

    events = asyncio.run(run())
    assert events[0].type == "approval_decided"
    assert (events[0].request_id, events[0].approved, events[0].message) == ("reply.1", False, "not today")
    assert [e.slot for e in events if e.type == "slot_completed"] == ["reply", "after"]
    assert events[-1].result["reply"] == "done: order A1: 30 EUR | not today"
    assert ledger.ran == [("lookup", {"order_id": "A1"})]


def test_resume_refuses_a_changed_template_and_wrong_decision_ids(tmp_path: Path) -> None:
    ledger = Ledger()
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))
    script = Script(agent(REFUND))
    path = tmp_path / "refund.sd"
    path.write_text(TEMPLATE)
    state = paused_run(TEMPLATE, script, tools=tools, template_path=path).state
    calls = len(script.calls)

    def resume(decisions: dict[str, Any], **options: Any) -> str:
        with pytest.raises(ValueError) as info:
            sd.resume(state, decisions, model=script.model(), **{"tools": tools, **options})
        return str(info.value)

    assert resume({"reply.1": True}, template=TEMPLATE.replace("Greet.", "Hello.")) == (
        "template= is not the template the run paused with: line 1 was 'Greet. [[intro]]', now 'Hello. [[intro]]'"
    )
    assert resume({}).startswith("no decision for 'reply.1' (issue_refund(order_id=\"A1\", amount=30))")
    assert resume({"reply.1": True, "reply.2": False}).startswith("no paused request has the id 'reply.2'")
    assert "not among this run's tools" in resume({"reply.1": True}, tools=[ledger.lookup])
    path.write_text(TEMPLATE.replace("Sum up", "Summarise"))
    assert resume({"reply.1": True}) == (
        f"{path} changed since the run paused: line 5 was 'Sum up {{{{ reply }}}}. [[after]]', "
        "now 'Summarise {{ reply }}. [[after]]'"
    )
    with pytest.raises(ValueError, match="not a paused struckdown run"):
        sd.resume({"format": "other"}, {})
    assert len(script.calls) == calls  # nothing was sent


def test_a_resumed_slot_may_pause_again_and_keeps_counting() -> None:
    ledger = Ledger()
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))
    rounds = [Tools([("issue_refund", {"order_id": "A1", "amount": 5})]),
              Tools([("issue_refund", {"order_id": "B2", "amount": 7})]), "both done"]
    script = Script(lambda call: rounds[sum(1 for r, _ in call.turns if r == "call")])
    first = paused_run("Go [[reply|use_tools=true, max_iter=3]]", script, tools=tools)
    with pytest.raises(sd.Paused) as again:
        sd.resume(json.loads(json.dumps(first.state)), {"reply.1": True}, model=script.model(), tools=tools)
    assert [r.id for r in again.value.requests] == ["reply.2"]
    assert again.value.requests[0].arguments == {"order_id": "B2", "amount": 7}
    result = sd.resume(json.loads(json.dumps(again.value.state)), {"reply.2": False}, model=script.model(), tools=tools)
    assert result["reply"] == "both done"
    assert ledger.ran == [("issue_refund", {"order_id": "A1", "amount": 5})]
    assert result.results["reply"].usage.requests == 3
    assert [c.tool_names for c in script.calls] == [["lookup", "issue_refund", "send_email"]] * 2 + [[]]


def test_finished_slots_come_back_typed_and_actions_do_not_run_twice() -> None:
    ledger = Ledger()
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))
    env = sd.Environment(tools=tools)
    notes: list[str] = []
    env.register_action("note", lambda text: notes.append(text) or text, side_effects=True)
    template = "When? [[date:day]]\n[[@note|hello]]\nRefund A1. [[reply|use_tools=true]]"
    script = Script(lambda call: "2025-03-03" if call.schema and not call.tool_names else agent(REFUND)(call))
    with pytest.raises(sd.Paused) as info:
        env.complete(template, model=script.model())
    assert notes == ["hello"]
    result = env.resume(json.loads(json.dumps(info.value.state)), {"reply.1": True}, model=script.model())
    assert result["day"] == dt.date(2025, 3, 3)
    assert notes == ["hello"]
    assert sum(1 for c in script.calls if c.schema and not c.tool_names) == 1


def test_independent_segments_and_together_members_pause_together() -> None:
    ledger = Ledger()
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))

    def answer(call: Call) -> Any:
        if not call.tool_names:
            return "ok: " + call.last_user.splitlines()[-1]
        if not [t for r, t in call.turns if r == "call"]:
            order = "A1" if "A1" in call.last_user else "B2"
            return Tools([("issue_refund", {"order_id": order, "amount": 1})])
        return "done: " + [t for r, t in call.turns if r == "return"][-1]

    template = (
        "<together>Refund A1 [[a|use_tools=true]] Refund B2 [[b|use_tools=true]] Other [[c]]</together>\n"
        "After {{ a }} [[d]]\n<checkpoint>\nElsewhere [[e]]"
    )
    script = Script(answer)
    paused = paused_run(template, script, tools=tools)
    assert sorted(r.id for r in paused.requests) == ["a.1", "b.1"]
    assert sorted(paused.results) == ["c", "e"]
    calls = len(script.calls)
    result = sd.resume(json.loads(json.dumps(paused.state)), {"a.1": True, "b.1": "no"}, model=script.model(),
                       tools=tools)
    assert (result["a"], result["b"]) == ("done: refunded 1 for A1", "done: no")
    assert list(result) == ["a", "b", "c", "d", "e"]
    assert len(script.calls) - calls == 3  # a and b continue, d runs; c and e are not asked again


def test_a_guard_that_trips_halts_before_anyone_is_asked() -> None:
    """The guard runs in another segment, beside the agent slot: before the request is
    shown, every pending guard is joined."""
    ledger = Ledger()
    asked: list[Any] = []
    for approve in (lambda r: asked.append(r) or True, None):
        guard_seen: list[asyncio.Event] = []

        async def gate(call: Call) -> None:
            if not guard_seen:
                guard_seen.append(asyncio.Event())
            if call.tool_names:
                await guard_seen[0].wait()  # the agent slot answers only once the guard has started
            else:
                guard_seen[0].set()

        script = Script(lambda call: {"triggered": True, "reason": "fraud"} if call.schema else REFUND, gate=gate)
        with pytest.raises(sd.Halted) as info:
            sd.complete("Refund A1 [[reply|use_tools=true]]\n<checkpoint>\nFraud? [[halt:g]]", model=script.model(),
                        tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)), approve=approve)
        assert info.value.reason == "fraud"
    assert asked == []
    assert ("issue_refund", {"order_id": "A1", "amount": 30}) not in ledger.ran


def test_a_guard_that_would_pause_is_an_error() -> None:
    ledger = Ledger()
    script = Script(lambda call: REFUND if call.tool_names else {"triggered": False, "reason": ""})
    with pytest.raises(sd.TemplateRuntimeError, match="a guard cannot pause"):
        sd.complete("Check [[halt:g|use_tools=true]]", model=script.model(),
                    tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)))


def test_one_decision_per_identical_call_within_a_slot() -> None:
    ledger = Ledger()
    same = ("issue_refund", {"order_id": "A1", "amount": 30})
    rounds = [Tools([same, same]), Tools([same, ("issue_refund", {"order_id": "B2", "amount": 1})]), "done"]
    script = Script(lambda call: rounds[len([t for r, t in call.turns if r == "call"]) // 2])
    asked: list[str] = []
    events = events_of("Go [[reply|use_tools=true]]", script,
                       tools=ledger.tools(refund=sd.needs_approval(ledger.issue_refund)),
                       approve=lambda r: asked.append(r.id) or r.arguments["order_id"] == "A1")
    assert asked == ["reply.1", "reply.2"]  # A1 once for three identical calls, then B2
    assert ledger.ran == [same]  # the body ran once
    completed = [(e.arguments["order_id"], e.was_cached) for e in events if e.type == "tool_completed"]
    assert sorted(completed) == [("A1", False), ("A1", True), ("A1", True)]
    assert script.calls[-1].turns[-1] == ("return", DENIED)  # B2 denied


def test_identical_calls_of_a_paused_response_are_one_request() -> None:
    ledger = Ledger()
    same = ("issue_refund", {"order_id": "A1", "amount": 30})
    script = Script(agent(Tools([same, same])))
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))
    paused = paused_run("Go [[reply|use_tools=true]]", script, tools=tools)
    assert [r.id for r in paused.requests] == ["reply.1"]
    result = sd.resume(paused.state, {"reply.1": True}, model=script.model(), tools=tools)
    assert ledger.ran == [same]
    assert result["reply"] == "done: refunded 30 for A1 | refunded 30 for A1"


def test_a_tool_that_asks_from_inside_is_decided_inline_and_cannot_pause() -> None:
    """pydantic-ai's `ApprovalRequired` raised by the tool itself (here above 10): the
    same gate decides it; without approve= the slot was not declared to pause."""
    wired: list[float] = []

    def wire(ctx: RunContext[None], amount: float) -> str:
        """Wire money."""
        if amount > 10 and not ctx.tool_call_approved:
            raise ApprovalRequired()
        wired.append(amount)
        return f"wired {amount:g}"

    script = Script(agent(Tools([("wire", {"amount": 5}), ("wire", {"amount": 50})])))
    asked: list[Any] = []
    result = sd.complete("Pay [[reply|use_tools=true]]", model=script.model(), tools=[wire],
                         approve=lambda r: asked.append(r.arguments) or True)
    assert asked == [{"amount": 50}]
    assert sorted(wired) == [5, 50]
    assert result["reply"] == "done: wired 5 | wired 50"
    with pytest.raises(sd.TemplateRuntimeError, match="asked for approval from inside"):
        sd.complete("Pay [[reply|use_tools=true]]", model=script.model(), tools=[wire])


def test_a_batch_row_that_pauses_is_its_paused_error_and_the_error_pickles() -> None:
    import pickle

    ledger = Ledger()
    tools = ledger.tools(refund=sd.needs_approval(ledger.issue_refund))
    script = Script(agent(REFUND))
    outcomes = sd.complete_batch("Refund {{ order }}. [[reply|use_tools=true]]", [{"order": "A1"}, {"order": "B2"}],
                                 model=script.model(), tools=tools)
    assert [type(o).__name__ for o in outcomes] == ["Paused", "Paused"]
    paused = outcomes[0]
    assert isinstance(paused, sd.Paused)
    copy = pickle.loads(pickle.dumps(paused))
    assert (copy.requests, copy.state) == (paused.requests, paused.state)
    assert [row["context"] for row in (o.state for o in outcomes)] == [{"order": "A1"}, {"order": "B2"}]

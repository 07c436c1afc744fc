"""The call a person approves is the call that runs (issue 39 N3, N5): a paused state is
signed, each request binds its tool and exact arguments, and an edited state is refused
on resume, naming what differs, before any model call or tool runs."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd
from scripted import Call, Script, Tools
from struckdown.approval.signing import KEY_ENV, sign_state, using_state_key

TEMPLATE = "Is this abusive? [[halt:abusive]]\n\nRefund A1. [[reply|use_tools=true]]\n\nSum up {{ reply }}. [[after]]"
REFUND = Tools([("issue_refund", {"order_id": "A1", "amount": 49.0})])


class Bank:
    def __init__(self) -> None:
        self.ran: list[dict[str, Any]] = []

        @sd.needs_approval
        def issue_refund(order_id: str, amount: float) -> str:
            """Refund an order."""
            self.ran.append({"order_id": order_id, "amount": amount})
            return f"refunded {amount:g}"

        self.tools = [issue_refund]


def answer(call: Call) -> Any:
    if call.schema is not None and "abusive" in call.last_user:
        return {"triggered": False, "reason": "polite"}
    if not call.tool_names:
        return "ok"
    if not [text for role, text in call.turns if role == "call"]:
        return REFUND
    return "done: " + " | ".join(text for role, text in call.turns if role == "return")


def paused() -> tuple[dict[str, Any], Bank, Script]:
    bank, script = Bank(), Script(answer)
    with pytest.raises(sd.Paused) as info:
        sd.complete(TEMPLATE, model=script.model(), tools=bank.tools)
    return json.loads(json.dumps(info.value.state)), bank, script


def refund_part(state: dict[str, Any]) -> dict[str, Any]:
    (slot,) = state["paused"]
    return next(p for p in slot["messages"][-1]["parts"] if p.get("tool_name") == "issue_refund")


def refused(state: dict[str, Any], bank: Bank, script: Script, message: str) -> None:
    before = len(script.calls)
    with pytest.raises(ValueError) as info:
        sd.resume(state, {"reply.1": True}, model=script.model(), tools=bank.tools)
    assert str(info.value) == message
    assert bank.ran == [] and len(script.calls) == before


def test_an_untouched_state_resumes_and_runs_the_call_that_was_shown() -> None:
    state, bank, script = paused()
    assert state["requests"][0]["arguments"] == {"order_id": "A1", "amount": 49.0}
    assert set(state["signature"]) == {"key_id", "digests", "hmac"}
    result = sd.resume(state, {"reply.1": True}, model=script.model(), tools=bank.tools)
    assert bank.ran == [{"order_id": "A1", "amount": 49.0}]
    assert result["reply"] == "done: refunded 49"


EDITED = "the paused state was edited since it was signed: {}; refusing to resume it"


def test_arguments_edited_after_they_were_shown_are_refused() -> None:
    """The attack: the prompt showed amount=49.0, the state's call said 4900.0."""
    state, bank, script = paused()
    part = refund_part(state)
    part["args"] = {**(part["args"] if isinstance(part["args"], dict) else json.loads(part["args"])), "amount": 4900.0}
    refused(state, bank, script, EDITED.format("paused slot 'reply' differs"))


@pytest.mark.parametrize(
    ("edit", "differs"),
    [
        (lambda s: s["requests"][0]["arguments"].update(amount=1.0), "request 'reply.1' differs"),
        (lambda s: s.update(template=s["template"].replace("Refund A1.", "Refund all.")), "the template text differs"),
        (lambda s: s.update(template_path="/elsewhere/t.sd"), "template_path differs"),
        (lambda s: s.update(context={"x": 1}), "the context differs"),
        (lambda s: s["finished"][0]["output"].update(triggered=True), "finished slot 'abusive' differs"),
        (lambda s: s.update(finished=[]), "finished slot 'abusive' was removed"),
        (lambda s: s["finished"].append({**s["finished"][0], "key": "after", "output": "forged"}),
         "finished slot 'after' was added"),
        (lambda s: s["paused"][0]["decided"].append(
            {"tool_name": "issue_refund", "arguments": {"order_id": "A1", "amount": 4900.0}, "decision": True}),
         "paused slot 'reply' differs"),
        (lambda s: s["extra"].update(cli={"tools": "/tmp/evil.py"}), "extra (the host's settings) differs"),
    ],
)
def test_every_part_of_a_state_is_covered_and_named(edit: Any, differs: str) -> None:
    state, bank, script = paused()
    assert [f["key"] for f in state["finished"]] == ["abusive"]  # the guard's verdict travels as a finished slot
    edit(state)
    refused(state, bank, script, EDITED.format(differs))


def test_digests_edited_too_still_fail_the_hmac() -> None:
    state, bank, script = paused()
    refund_part(state)["args"] = {"order_id": "A1", "amount": 4900.0}
    forged = copy.deepcopy(state)
    with using_state_key(b"the attacker's own key, not ours!"):
        forged["signature"]["digests"] = sign_state(copy.deepcopy(state))["signature"]["digests"]
    refused(forged, bank, script,
            "the paused state's signature does not match its contents (it was edited); refusing to resume it")


def test_an_unsigned_state_or_one_of_another_key_is_refused() -> None:
    state, bank, script = paused()
    unsigned = {k: v for k, v in state.items() if k != "signature"}
    refused(unsigned, bank, script,
            "the paused state is not signed, so it may have been edited; refusing to resume it (states are signed "
            "since struckdown 1.0: run the template again and pause it anew)")
    with using_state_key(b"another server's key, 32 bytes!!"):
        other = sign_state(copy.deepcopy(state))
    with pytest.raises(ValueError, match="the paused state was signed with another key"):
        sd.resume(other, {"reply.1": True}, model=script.model(), tools=bank.tools)
    assert bank.ran == []


def test_a_state_signed_after_an_edit_still_binds_request_and_call() -> None:
    """Even a state signed with the right key (a host's bug, a re-signing script) cannot run a
    call other than the one its request shows."""
    state, bank, script = paused()
    refund_part(state)["args"] = {"order_id": "A1", "amount": 4900.0}
    refused(sign_state(state), bank, script,
            "request 'reply.1' shows issue_refund(order_id=\"A1\", amount=49.0), but the call it would run is "
            "issue_refund(order_id=\"A1\", amount=4900.0)")
    state, bank, script = paused()
    state["requests"][0]["arguments"]["amount"] = 4900.0
    refused(sign_state(state), bank, script,
            "request 'reply.1' (issue_refund(order_id=\"A1\", amount=4900.0)) is not the call the run paused with "
            "(its hash differs)")


def test_the_key_file_is_made_once_with_mode_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "conf" / "state.key"
    monkeypatch.setenv(KEY_ENV, str(path))
    state, bank, script = paused()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len(path.read_bytes()) == 32
    key = path.read_bytes()
    sd.resume(state, {"reply.1": False}, model=script.model(), tools=bank.tools)
    assert path.read_bytes() == key
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "other.key"))  # another user, another machine
    with pytest.raises(ValueError, match="signed with another key"):
        sd.resume(state, {"reply.1": True}, model=script.model(), tools=bank.tools)


def test_a_state_that_went_through_javascript_still_verifies() -> None:
    """The playground's page returns a state through JSON.parse/JSON.stringify, which writes
    an integral float (`12.0`) as `12`: the signature holds (found by the browser test)."""
    import json

    from struckdown.approval.signing import sign_state, verify_state

    signed = sign_state({"format": "struckdown.paused/1", "template": "T", "paused": [{"slot": "a", "ms": 12.0}],
                         "finished": [], "requests": []})
    through_js = json.loads(json.dumps(signed).replace("12.0", "12"))
    assert through_js["paused"][0]["ms"] == 12
    verify_state(through_js)

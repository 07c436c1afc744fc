"""MCP tools and approval together (SPEC §12 with §16, §22): a `destructiveHint` tool
pauses the run as a `@needs_approval` function tool does, `approve="*"` and
`approve=<server>_<tool>` take MCP tools, and a state paused on an MCP tool resumes
(its server's session opens again) and runs the call after the decision.

Against the module's HTTP test server (`notes_server.py`): `notes_lookup` is read-only,
`notes_remember` has no hints, `notes_erase` is destructive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import plain_environment, sd as sd_cli  # noqa: F401
from mcp_models import clean_up_agent as agent
from mcp_support import HttpServer
from scripted import Script, Tools

import struckdown as sd

pytestmark = pytest.mark.process  # real MCP server over streamable HTTP

TEMPLATE = "Greet. [[intro]]\n\nClean up owl. [[clean|mcp=notes]]\n\nSum up {{ clean }}. [[after]]"
LOOK_AND_ERASE = Tools([("notes_lookup", {"word": "owl"}), ("notes_erase", {"name": "owl"})])
ERASE = sd.ApprovalRequest("clean.1", "clean", "notes_erase", {"name": "owl"})


def servers(notes: HttpServer) -> dict[str, str]:
    return {"notes": notes.url}


def paused_run(notes: HttpServer, script: Script, template: str = TEMPLATE, **options: Any) -> sd.Paused:
    with pytest.raises(sd.Paused) as info:
        sd.complete(template, model=script.model(), mcp=servers(notes), **options)
    return info.value


# -- a destructive MCP tool pauses the run --------------------------------------------------


def test_a_destructive_mcp_tool_pauses_the_run_like_a_needs_approval_tool(notes: HttpServer) -> None:
    script = Script(agent(LOOK_AND_ERASE))
    paused = paused_run(notes, script)
    assert paused.requests == [ERASE]
    assert dict(paused.results) == {"intro": "ok: Greet."}
    assert str(paused) == "paused: 1 tool call awaits approval (clean.1: notes_erase)"
    # as with function tools: the call of the response that needs no approval ran, the destructive one did not
    assert notes.record.calls == [("lookup", {"word": "owl"})]
    assert json.loads(json.dumps(paused.state)) == paused.state


def test_a_state_paused_on_an_mcp_tool_resumes_and_the_call_runs_after_the_decision(notes: HttpServer) -> None:
    inline_script = Script(agent(LOOK_AND_ERASE))
    inline = sd.complete(TEMPLATE, model=inline_script.model(), mcp=servers(notes), approve=True)
    notes.reset()

    script = Script(agent(LOOK_AND_ERASE))
    state = json.loads(json.dumps(paused_run(notes, script).state))
    before = len(script.calls)
    resumed = sd.resume(state, {"clean.1": True}, model=script.model())  # the servers come from the state

    assert notes.record.calls == [("lookup", {"word": "owl"}), ("erase", {"name": "owl"})]  # each once
    assert dict(resumed) == dict(inline)
    assert resumed["clean"] == "done: owl: a note about owl | erased owl"
    assert [c.turns for c in script.calls[before:]] == [c.turns for c in inline_script.calls[2:]]  # nothing resent
    assert [c.tool_name for c in resumed.results["clean"].tool_calls] == ["notes_lookup", "notes_erase"]


def test_a_denied_mcp_call_never_reaches_the_server_after_resume(notes: HttpServer) -> None:
    script = Script(agent(LOOK_AND_ERASE))
    state = paused_run(notes, script).state
    resumed = sd.resume(state, {"clean.1": "keep the owl"}, model=script.model(), mcp=servers(notes))
    assert resumed["clean"] == "done: owl: a note about owl | keep the owl"
    assert notes.record.calls == [("lookup", {"word": "owl"})]


def test_resume_without_the_server_of_the_paused_call_names_it(notes: HttpServer) -> None:
    script = Script(agent(LOOK_AND_ERASE))
    state = paused_run(notes, script).state
    with pytest.raises(ValueError, match=r"the paused calls use tool notes_erase, which is not among this run's tools; "
                       r"pass tools=\[…\] \(and mcp=… for an MCP tool\)"):  # fmt: skip
        sd.resume(state, {"clean.1": True}, model=script.model(), mcp={"other": notes.url})
    assert notes.record.calls == [("lookup", {"word": "owl"})]


# -- approve="*" and approve=<mcp tool> ----------------------------------------------------


def test_approve_star_asks_for_every_mcp_tool_that_is_not_read_only(notes: HttpServer) -> None:
    asked: list[Any] = []
    first = Tools([("notes_lookup", {"word": "owl"}), ("notes_remember", {"note": "owl"})])
    script = Script(agent(first))
    template = 'Note owl. [[clean|mcp=notes, approve="*"]]'

    def approve(request: sd.ApprovalRequest) -> bool:
        asked.append(request)
        assert notes.record.calls == [("lookup", {"word": "owl"})]  # remember waits for the decision
        return True

    result = sd.complete(template, model=script.model(), mcp=servers(notes), approve=approve)
    assert asked == [sd.ApprovalRequest("clean.1", "clean", "notes_remember", {"note": "owl"})]
    assert notes.record.calls == [("lookup", {"word": "owl"}), ("remember", {"note": "owl"})]
    assert result["clean"] == "done: owl: a note about owl | remembered owl"


def test_approve_names_an_mcp_tool_and_the_run_pauses_on_it(notes: HttpServer) -> None:
    first = Tools([("notes_remember", {"note": "owl"})])
    script = Script(agent(first))
    paused = paused_run(notes, script, "Note owl. [[clean|mcp=notes, approve=notes_remember]]")
    assert paused.requests == [sd.ApprovalRequest("clean.1", "clean", "notes_remember", {"note": "owl"})]
    assert notes.record.calls == []
    resumed = sd.resume(paused.state, {"clean.1": True}, model=script.model())
    assert resumed["clean"] == "done: remembered owl"
    assert notes.record.calls == [("remember", {"note": "owl"})]


def test_an_approve_name_no_server_has_is_an_error_before_any_model_call(notes: HttpServer) -> None:
    script = Script(agent(Tools([])))
    with pytest.raises(sd.TemplateSyntaxError) as info:
        sd.complete("First [[x]]\nNote owl. [[clean|mcp=notes, approve=notes_rember]]", model=script.model(),
                    mcp=servers(notes))  # fmt: skip
    error = info.value
    assert (error.line, error.column, error.message) == (
        2, 38, "approve= names 'notes_rember', which is not a tool of this run"
    )
    assert error.hint is not None and "did you mean 'notes_remember'?" in error.hint
    assert script.calls == [] and notes.record.calls == []
    with pytest.raises(sd.TemplateSyntaxError, match="approve= names 'files_rm', which is not a tool of this run"):
        sd.complete("Note owl. [[clean|mcp=notes, approve=files_rm]]", model=script.model(), mcp=servers(notes))
    opened = notes.record.sessions  # the misspelt name listed the server's tools: one session
    two = {"notes": notes.url, "files": notes.url}
    with pytest.raises(sd.TemplateSyntaxError, match=r"approve= names 'notes_erase', a tool of an MCP server this slot "
                       r"does not use \(mcp=files\)"):  # fmt: skip
        sd.complete("Note owl. [[clean|mcp=files, approve=notes_erase]]", model=script.model(), mcp=two)
    assert script.calls == [] and notes.record.sessions == opened == 1  # refused before any session opened


# -- the command line: --pause-to, then sd resume ------------------------------------------


def test_sd_run_pauses_on_a_destructive_mcp_tool_and_sd_resume_runs_it(tmp_path: Path, notes: HttpServer) -> None:
    template = tmp_path / "t.sd"
    template.write_text(TEMPLATE + "\n", encoding="utf-8")
    state = tmp_path / "s.json"
    model = "mcp_models:look_and_erase_model"  # the state keeps it for `sd resume`

    result = sd_cli("run", template, "--model", model, "--mcp", f"notes={notes.url}", "--pause-to", state, "--no-cache")
    assert result.exit_code == 4, result.output
    assert notes.record.calls == [("lookup", {"word": "owl"})]
    assert [r["id"] for r in json.loads(state.read_text())["requests"]] == ["clean.1"]

    # SPEC §29: the command printed carries every flag the resume needs (the servers again)
    assert f"continue with: sd resume {state} --model {model} --mcp notes={notes.url} --approve clean.1" in result.stderr
    # the servers come from the state, which sd resume starts only when trusted (docs/security.md)
    untrusted = sd_cli("resume", state, "--approve", "clean.1", "--model", model)
    assert untrusted.exit_code == 2
    assert untrusted.stderr.strip().splitlines()[-1] == (
        "error: the paused run used the MCP servers notes; sd resume starts or imports them only with --trust-state "
        "(or when --mcp / --mcp-config / --fallback give them again)"
    )
    result = sd_cli("resume", state, "--approve", "clean.1", "--json", "--model", model, "--mcp", f"notes={notes.url}")
    assert result.exit_code == 0, result.output
    assert notes.record.calls == [("lookup", {"word": "owl"}), ("erase", {"name": "owl"})]
    answers = json.loads(result.stdout)
    assert answers["clean"] == "done: owl: a note about owl | erased owl"
    assert answers["after"] == "ok: Sum up done: owl: a note about owl | erased owl."

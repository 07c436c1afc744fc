"""`sd edit` over HTTP: files inside the folder only, check, explain, run and batch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from struckdown.web import WebConfig
from web_support import client, run_events, serving, use_scripted_model

TOKEN = "edit-token"
TEMPLATE = "Greet {{ name }}.\n\n[[greeting|use_tools=true]]\n\nFriendly?\n[[bool:friendly]]\n"
TOOLS = 'def lookup(word: str) -> str:\n    """Look a word up."""\n    return f"{word} wrote the first program"\n'


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("templates")
    (root / "hello.sd").write_text(TEMPLATE)
    (root / "ctx.json").write_text('{"name": "Ada"}')
    (root / "tools.py").write_text(TOOLS)
    (root / "sub").mkdir()
    (root / "sub" / "other.sd").write_text("[[x]]")
    (root / ".git").mkdir()
    (root / ".git" / "hidden.sd").write_text("[[x]]")
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir()
    (outside / "secret.sd").write_text("secret [[x]]")
    (root / "link").symlink_to(outside)
    return root


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        use_scripted_model(patch)
        config = WebConfig(mode="edit", tokens=(TOKEN,), root=folder, tool_files=((folder / "tools.py").resolve(),))
        with serving(config) as base:
            yield base


def test_the_file_list_holds_templates_contexts_and_tools_of_the_folder(server: str, folder: Path) -> None:
    listed = client(server, TOKEN).get("/api/files").json()
    assert listed == {
        "root": str(folder.resolve()),
        "templates": ["hello.sd", "sub/other.sd"],  # a symlink out of the folder is not followed
        "contexts": ["ctx.json"],
        "tools": ["tools.py"],
        "inputs": [],
    }


def test_files_are_read_and_saved_inside_the_folder(server: str, folder: Path) -> None:
    http = client(server, TOKEN)
    assert http.get("/api/file", params={"path": "hello.sd"}).json() == {"path": "hello.sd", "text": TEMPLATE}
    saved = http.put("/api/file", json={"path": "sub/new.sd", "text": "Hi [[x]]\n"})
    assert saved.json() == {"path": "sub/new.sd", "saved": 9}
    assert (folder / "sub" / "new.sd").read_text() == "Hi [[x]]\n"


@pytest.mark.parametrize("path", ["../escape.sd", "/tmp/escape.sd", "sub/../../escape.sd", "link/secret.sd"])
def test_no_path_leaves_the_folder(server: str, folder: Path, path: str) -> None:
    http = client(server, TOKEN)
    assert http.put("/api/file", json={"path": path, "text": "x"}).status_code == 403
    assert http.get("/api/file", params={"path": path}).status_code == 403
    assert not (folder.parent / "escape.sd").exists()
    assert (folder.parent / f"{folder.name}-outside" / "secret.sd").read_text() == "secret [[x]]"


def test_only_template_and_data_files_are_saved(server: str, folder: Path) -> None:
    response = client(server, TOKEN).put("/api/file", json={"path": "tools.py", "text": "import os"})
    assert response.status_code == 403
    assert (folder / "tools.py").read_text() == TOOLS


def test_check_places_a_broken_slot_at_its_line_and_column(server: str) -> None:
    http = client(server, TOKEN)
    broken = http.post("/api/check", json={"template": "One.\nTwo [[bool:ok|]]\n", "path": "hello.sd"}).json()
    (diagnostic,) = broken["diagnostics"]
    assert (diagnostic["line"], diagnostic["column"], diagnostic["severity"]) == (2, 15, "error")
    fine = http.post("/api/check", json={"template": "One.\nTwo [[bool:ok]]\n", "path": "hello.sd"}).json()
    assert fine == {"type": "diagnostics", "diagnostics": [], "context_error": None}


def test_check_with_a_context_reports_undefined_variables(server: str) -> None:
    body = {"template": "Hi {{ nme }} [[x]]", "context": '{"name": "Ada"}'}
    (diagnostic,) = client(server, TOKEN).post("/api/check", json=body).json()["diagnostics"]
    assert diagnostic["message"] == "undefined variable 'nme': not in the context and not answered before"
    assert (diagnostic["line"], diagnostic["column"]) == (1, 7)
    bad = client(server, TOKEN).post("/api/check", json={"template": "[[x]]", "context": "{nope"}).json()
    assert bad["context_error"].startswith("context: Expecting property name")


def test_explain_shows_the_plan_with_the_picked_tools(server: str) -> None:
    body = {"template": TEMPLATE, "path": "hello.sd", "tools": "tools.py"}
    answer = client(server, TOKEN).post("/api/explain", json=body).json()
    assert answer["type"] == "plan", answer
    plan = answer["plan"]
    assert plan.splitlines()[0] == "hello.sd"
    assert "slot greeting: respond, one answer" in plan
    assert "lookup(word: str) -> str  Look a word up." in plan
    assert "slot friendly: bool, one answer" in plan


def test_a_run_streams_tokens_tool_calls_and_the_typed_result(server: str) -> None:
    body = {"template": TEMPLATE, "path": "hello.sd", "tools": "tools.py", "context": '{"name": "Ada"}'}
    events = run_events(client(server, TOKEN), body)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run_started"
    assert kinds.index("tool_started") < kinds.index("tool_completed") < kinds.index("token_delta")
    tokens = [e["delta"] for e in events if e["type"] == "token_delta"]
    assert tokens == ["Hello ", "Ada, ", "Ada ", "wrote ", "the ", "first ", "program!"]
    final = events[-1]
    assert final["type"] == "processing_complete"
    assert final["result"] == {"greeting": "Hello Ada, Ada wrote the first program!", "friendly": True}
    assert {k: v["type"] for k, v in final["slots"].items()} == {"greeting": "respond", "friendly": "bool"}
    assert final["usage"]["requests"] == 3
    assert final["usage"]["tool_calls"] == 1
    assert final["halted"] is None


def test_a_guard_verdict_and_the_halt_arrive_as_events(server: str) -> None:
    events = run_events(client(server, TOKEN), {"template": "Please trip.\n[[halt:safety]]\nThen [[a]]"})
    verdicts = [e for e in events if e["type"] == "slot_completed" and e["slot"] == "safety"]
    assert [v["result"]["output"] for v in verdicts] == [{"triggered": True, "reason": "scripted trip"}]
    assert verdicts[0]["result"]["type"] == "halt"
    final = events[-1]
    assert (final["type"], final["early_termination"]) == ("processing_complete", True)
    assert final["halted"] == {"slot": "safety", "reason": "scripted trip"}
    assert "a" not in final["result"]


def test_tools_outside_the_folder_are_refused(server: str) -> None:
    response = client(server, TOKEN).post("/api/run", json={"template": TEMPLATE, "tools": "../tools.py"})
    assert response.status_code == 403


def test_only_tools_files_given_with_sd_edit_tools_run_never_another_py_file(tmp_path: Path) -> None:
    """Issue 39 N16: any `.py` file of the folder was listed, and a request naming one
    imported it (a cloned repository's file, a page that guesses a name)."""
    (tmp_path / "hello.sd").write_text(TEMPLATE)
    marker = tmp_path / "imported"
    (tmp_path / "setup.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "tools.py").write_text(TOOLS)
    chosen = (tmp_path / "tools.py").resolve()
    for tool_files, listed in (((), []), ((chosen,), ["tools.py"])):
        with pytest.MonkeyPatch.context() as patch:
            use_scripted_model(patch)
            with serving(WebConfig(mode="edit", tokens=(TOKEN,), root=tmp_path, tool_files=tool_files)) as base:
                http = client(base, TOKEN)
                assert http.get("/api/files").json()["tools"] == listed
                for op in ("check", "explain", "run"):
                    response = http.post(f"/api/{op}", json={"template": TEMPLATE, "path": "hello.sd", "tools": "setup.py"})
                    assert response.status_code == 403
                    given = "tools.py" if tool_files else "none were given"
                    assert response.json() == {"error": (
                        f"sd edit runs only the tools files given with --tools ({given}); "
                        "to use 'setup.py', restart it with sd edit --tools setup.py"
                    )}
    assert not marker.exists()


def test_a_batch_reports_progress_and_offers_the_output(server: str) -> None:
    http = client(server, TOKEN)
    rows = "name\nAda\nGrace\nLin\n"
    body = {"template": "Greet {{ name }}. [[bool:friendly]]", "filename": "people.csv", "content": rows, "jobs": 2}
    events = run_events(http, body, path="/api/batch")
    assert [e["type"] for e in events] == ["batch_started", "batch_row", "batch_row", "batch_row", "batch_complete"]
    assert events[0]["total"] == 3
    assert sorted(e["done"] for e in events if e["type"] == "batch_row") == [1, 2, 3]
    complete = events[-1]
    assert (complete["total"], complete["failed"]) == (3, 0)
    jsonl = http.get(complete["downloads"]["jsonl"])
    assert [json.loads(line) for line in jsonl.text.splitlines()] == [
        {"name": "Ada", "friendly": True},
        {"name": "Grace", "friendly": True},
        {"name": "Lin", "friendly": True},
    ]
    csv = http.get(complete["downloads"]["csv"])
    assert csv.text.splitlines() == ["name,friendly", "Ada,true", "Grace,true", "Lin,true"]
    assert client(server).get(complete["downloads"]["csv"]).status_code == 401


def test_a_paused_run_goes_on_with_the_pages_decisions(server: str) -> None:
    """SPEC §12 on the page: the run pauses (nobody to ask), its final event carries the
    requests and the state; /api/approval sends them back with the decisions."""
    http = client(server, TOKEN)
    assert http.get("/api/config").json()["approvals"] is True
    template = TEMPLATE.replace("use_tools=true", "use_tools=true, approve=lookup")
    body = {"template": template, "path": "hello.sd", "tools": "tools.py", "context": '{"name": "Ada"}'}
    events = run_events(http, body)
    requested = [e for e in events if e["type"] == "approval_requested"]
    assert [(e["request_id"], e["tool_name"], e["arguments"]) for e in requested] == [
        ("greeting.1", "lookup", {"word": "Ada"})
    ]
    paused = events[-1]
    assert (paused["type"], paused["paused"], paused["result"]) == ("processing_complete", True, {})
    assert [r["id"] for r in paused["requests"]] == ["greeting.1"]
    assert "tool_started" not in [e["type"] for e in events]

    resumed = run_events(http, {**body, "state": paused["state"], "decisions": {"greeting.1": True}}, "/api/approval")
    kinds = [e["type"] for e in resumed]
    assert kinds[:2] == ["run_started", "approval_decided"]
    assert kinds.index("tool_completed") < kinds.index("processing_complete")
    final = resumed[-1]
    assert (final["type"], final["paused"]) == ("processing_complete", False)
    assert final["result"] == {"greeting": "Hello Ada, Ada wrote the first program!", "friendly": True}
    assert final["usage"]["requests"] == 3

    changed = run_events(http, {**body, "template": template + "More.\n", "state": paused["state"],
                                "decisions": {"greeting.1": True}}, "/api/approval")
    assert changed[-1]["type"] == "processing_error"
    assert "template= is not the template the run paused with" in changed[-1]["error"]
    refused = http.post("/api/approval", json={**body, "state": paused["state"], "decisions": {"greeting.1": 3}})
    assert refused.status_code == 400
    again = run_events(http, {**body, "state": paused["state"], "decisions": {"greeting.1": True}}, "/api/approval")
    assert [e["type"] for e in again] == ["run_started", "refused"]  # SPEC §29: a paused state is resumed once
    assert "was resumed already, by the playground at" in again[-1]["error"]


def test_a_typed_record_streams_its_partial_values_to_the_page(server: str) -> None:
    """SPEC §26: `slot_partial` events reach the page's event stream as the record grows."""
    events = run_events(client(server, TOKEN), {"template": "Who? [[record:who]]", "path": "who.sd", "context": "{}"})
    partials = [(e["slot"], e["value"], e["complete_fields"]) for e in events if e["type"] == "slot_partial"]
    # the server's real clock coalesces pieces that come within 50 ms: the middle one may go
    growing = [("who", {"name": "Ad"}, []), ("who", {"name": "Ada", "born": 18}, ["name"])]
    final = ("who", {"name": "Ada", "born": 1815}, ["name", "born"])
    assert partials in ([*growing, final], [growing[0], final])
    assert events[-1]["result"] == {"who": {"name": "Ada", "born": 1815}}

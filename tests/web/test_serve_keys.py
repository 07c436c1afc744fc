"""`sd serve`: what one API key starts belongs to that key (issue 39 N3, N6, N15), the key
never shows in the process list, and workers leave no temporary folders behind."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_support import client, run_events, serving, use_scripted_model

from struckdown.web import WebConfig
from struckdown.web.pool import PoolLimits

KEY, OTHER = "key-of-ada", "key-of-bob"
TEMPLATE = "Greet Ada. [[greeting|use_tools=true, approve=lookup]]\n"
TOOLS = ("import os\n\ndef lookup(word: str) -> str:\n    \"\"\"Look a word up.\"\"\"\n"
         "    with open(os.environ['SD_TEST_RAN'], 'a') as log:\n        log.write(word + '\\n')\n"
         "    return f'{word} wrote the first program'\n")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    use_scripted_model(monkeypatch)
    ran = tmp_path / "ran.txt"
    monkeypatch.setenv("SD_TEST_RAN", str(ran))
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS)
    config = WebConfig(mode="serve", tokens=(KEY, OTHER), tools_file=tools,
                       limits=PoolLimits(workers=2, time_limit_s=30.0))
    with serving(config) as base:
        yield base, ran


def paused_state(http: Any) -> dict[str, Any]:
    events = run_events(http, {"template": TEMPLATE})
    final = events[-1]
    assert (final["type"], final["paused"]) == ("processing_complete", True)
    assert [(r["id"], r["arguments"]) for r in final["requests"]] == [("greeting.1", {"word": "Ada"})]
    state: dict[str, Any] = final["state"]
    assert state["template_path"] is None and "signature" in state
    return state


def test_another_key_cannot_decide_or_resume_a_paused_run(server: tuple[str, Path]) -> None:
    base, ran = server
    ada, bob = client(base, KEY), client(base, OTHER)
    state = paused_state(ada)
    body = {"template": TEMPLATE, "state": state, "decisions": {"greeting.1": True}}
    stolen = bob.post("/api/approval", json=body)
    assert stolen.status_code == 403
    assert stolen.json()["error"].startswith(
        "this paused run cannot be resumed here: the paused state was signed with another key"
    )
    assert not ran.exists()
    resumed = run_events(ada, body, "/api/approval")
    assert resumed[-1]["result"] == {"greeting": "Hello Ada, Ada wrote the first program!"}
    assert ran.read_text() == "Ada\n"


def test_a_state_edited_on_the_page_is_refused(server: tuple[str, Path]) -> None:
    base, ran = server
    ada = client(base, KEY)
    state = paused_state(ada)
    (slot,) = state["paused"]
    response = next(m for m in reversed(slot["messages"]) if m["kind"] == "response")
    call = next(p for p in response["parts"] if p.get("tool_name") == "lookup")
    call["args"] = {"word": "/etc/shadow"}
    edited = ada.post("/api/approval", json={"template": TEMPLATE, "state": state, "decisions": {"greeting.1": True}})
    assert edited.status_code == 403
    assert edited.json() == {"error": "this paused run cannot be resumed here: the paused state was edited since it "
                                      "was signed: paused slot 'greeting' differs; refusing to resume it"}
    assert not ran.exists()


def test_a_batch_download_belongs_to_the_key_that_ran_it(server: tuple[str, Path]) -> None:
    base, _ = server
    ada, bob = client(base, KEY), client(base, OTHER)
    body = {"template": "Hi {{ name }} [[a]]", "filename": "rows.jsonl", "content": '{"name": "Ada"}\n'}
    events = run_events(ada, body, "/api/batch")
    downloads = events[-1]["downloads"]
    assert ada.get(downloads["jsonl"]).status_code == 200
    for url in downloads.values():
        response = bob.get(url)
        assert (response.status_code, response.json()) == (404, {"error": "no such batch output"})


def test_workers_remove_their_temporary_folders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_scripted_model(monkeypatch)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the server makes the workers' folders
    write = "{{ name }} [[a]]"
    config = WebConfig(mode="serve", tokens=(KEY,), limits=PoolLimits(workers=1, time_limit_s=30.0))
    with serving(config) as base:
        http = client(base, KEY)
        events = run_events(http, {"template": write, "context": '{"name": "x"}'})
        assert events[-1]["type"] == "processing_complete"
        folders = sorted(p.name.split("-")[1] for p in scratch.iterdir() if p.name.startswith("sd-worker-"))
        assert folders == ["worker"] * len(folders) and folders  # the worker's (and a spare's) are there
        worker_folder = next(p for p in scratch.iterdir() if p.name.startswith("sd-worker-"))
        assert [p.name.split("-")[0] for p in worker_folder.iterdir()] in ([], ["cwd"])
    assert [p.name for p in scratch.iterdir() if p.name.startswith("sd-worker-")] == []


@pytest.mark.process  # a real `sd serve` process and its /proc/PID/cmdline
def test_the_api_key_comes_from_a_file_and_never_shows_in_the_process_list(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# the team\nsecret-team-key-7f3a\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "struckdown.cli", "serve", "--api-key-file", str(keys), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once the socket listens
        assert line.startswith("struckdown playground (serve) on http://127.0.0.1:"), line
        url = line.split(" on ")[1].strip()
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert b"secret-team-key-7f3a" not in cmdline
        assert "token=" not in url
        assert client(url.rstrip("/")).get("/api/config").status_code == 401
        answer = client(url.rstrip("/"), "secret-team-key-7f3a").get("/api/config")
        assert answer.status_code == 200 and answer.json()["mode"] == "serve"
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert process.stderr is not None and "warning" not in process.stderr.read()


def test_an_api_key_flag_warns_that_it_shows_in_the_process_list(tmp_path: Path) -> None:
    from cli_support import sd

    flagged = sd("serve", "--api-key", "k", "--tools", tmp_path / "nope.py", "--port", "0")
    assert flagged.exit_code == 2
    assert ("warning: --api-key is visible to every user of this machine (ps, /proc/PID/cmdline); "
            "use --api-key-file or STRUCKDOWN_API_KEY") in flagged.stderr
    empty = tmp_path / "empty"
    empty.write_text("# nobody yet\n\n")
    refused = sd("serve", "--api-key-file", empty, "--port", "0")
    assert refused.exit_code == 2 and f"--api-key-file {empty} holds no key" in refused.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STRUCKDOWN_API_KEY", "from-env")
        quiet = sd("serve", "--tools", tmp_path / "nope.py", "--port", "0")
    assert quiet.exit_code == 2 and "warning" not in quiet.stderr

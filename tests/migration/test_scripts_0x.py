"""Issue 55 (SPEC §37): five struckdown 0.x scripts of our own (tests/migration/scripts/)
run unchanged against a fake OpenAI-compatible server on 127.0.0.1, and every request
they send is the request 0.18 sends for the same script.

The expected requests are written from REFERENCE-0x.md §1.17 (how 0.x assembles one
slot's request): instructions = the `<system>` text; then the text before the slot, split
at slots into user turns, each earlier answer an assistant turn `str(answer)`, an action's
value a user turn (`@history` the turns it read); a new segment starts an empty
conversation. A typed slot is asked through an output tool; per-type temperatures are
0.x's. Compared per request: model, temperature, the turns, whether an output tool was
offered (and a pick's choices). Not compared, as docs/migration.md says: the output token
cap (`max_completion_tokens`) and llama.cpp's `cache_prompt`, which today sends.
"""

from __future__ import annotations

import contextlib
import json
import runpy
import shlex
import shutil
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import sd as cli
from fake_openai import FakeOpenAI, last_user_text

from struckdown.environment import default_environment

SCRIPTS = Path(__file__).parent / "scripts"
MODEL = "gpt-4.1-mini"
SYSTEM_TRIAGE = "You triage support requests."


# -- the fake server's answers -------------------------------------------------------------------


def _conversation(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages", []))


def answer(body: dict[str, Any]) -> Any:
    text, everything = last_user_text(body), _conversation(body)
    tools = body.get("tools") or []
    if tools:
        name = tools[0]["function"]["name"]
        if "angry?" in text:
            value: Any = True
        elif "Which team" in text:
            value = "billing" if "charged" in everything else "technical" if "router" in everything else "sales"
        elif "answer today?" in text:
            value = "charged" in everything or "router" in everything
        elif "Quote the key points" in text:
            value = ["Caffeine delays sleep onset by about twenty minutes.", "Coffee after 2pm shortens deep sleep."]
        elif "about money?" in text:
            value = True
        elif "Label it" in text:
            value = {"team": "billing" if "charged" in text else "technical", "tags": ["ticket"]}
        else:
            raise AssertionError(f"unexpected typed request: {text!r}")
        return {"tool": name, "arguments": {"response": value}}
    if "short reply" in text:
        return "Sorry about the outage; an engineer is on the way."
    if "last question" in text:
        return "It shipped on Monday." if "A-100: two" in everything else "I cannot find that order."
    if "busy reader" in text:
        return "Caffeine, especially after 2pm, worsens sleep."
    if "my name?" in text:
        return "Dana"
    raise AssertionError(f"unexpected request: {text!r}")


# -- requests, as compared -------------------------------------------------------------------------


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def sent(body: dict[str, Any]) -> dict[str, Any]:
    """What is compared of a request the script sent."""
    tools = body.get("tools") or []
    out: dict[str, Any] = {
        "model": body["model"],
        "temperature": body.get("temperature"),
        "turns": [(m["role"], _text(m)) for m in body["messages"]],
        "typed": bool(tools),
    }
    if tools:
        schema = json.dumps(tools[0]["function"]["parameters"])
        enums = [word for word in ("billing", "technical", "sales") if f'"{word}"' in schema]
        out["choices"] = enums
    return out


def ox(system: str | None, turns: list[tuple[str, str]], *, temperature: float, choices: list[str] | None = None,
       typed: bool = False) -> dict[str, Any]:
    """The request 0.18 sends (REFERENCE §1.17): instructions first, then the turns."""
    out: dict[str, Any] = {
        "model": MODEL,
        "temperature": temperature,
        "turns": ([("system", system)] if system else []) + turns,
        "typed": typed or choices is not None,
    }
    if out["typed"]:
        out["choices"] = choices or []
    return out


def canon(requests: list[dict[str, Any]]) -> list[str]:
    """Requests as a sorted list: independent segments and rows may be sent in any order."""
    return sorted(json.dumps(r, sort_keys=True) for r in requests)


# -- running the scripts --------------------------------------------------------------------------


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeOpenAI]:
    for var in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "OPENAI_BASE_URL", "STRUCKDOWN_CACHE"):
        monkeypatch.delenv(var, raising=False)
    fake = FakeOpenAI(answer)
    with fake.serving() as base:
        monkeypatch.setenv("LLM_API_BASE", base)
        monkeypatch.setenv("LLM_API_KEY", "sk-proxy")
        monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
        monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "cache"))  # the CLI's cache: empty
        shutil.copytree(SCRIPTS / "workdir", tmp_path / "work")
        monkeypatch.chdir(tmp_path / "work")
        yield fake


@pytest.fixture
def registered() -> Iterator[None]:
    yield
    with contextlib.suppress(KeyError):
        default_environment().actions.unregister("order_status")


def run(script: str, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    argv = sys.argv
    sys.argv = [script, *args]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # `LLM` is deprecated, and works
            runpy.run_path(str(SCRIPTS / script), run_name="__main__")
    finally:
        sys.argv = argv
    return capsys.readouterr().out.splitlines()


# -- the five scripts -----------------------------------------------------------------------------


def test_streaming_backend(server: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    out = run("streaming_backend.py", capsys)
    assert out[:6] == [
        "done angry = True (segment 0)",
        "checkpoint 0",
        "start reply (segment 1)",
        "done reply = 'Sorry about the outage; an engineer is on the way.' (segment 1)",
        "checkpoint 1",
        "complete early=False",
    ]
    assert out[6].endswith("types ['checkpoint', 'complete', 'model_responded', 'slot_completed', 'stream_start', "
                           "'token_delta']")
    system = "You are a friendly support agent for Acme Broadband."
    message = "My internet has been down for three days!"
    assert [sent(b) for b in server.bodies] == [
        ox(system, [("user", f"Customer message: {message}\n\nIs the customer angry?")], temperature=0.0, typed=True),
        # the checkpoint: an empty conversation, the earlier answer only as a variable
        ox(system, [("user", f"Write a short reply (the customer is angry) to: {message}")], temperature=0.7),
    ]
    assert [b.get("stream", False) for b in server.bodies] == [False, True]  # only free text streams


def test_batch_classifier(server: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    out = run("batch_classifier.py", capsys)
    assert out == [
        "billing    urgent=True  I was charged twice for March.",
        "technical  urgent=True  The router keeps rebooting every hour.",
        "sales      urgent=False Do you offer a business plan with a static IP?",
        "Total cost: $0.0000",  # genai-prices knows the model; 10 in / 2 out tokens a request
    ]
    system = "You classify customer support tickets."
    expected = []
    for ticket, team in (("I was charged twice for March.", "billing"),
                         ("The router keeps rebooting every hour.", "technical"),
                         ("Do you offer a business plan with a static IP?", "sales")):
        question = f"Ticket: {ticket}\n\nWhich team should handle it?"
        expected += [
            ox(system, [("user", question)], temperature=0.0, choices=["billing", "technical", "sales"]),
            ox(system, [("user", question), ("assistant", team), ("user", "Does it need an answer today?")],
               temperature=0.0, typed=True),
        ]
    assert canon([sent(b) for b in server.bodies]) == canon(expected)


def test_actions_user(server: FakeOpenAI, capsys: pytest.CaptureFixture[str], registered: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run("actions_user.py", capsys)
    assert out == [
        "A-100 | Order A-100: two lamps, shipped Monday | It shipped on Monday.",
        "Z-999 | unknown order | I cannot find that order.",
    ]
    assert [str(w.message) for w in caught if "order_status" in str(w.message)] == [
        "action @order_status failed (KeyError: 'Z-999'); using 'unknown order'"
    ]
    history = [("user", "Where is my order A-100?"), ("assistant", "Let me check.")]
    last = ("user", "Answer the customer's last question in one sentence.")
    system = "You answer questions about orders."
    assert [sent(b) for b in server.bodies] == [
        ox(system, [*history, ("user", "Order A-100: two lamps, shipped Monday"), last], temperature=0.7),
        ox(system, [*history, ("user", "unknown order"), last], temperature=0.7),
    ]


def test_research_script(server: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    out = run("research_script.py", capsys, "notes")
    points = ["Caffeine delays sleep onset by about twenty minutes.", "Coffee after 2pm shortens deep sleep."]
    assert out[1:] == [f"points: {points}", "summary: Caffeine, especially after 2pm, worsens sleep."]
    evidence = server.bodies[0]["messages"][1]["content"]
    assert out[0] == "evidence: " + evidence.splitlines()[0]
    assert "Caffeine delays sleep onset" in evidence  # the passages BM25 ranked for the question
    system = "You are a careful research assistant."
    assert [sent(b) for b in server.bodies] == [
        ox(system, [("user", evidence),
                    ("user", "Question: Does caffeine affect sleep?\nQuote the key points from the evidence above:")],
           temperature=0.0, typed=True),
        # the checkpoint: a new conversation; the list renders through str(), as in 0.x
        ox(system, [("user", f"Key points: {points}\nSummarise them for a busy reader:")], temperature=0.7),
    ]


def test_cli_workflow(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `sd …` line of the shell script, as the shell splits it, run in this process
    (a process per command would cost seconds of the suite's minute)."""
    monkeypatch.setenv("DEFAULT_LLM", MODEL)
    commands = [shlex.split(line) for line in (SCRIPTS / "cli_workflow.sh").read_text().splitlines()
                if line.startswith("sd ")]
    assert [c[:2] for c in commands] == [["sd", "chat"], ["sd", "batch"]]
    for command in commands:
        result = cli(*command[1:])
        assert result.exit_code == 0, result.output
    assert json.loads(Path("triage.json").read_text()) == {"name": "Dana", "money": True}
    import csv

    with open("classified.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["filename"], json.loads(r["label"])["team"]) for r in rows] == [
        ("tickets/a.txt", "billing"), ("tickets/b.txt", "technical"),
    ]  # -h 2: the first two files
    hello = "Hello, my name is Dana and my bill looks wrong.\nWhat is my name?"
    tickets = [("tickets/a.txt", "I was charged twice for March."),
               ("tickets/b.txt", "The router keeps rebooting every hour.")]
    expected = [
        ox(SYSTEM_TRIAGE, [("user", hello)], temperature=0.7),
        ox(SYSTEM_TRIAGE, [("user", hello), ("assistant", "Dana"), ("user", "Is this about money?")],
           temperature=0.0, typed=True),
        # a text input's text ends with its newline; a 0.x YAML type without llm_config runs at 0.7
        *[ox(None, [("user", f"Ticket {name}:\n{text}\n\n\nLabel it:")], temperature=0.7,
             choices=["billing", "technical", "sales"]) for name, text in tickets],
    ]
    assert canon([sent(b) for b in server.bodies]) == canon(expected)

"""The language server under malformed input and bursts of edits, byte for byte over
pipes: the server in this process on a thread (`InProcess`, with timers the test
fires), and `sd lsp` as a subprocess (marker `editor`)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lsp_pipes import SD, TIMEOUT, InProcess, Subprocess, Wire, frame

TEXT = "Which colour?\n[[pick:colour|red, blue]]\n"
HOVER_AT = {"line": 1, "character": 4}


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[InProcess]:
    pipes = InProcess()
    pipes.initialize()
    yield pipes
    pipes.stop()


def open_document(wire: Wire, path: Path, text: str = TEXT, version: int = 1) -> str:
    uri = path.as_uri()
    item = {"uri": uri, "languageId": "struckdown", "version": version, "text": text}
    wire.notify("textDocument/didOpen", {"textDocument": item})
    wire.barrier()
    published = wire.notifications.pop()
    assert (published["method"], published["params"]["uri"], published["params"]["version"]) == (
        "textDocument/publishDiagnostics", uri, version
    )
    return uri


def hover_request(uri: str, msg_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": HOVER_AT}}


def parse_error(message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": message}}


def bad_frames(uri: str) -> list[tuple[str, bytes, str]]:
    body = json.dumps(hover_request(uri, 99)).encode()
    return [
        ("non-numeric", b"Content-Length: abc\r\n\r\n" + body,
         "bad message header: Content-Length 'abc' is not a byte count; the message is skipped"),
        ("negative", b"Content-Length: -12\r\n\r\n" + body,
         "bad message header: Content-Length '-12' is not a byte count; the message is skipped"),
        ("missing", b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body,
         "bad message header: a message without a Content-Length header"),
        ("larger than the body", b"Content-Length: %d\r\n\r\n" % (len(body) + 500) + body[:40],
         f"bad message header: the body ended after 40 of the {len(body) + 500:,} bytes its Content-Length promised "
         "(the next message's header came first); the message is skipped"),
        ("smaller than the body", b"Content-Length: 20\r\n\r\n" + body,
         "the message body is not JSON: Unterminated string starting at: line 1 column 20 (char 19)"),
        ("too large", b"Content-Length: 999999999999\r\n\r\n" + body,
         "bad message header: Content-Length 999,999,999,999 is above the limit of 268,435,456 bytes; the message is skipped"),
        ("not JSON", frame_bytes(b"{not json"),
         "the message body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ]


def frame_bytes(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_each_bad_content_length_gets_a_parse_error_with_id_null_and_the_next_message_is_answered(
    wire: InProcess, tmp_path: Path
) -> None:
    uri = open_document(wire, tmp_path / "t.sd")
    for number, (case, raw, message) in enumerate(bad_frames(uri), start=1):
        wire.send_raw(raw + frame(hover_request(uri, number)))
        assert wire.receive() == parse_error(message), case
        answer = wire.receive()
        assert answer["id"] == number, case  # the request after the bad one; id 99 is never answered
        assert answer["result"]["contents"]["value"].startswith("**slot `colour`**: `pick`"), case
    assert [n["method"] for n in wire.notifications] == []


def test_bad_frames_sent_a_byte_at_a_time_get_the_same_answers(wire: InProcess, tmp_path: Path) -> None:
    uri = open_document(wire, tmp_path / "t.sd")
    cases = bad_frames(uri)[:4]
    stream = b"".join(raw + frame(hover_request(uri, n)) for n, (_, raw, _) in enumerate(cases, start=1))
    for index in range(len(stream)):
        wire.send_raw(stream[index : index + 1])
    for number, (case, _, message) in enumerate(cases, start=1):
        assert wire.receive() == parse_error(message), case
        assert wire.receive()["id"] == number, case


def test_junk_between_messages_is_one_error_and_a_valid_message_after_it_is_answered(
    wire: InProcess, tmp_path: Path
) -> None:
    uri = open_document(wire, tmp_path / "t.sd")
    wire.send_raw(b"hello\n" + frame(hover_request(uri, 1)))
    assert wire.receive() == parse_error("bad message header: skipped 6 bytes that are not a message header")
    assert wire.receive()["id"] == 1
    wire.send_raw(frame_bytes(b"[1, 2]") + frame_bytes(b'{"id": 7, "method": "x"}') + frame(hover_request(uri, 2)))
    invalid = 'not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0")'
    assert wire.receive() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": invalid}}
    assert wire.receive() == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": invalid}}
    assert wire.receive()["id"] == 2


def test_a_request_with_invalid_params_gets_invalid_params_with_its_id_and_the_bad_field(
    wire: InProcess, tmp_path: Path
) -> None:
    uri = open_document(wire, tmp_path / "t.sd")
    document = {"uri": uri}
    cases = [
        ("textDocument/hover", {"textDocument": document, "position": {"line": "one", "character": 0}},
         "invalid value for type, expected int @ $.params.position.line"),
        ("textDocument/hover", {"textDocument": document}, "required field missing @ $.params.position"),
        ("textDocument/completion", [1, 2],
         "invalid value for type, expected TextDocumentIdentifier @ $.params.textDocument; "
         "invalid value for type, expected Position @ $.params.position"),
        ("textDocument/semanticTokens/full", {"textDocument": {}},
         "required field missing @ $.params.textDocument.uri"),
        ("textDocument/hover", {"textDocument": document, "position": {"line": -1, "character": 0}},
         "invalid value (Position.line should be in range [0:2147483647], but was -1) @ $.params.position"),
    ]
    for method, params, detail in cases:
        answer = wire.call(method, params)
        assert answer == {
            "jsonrpc": "2.0", "id": answer["id"],
            "error": {"code": -32602, "message": f"invalid params for {method}: {detail}"},
        }
    missing = (tmp_path / "never.sd").as_uri()
    answer = wire.call("textDocument/hover", {"textDocument": {"uri": missing}, "position": HOVER_AT})
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"].startswith(f"{missing} is not open and cannot be read: [Errno 2] No such file")
    # a notification has no response: its error goes to the client's log, not a pop-up
    wire.notify("textDocument/didChange", {"textDocument": {"uri": uri}})
    wire.barrier()
    assert wire.notifications == [{
        "jsonrpc": "2.0", "method": "window/logMessage",
        "params": {"type": 1, "message": "invalid params for textDocument/didChange: "
                   "required field missing @ $.params.textDocument.version; "
                   "required field missing @ $.params.contentChanges"},
    }]
    hover = wire.call("textDocument/hover", {"textDocument": document, "position": HOVER_AT})
    assert hover["result"]["contents"]["value"].startswith("**slot `colour`**")


LAST = "Which colour?\n[[number:colour|mni=3]]\n"


def change(wire: Wire, uri: str, version: int, text: str) -> None:
    wire.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                           "contentChanges": [{"text": text}]})


def test_a_burst_of_changes_is_one_diagnostics_run_on_the_last_text(wire: InProcess, tmp_path: Path) -> None:
    uri = open_document(wire, tmp_path / "t.sd")
    assert wire.server.analyses == 1

    for version in range(2, 7):
        change(wire, uri, version, LAST if version == 6 else TEXT.replace("colour", f"colour{version}"))
    tokens = wire.request("textDocument/semanticTokens/full", {"textDocument": {"uri": uri}})
    wire.barrier()
    # five changes, one timer left running (the other four cancelled), nothing published,
    # the token request waiting for the same run
    assert [t.cancelled for t in wire.timers.timers] == [True, True, True, True, False]
    assert {t.delay for t in wire.timers.timers} == {0.2}
    assert wire.notifications == []
    assert wire.server.analyses == 1

    wire.timers.fire()
    answer = wire.response(tokens)
    assert len(wire.notifications) == 1
    published = wire.notifications[0]["params"]
    assert published["version"] == 6
    assert [(d["range"], d["message"].splitlines()[0]) for d in published["diagnostics"]] == [
        ({"start": {"line": 1, "character": 16}, "end": {"line": 1, "character": 20}}, "unknown option 'mni' for a number slot")
    ]
    legend = wire.legend
    rows = answer["result"]["data"]
    assert [(rows[i], rows[i + 1], rows[i + 2], legend[rows[i + 3]]) for i in (0, 5)] == [
        (1, 0, 2, "operator"), (0, 2, 6, "type")  # `[[` and `number` of the last text
    ]
    assert wire.server.analyses == 2  # the burst: one analysis, for diagnostics and tokens alike
    wire.barrier()
    assert len(wire.notifications) == 1


def test_save_runs_the_pending_diagnostics_at_once_and_close_cancels_them(wire: InProcess, tmp_path: Path) -> None:
    uri = open_document(wire, tmp_path / "t.sd")
    change(wire, uri, 2, "A [[pick:x]]\n")
    change(wire, uri, 3, "B [[pick:x]]\n")
    wire.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    wire.barrier()
    assert [(n["params"]["version"], len(n["params"]["diagnostics"])) for n in wire.notifications] == [(3, 1)]
    assert wire.timers.live() == []
    change(wire, uri, 4, TEXT)
    wire.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    wire.barrier()
    assert wire.timers.live() == []
    assert wire.notifications[1]["params"] == {"uri": uri, "diagnostics": []}
    assert len(wire.notifications) == 2


def test_the_delay_is_an_initialization_option() -> None:
    pipes = InProcess()
    pipes.initialize({"diagnosticsDelay": 750})
    try:
        assert pipes.server.debounce.delay == 0.75
    finally:
        pipes.stop()


@pytest.mark.editor
def test_sd_lsp_answers_bad_frames_and_invalid_params_and_exits_cleanly(tmp_path: Path) -> None:
    server = Subprocess()
    server.initialize()
    uri = open_document(server, tmp_path / "t.sd")
    for number, (case, raw, message) in enumerate(bad_frames(uri), start=1):
        server.send_raw(raw + frame(hover_request(uri, number)))
        assert server.receive() == parse_error(message), case
        assert server.receive()["id"] == number, case
    answer = server.call("textDocument/hover", {"textDocument": {"uri": uri}})
    assert answer["error"] == {"code": -32602, "message": "invalid params for textDocument/hover: "
                               "required field missing @ $.params.position"}
    code, stderr = server.stop()
    assert code == 0
    assert "Content-Length 'abc' is not a byte count" in stderr
    assert "Traceback" not in stderr


@pytest.mark.editor
def test_sd_lsp_exits_1_after_exit_without_shutdown() -> None:
    """The LSP spec: the server exits with 1 when `exit` comes before any `shutdown`."""
    server = Subprocess()
    server.initialize()
    server.notify("exit", None)
    server.to_server.close()
    code = server.process.wait(TIMEOUT)
    assert server.process.stderr is not None
    assert (code, server.process.stderr.read().decode()) == (1, "")


NODE_DIR = Path(__file__).resolve().parent / "node"


@pytest.mark.editor
def test_vscode_jsonrpc_logs_the_parse_error_and_keeps_talking_to_sd_lsp(tmp_path: Path) -> None:
    """vscode-jsonrpc (VS Code's client library) gets the `id: null` parse error as a log
    line, not a failure, and its next requests are answered."""
    assert (NODE_DIR / "node_modules" / "vscode-jsonrpc").is_dir(), "run `npm ci` in tests/editor/node"
    uri = (tmp_path / "t.sd").as_uri()
    done = subprocess.run(
        ["node", str(NODE_DIR / "lsp_client.js"), str(SD), uri, TEXT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    header = "bad message header: Content-Length 'abc' is not a byte count; the message is skipped"
    invalid = "invalid params for textDocument/hover: invalid value for type, expected int @ $.params.position.line"
    assert out["logged"] == [
        ["error", "Received response message without id: Error is: \n"
         + json.dumps({"code": -32700, "message": header}, indent=4)]
    ]
    assert out["invalid"] == {"code": -32602, "message": invalid}
    assert out["hover"] == "**slot `colour`**: `pick`, one answer, may be null"
    assert out["notifications"] == ["textDocument/publishDiagnostics"]
    assert (out["code"], out["stderr"]) == (0, f"struckdown lsp: ERROR: {header}\nstruckdown lsp: ERROR: {invalid}\n")


def test_requests_share_one_analysis_until_the_text_or_the_context_file_changes(wire: InProcess, tmp_path: Path) -> None:
    context = tmp_path / "t.json"
    context.write_text('{"city": "Oslo"}')
    text = "Weather in {{ c"
    uri = open_document(wire, tmp_path / "t.sd", text)
    position = {"line": 0, "character": len(text)}

    def labels() -> list[str]:
        answer = wire.call("textDocument/completion", {"textDocument": {"uri": uri}, "position": position})
        return [item["label"] for item in answer["result"]["items"]]

    assert labels() == ["city"]
    wire.call("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 1}})
    assert wire.server.analyses == 1  # open, completion and hover: one analysis
    context.write_text('{"city": "Oslo", "country": "Norway"}')
    stamp = context.stat().st_mtime_ns + 5_000_000_000
    os.utime(context, ns=(stamp, stamp))
    assert labels() == ["city", "country"]
    assert wire.server.analyses == 2

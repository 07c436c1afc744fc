"""`sd serve` over HTTP: the token, the limits, the allow-lists and the sandbox."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from pathlib import Path

import pytest
from http_support import http_serving
from web_support import client, run_events, serving, sse, use_scripted_model

from struckdown.web import WebConfig
from struckdown.web.pool import PoolLimits

KEY = "team-key"
OTHER = "other-key"


def config(**changes: object) -> WebConfig:
    base: dict[str, object] = {
        "mode": "serve",
        "tokens": (KEY, OTHER),
        "models": ("test",),
        # 2 s: the runaway below needs 4 s or more, and a plain run on a busy 2-core machine
        # (the suite's other worker, a build beside it) still finishes well inside it
        "limits": PoolLimits(workers=3, time_limit_s=2.0, memory_mb=200),
    }
    base.update(changes)
    return WebConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """One server for most tests. The environment allows @fetch, as a careless
    operator's might: the server must still refuse it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STRUCKDOWN_ALLOW_FETCH", "1")
        with serving(config(max_body_bytes=4000)) as base:
            yield base


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/"), ("GET", "/static/app.js"), ("GET", "/api/config"), ("POST", "/api/check"), ("POST", "/api/run")],
)
@pytest.mark.parametrize("token", [None, "wrong"])
def test_every_endpoint_answers_401_without_the_token(server: str, method: str, path: str, token: str | None) -> None:
    response = client(server, token).request(method, path, json={"template": "[[a]]"})
    assert response.status_code == 401
    assert response.json() == {"error": "a valid token is required: Authorization: Bearer TOKEN, or ?token=TOKEN"}


def test_the_page_opens_with_the_token_in_the_query_and_its_assets_carry_it(server: str) -> None:
    http = client(server)
    page = http.get("/", params={"token": KEY})
    assert page.status_code == 200
    assert '<script src="/static/app.js?token=team-key">' in page.text
    assert http.get("/static/app.js", params={"token": KEY}).status_code == 200
    assert http.get("/static/style.css", params={"token": OTHER}).status_code == 200


def test_a_body_over_the_size_limit_is_413_with_or_without_a_length(server: str) -> None:
    http = client(server, KEY)
    big = {"template": "x" * 5000 + " [[a]]"}
    assert http.post("/api/check", json=big).status_code == 413

    def chunks() -> Iterator[bytes]:  # chunked: no Content-Length to check up front
        yield b'{"template": "'
        for _ in range(20):
            yield b"x" * 300
        yield b' [[a]]"}'

    response = http.post("/api/check", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json() == {"error": "request body over 4,000 bytes"}
    assert http.post("/api/check", json={"template": "x" * 3000 + " [[a]]"}).status_code == 200


def test_the_rate_limit_is_per_key() -> None:
    with serving(config(rate_per_minute=2)) as base:
        first, second = client(base, KEY), client(base, OTHER)
        run = {"template": "Hi [[a]]", "model": "test"}
        assert [first.post("/api/run", json=run).status_code for _ in range(2)] == [200, 200]
        refused = first.post("/api/run", json=run)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "60"
        assert refused.json() == {"error": "more than 2 runs a minute with this key"}
        assert second.post("/api/run", json=run).status_code == 200
        # checks as the author types have their own, larger allowance
        assert [first.get("/api/config").status_code for _ in range(20)] == [200] * 20
        assert first.get("/api/config").json() == {"error": "more than 20 requests a minute with this key"}


def test_a_model_outside_the_allow_list_is_refused(server: str) -> None:
    http = client(server, KEY)
    refused = http.post("/api/run", json={"template": "Hi [[a]]", "model": "openai:gpt-4o"})
    assert refused.status_code == 403
    assert refused.json() == {"error": "model 'openai:gpt-4o' is not allowed here; allowed: test"}
    events = run_events(http, {"template": "Hi [[a]]", "model": "test"})
    assert [e["type"] for e in events][0] == "run_started"
    assert events[-1]["type"] == "processing_complete"
    assert events[-1]["result"] == {"a": "success (no tool calls)"}


def test_without_an_allow_list_only_the_default_model_runs() -> None:
    with serving(config(models=())) as base:
        refused = client(base, KEY).post("/api/run", json={"template": "Hi [[a]]", "model": "test"})
        assert refused.status_code == 403
        assert refused.json() == {"error": "model 'test' is not allowed here: this server uses its default model only"}


@pytest.fixture
def page_server() -> Iterator[tuple[str, list[str]]]:
    """A plain HTTP server on loopback that records every path asked of it."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<p>secret</p>")

        def log_message(self, *args: object) -> None:
            pass

    with http_serving(Handler) as base:
        yield base, hits


def test_fetch_is_refused_even_when_the_environment_allows_it(server: str, page_server: tuple[str, list[str]]) -> None:
    url, hits = page_server
    template = f'[[@fetch:page|url="{url}/private"]]\nSummarise {{{{ page }}}} [[a]]'
    response = client(server, KEY).post("/api/run", json={"template": template, "model": "test"})
    assert response.status_code == 403
    assert response.json() == {"error": "@fetch is turned off on this server (no network or side-effecting actions)"}
    assert hits == []
    (diagnostic,) = client(server, KEY).post("/api/check", json={"template": template}).json()["diagnostics"]
    assert diagnostic == {
        "line": 1, "column": 1, "severity": "error", "hint": None,
        "message": "@fetch is turned off on this server (no network or side-effecting actions)",
    }


def test_requests_cannot_bring_tools_or_files(server: str) -> None:
    http = client(server, KEY)
    tools = http.post("/api/run", json={"template": "[[a|use_tools=true]]", "tools": "evil.py"})
    assert tools.status_code == 403
    assert tools.json() == {"error": "this server runs only the tools its operator provides"}
    path = http.post("/api/check", json={"template": "[[a]]", "path": "../etc/passwd"})
    assert path.status_code == 403
    assert http.get("/api/files").status_code == 404
    assert http.get("/api/file", params={"path": "x.sd"}).status_code == 404


def test_includes_find_no_files_on_a_shared_server(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secret.sd").write_text("the secret is swordfish-7f3a [[a]]")
    template = f'<include src="{tmp_path / "secret.sd"}"/>\n[[b]]'
    events = run_events(client(server, KEY), {"template": template, "model": "test"})
    assert [e["type"] for e in events] == ["diagnostics"]
    (diagnostic,) = events[0]["diagnostics"]
    assert "outside" in diagnostic["message"], diagnostic
    assert "swordfish-7f3a" not in str(events)


def test_operator_tools_are_the_ones_that_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_scripted_model(monkeypatch)
    tools = tmp_path / "tools.py"
    tools.write_text('def lookup(word: str) -> str:\n    """Look a word up."""\n    return f"{word} wrote the first program"\n')
    with serving(config(models=(), tools_file=tools)) as base:
        http = client(base, KEY)
        assert http.get("/api/config").json()["tools"] == [
            {"name": "lookup", "summary": "(word: str) -> str  Look a word up.", "readonly": False}
        ]
        events = run_events(http, {"template": "Greet Ada. [[greeting|use_tools=true]]"})
    started = [e for e in events if e["type"] == "tool_started"]
    completed = [e for e in events if e["type"] == "tool_completed"]
    assert [(e["tool_name"], e["arguments"]) for e in started] == [("lookup", {"word": "Ada"})]
    assert completed[0]["output"] == "Ada wrote the first program"
    assert events[-1]["result"] == {"greeting": "Hello Ada, Ada wrote the first program!"}


BOMBS = [
    ("{{ 'x' * 10**9 }} [[a]]", "'*' would build a sequence longer than 1,000,000 items"),
    ("{{ range(10**9)|list|length }} [[a]]", "Range too big"),
    ("{{ 'x'|center(10**9) }} [[a]]", "MemoryError"),
    ("{{ 'x'.ljust(10**9) }} [[a]]", "MemoryError"),
    # grows step by step: the memory cap or, on a slow machine, the time cap ends it first
    ("{% for i in range(99999) %}{{ 'x' * 999999 }}{% endfor %} [[a]]", "MemoryError|TimeLimitExceeded"),
]


@pytest.mark.parametrize(("template", "words"), BOMBS)
def test_allocation_bombs_are_answered_with_an_error(server: str, template: str, words: str) -> None:
    """The worker's memory and time caps end the bomb (its error names the cap that fired),
    and the server goes on serving; no wall-clock bound is asserted."""
    events = run_events(client(server, KEY), {"template": template, "model": "test"})
    assert events[-1]["type"] == "processing_error"
    assert any(word in events[-1]["error"] for word in words.split("|")), events[-1]["error"]
    assert "processing_complete" not in [e["type"] for e in events]
    after = run_events(client(server, OTHER), {"template": "Hi [[a]]", "model": "test"})  # still serving
    assert after[-1]["type"] == "processing_complete"


# Each text stays under the sandbox's work limit (240,800 of 250,000 loop steps: a tenth
# of a second or more), but 40 of them run past the worker's 2 s time limit (and the
# template fits the test server's 4,000-byte body limit).
RUNAWAY = "".join(f"{{%for i in range(400)%}}{{%for j in range(601)%}}{{%endfor%}}{{%endfor%}}[[a{k}]]" for k in range(40))


def test_the_server_keeps_serving_while_a_runaway_template_runs(server: str) -> None:
    loop = RUNAWAY
    runaway, other = client(server, KEY), client(server, OTHER)
    with runaway.stream("POST", "/api/run", json={"template": loop, "model": "test"}) as response:
        messages = sse(response)
        assert next(messages)["type"] == "run_started"  # the worker is inside the loop now
        check = other.post("/api/check", json={"template": "fine [[a]]"})
        assert check.status_code == 200
        assert check.json() == {"type": "diagnostics", "diagnostics": [], "context_error": None}
        rest = list(messages)
    assert rest[-1] == {"type": "processing_error", "slot": None, "error": "TimeLimitExceeded: the request ran longer than 2 s"}
    assert "processing_complete" not in [e["type"] for e in rest]
    after = run_events(other, {"template": "Hi [[a]]", "model": "test"})
    assert after[-1]["type"] == "processing_complete"


def test_a_client_that_leaves_frees_its_worker(server: str) -> None:
    loop = RUNAWAY
    http = client(server, KEY)
    for _ in range(4):  # more than the 3 workers: each abandoned run must give its place back
        with http.stream("POST", "/api/run", json={"template": loop, "model": "test"}) as response:
            assert next(sse(response))["type"] == "run_started"
    events = run_events(http, {"template": "Hi [[a]]", "model": "test"})
    assert events[-1]["type"] == "processing_complete"


def test_a_syntax_error_in_a_run_comes_back_as_a_positioned_diagnostic(server: str) -> None:
    events = run_events(client(server, KEY), {"template": "line one\nline [[bool:x|]]", "model": "test"})
    assert len(events) == 1
    assert events[0]["type"] == "diagnostics"
    (diagnostic,) = events[0]["diagnostics"]
    assert (diagnostic["line"], diagnostic["severity"]) == (2, "error")


def test_a_run_that_sends_more_than_the_output_budget_is_cut_off() -> None:
    with serving(config(limits=PoolLimits(workers=1, output_bytes=3000))) as base:
        http = client(base, KEY)
        long = "y" * 2000
        events = run_events(http, {"template": f'[[@set:a|"{long}"]] [[@set:b|"{long}"]]', "model": "test"})
        assert events[-1] == {
            "type": "processing_error", "slot": None,
            "error": "OutputLimitExceeded: the run produced more output than this server sends",
        }
        assert run_events(http, {"template": "Hi [[a]]", "model": "test"})[-1]["type"] == "processing_complete"


def test_the_servers_socket_says_tcp_so_its_connections_get_tcp_nodelay() -> None:
    """asyncio sets TCP_NODELAY only on a socket made with IPPROTO_TCP; without it each
    request after the first on a kept-alive connection waited for a delayed ACK (~40 ms)."""
    import socket

    from struckdown.cli.web_cmd import listening_socket

    with listening_socket("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockname()[1] > 0

"""What `mcp=` accepts and the names it gives servers, without starting any (SPEC §16);
the template's `mcp=` option; and the MCP stack staying unimported until a session opens."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import struckdown as sd
from struckdown.tools.mcp import ServerSpec, resolve_servers

SCRIPT = Path(__file__).parent / "notes_server.py"


def names(value: object) -> list[str]:
    return [spec.name for spec in resolve_servers(value)]


def test_servers_are_named_after_what_they_are() -> None:
    assert names("https://mcp.deepwiki.com/mcp") == ["deepwiki"]
    assert names("http://127.0.0.1:8000/mcp") == ["mcp"]
    assert names(str(SCRIPT)) == ["notes_server"]
    assert names(SCRIPT) == ["notes_server"]
    assert names(f"{sys.executable} -m notes.server --port 1") == ["notes_server"]
    assert names(f"{sys.executable} {SCRIPT}") == ["notes_server"]
    assert names(["notes=http://localhost:9/mcp", f"files={SCRIPT} --root /tmp"]) == ["notes", "files"]
    assert names({"a": "http://localhost:9/mcp", "b": SCRIPT}) == ["a", "b"]


def test_a_url_is_streamable_http_and_a_script_runs_with_this_python() -> None:
    url, script = resolve_servers(["http://localhost:9/mcp", f"{SCRIPT} --log x"])
    assert (url.kind, url.url) == ("http", "http://localhost:9/mcp")
    assert script == ServerSpec("notes_server", "stdio", command=(sys.executable, str(SCRIPT.resolve()), "--log", "x"))


def test_an_mcp_json_in_the_claude_desktop_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTES_TOKEN", "t0ken")
    monkeypatch.delenv("UNSET_VAR", raising=False)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "notes": {"command": "python3", "args": ["-m", "notes"], "env": {"TOKEN": "${NOTES_TOKEN}"}, "cwd": "/srv"},
        "web": {"url": "https://example.org/mcp", "headers": {"X-Level": "${UNSET_VAR:-low}"}},
    }}))  # fmt: skip
    notes, web = resolve_servers(config)
    assert notes == ServerSpec(
        "notes", "stdio", command=("python3", "-m", "notes"), env=(("TOKEN", "t0ken"),), cwd="/srv"
    )
    assert web == ServerSpec("web", "http", url="https://example.org/mcp", headers=(("X-Level", "low"),))
    assert ServerSpec.from_plain(notes.plain() or {}) == notes  # specs travel to Dask workers as plain data


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{", "is not valid JSON"),
        ('{"servers": {}}', 'has no "mcpServers" object'),
        ('{"mcpServers": {"a": {"args": []}}}', "server 'a' needs a command or a url"),
        ('{"mcpServers": {"a": {"url": "${NO_SUCH_VARIABLE}"}}}', "environment variable ${NO_SUCH_VARIABLE} is not set"),
        ('{"mcpServers": {"a b": {"url": "http://x"}}}', "'a b' is not a valid MCP server name"),
    ],
)
def test_a_broken_mcp_json_is_a_clear_error(tmp_path: Path, config: str, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(config)
    with pytest.raises(ValueError, match=message.replace("$", r"\$").replace("{", r"\{").replace("}", r"\}")):
        resolve_servers(str(path))


def test_bad_servers_are_errors_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="MCP server script .*missing.py does not exist"):
        sd.Environment(mcp=str(tmp_path / "missing.py"))
    with pytest.raises(ValueError, match="'no-such-mcp-server' is not a file or a program on PATH"):
        resolve_servers("no-such-mcp-server --flag")
    with pytest.raises(ValueError, match="two MCP servers are named 'mcp'"):
        resolve_servers(["http://127.0.0.1:1/mcp", "http://127.0.0.1:2/mcp"])
    with pytest.raises(ValueError, match="cannot be read"):
        resolve_servers(tmp_path / "absent.json")
    with pytest.raises(TypeError, match="mcp= takes URLs, commands"):
        resolve_servers([42])


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("[[a|mcp=true]]", 'bad value for mcp: expected MCP server names: mcp=name or mcp="a, b"'),
        ('[[a|mcp="notes, f!les"]]', "bad value for mcp: 'f!les' is not an MCP server name (letters, digits, _ and -)"),
        ('[[a|mcp=""]]', 'bad value for mcp: expected MCP server names: mcp=name or mcp="a, b"'),
    ],
)
def test_a_bad_mcp_option_is_a_syntax_error(template: str, message: str) -> None:
    with pytest.raises(sd.TemplateSyntaxError) as info:
        sd.parse(template)
    assert info.value.message == message


@pytest.mark.process  # the point: a fresh interpreter's sys.modules
def test_the_mcp_stack_is_imported_only_when_a_session_opens() -> None:
    """`import struckdown`, parsing, and a run with tools and MCP servers none of its
    slots use leave the `mcp` package, fastmcp and pydantic_ai.mcp unimported."""
    code = f"""
import sys
import struckdown as sd
from pydantic_ai.models.test import TestModel
def lookup(q: str) -> str:
    return q
sd.parse("[[a|mcp=notes]]")
sd.complete("[[b]]", model=TestModel(), mcp={{"notes": "http://127.0.0.1:9/mcp", "s": {str(SCRIPT)!r}}})
sd.complete("[[a|use_tools=true]]", model=TestModel(), tools=[lookup])
print(sorted(m for m in ("mcp", "fastmcp", "pydantic_ai.mcp", "mcp_types") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

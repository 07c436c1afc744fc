"""Issue 40 item 14: an MCP stdio server's own stderr goes to its log file
(`STRUCKDOWN_MCP_LOG_DIR/<server>.log`), not between `sd`'s lines; a server that will not
start is reported with the last lines it wrote there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_models import calls_tool_once, scripted
from cli_support import plain_environment, sd, use_model  # noqa: F401 - fixtures

pytestmark = pytest.mark.process  # real MCP server processes over stdio

NOISY = '''import sys

from mcp.server.mcpserver import MCPServer

print("noisy: starting up", file=sys.stderr, flush=True)
server = MCPServer("noisy", log_level="WARNING")


@server.tool()
def echo(word: str) -> str:
    """Say the word back."""
    print(f"noisy: echo called with {word}", file=sys.stderr, flush=True)
    return word


server.run()
'''
BROKEN = '''import sys

print("broken: reading its settings", file=sys.stderr, flush=True)
raise SystemExit("broken: no settings file at /etc/broken.toml")
'''


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "mcp-logs"
    monkeypatch.setenv("STRUCKDOWN_MCP_LOG_DIR", str(folder))
    return folder


def test_a_stdio_servers_stderr_goes_to_its_log_file_not_to_sd(tmp_path: Path, logs: Path, use_model: Any) -> None:
    (tmp_path / "noisy.py").write_text(NOISY)
    template = tmp_path / "t.sd"
    template.write_text("Echo owl [[a|mcp=noisy]]\n")
    use_model(scripted(calls_tool_once("noisy_echo", {"word": "owl"}, lambda output: f"got {output}")))
    result = sd("run", template, "--mcp", tmp_path / "noisy.py", "--json", "--no-cache")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"a": "got owl"}
    assert "noisy:" not in result.stderr
    header, *lines = (logs / "noisy.log").read_text().splitlines()
    assert header.startswith("--- ") and header.endswith(f"starts MCP server 'noisy': {' '.join(_command(tmp_path))}")
    assert lines == ["noisy: starting up", "noisy: echo called with owl"]


def test_a_server_that_will_not_start_is_reported_with_its_last_stderr_lines(
    tmp_path: Path, logs: Path, use_model: Any
) -> None:
    (tmp_path / "broken.py").write_text(BROKEN)
    template = tmp_path / "t.sd"
    template.write_text("Echo owl [[a|mcp=broken]]\n")
    use_model(scripted(lambda prompt, info: "unused"))
    result = sd("run", template, "--mcp", tmp_path / "broken.py", "--no-cache")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: slot 'a': MCPServerError: MCP server 'broken': could not open a session: MCPError: Connection closed; "
        "its stderr ends: broken: reading its settings | broken: no settings file at /etc/broken.toml "
        f"(log: {logs / 'broken.log'})"
    )
    assert "Traceback" not in result.stderr and "never retrieved" not in result.stderr


def _command(folder: Path) -> list[str]:
    import sys

    return [sys.executable, str((folder / "noisy.py").resolve())]

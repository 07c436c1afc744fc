"""`sd run` / `sd chat` / `sd batch` with --mcp and --mcp-config (SPEC §16), against the
module's HTTP test server; a scripted model stands in for the CLI's model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_models import calls_tool_once, scripted
from cli_support import plain_environment, sd, use_model  # noqa: F401
from mcp_support import HttpServer

pytestmark = pytest.mark.process  # real MCP server over streamable HTTP


@pytest.fixture(autouse=True)
def wide_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def lookup_model() -> Any:
    return scripted(calls_tool_once("notes_lookup", {"word": "owl"}, lambda output: f"got {output}"))


def test_sd_run_and_chat_use_the_servers_given_with_mcp(tmp_path: Path, notes: HttpServer, use_model: Any) -> None:
    template = tmp_path / "t.sd"
    template.write_text("Look up owl [[a|mcp=notes]]\n")
    use_model(lookup_model())
    for command in ("run", "chat"):
        result = sd(command, template, "--mcp", f"notes={notes.url}", "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == {"a": "got owl: a note about owl"}
        assert "notes_lookup" in result.stderr
    assert notes.record.calls == [("lookup", {"word": "owl"})] * 2 and notes.record.sessions == 2


def test_sd_batch_opens_one_session_for_all_rows(tmp_path: Path, notes: HttpServer, use_model: Any) -> None:
    template = tmp_path / "t.sd"
    template.write_text("Look up {{ word }} [[a|mcp=notes]]\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"word": f"w{i}"}) + "\n" for i in range(6)))
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"notes": {"url": notes.url}}}))
    use_model(lookup_model())
    out = tmp_path / "out.jsonl"
    result = sd("batch", template, rows, "--mcp-config", config, "-o", out)
    assert result.exit_code == 0, result.output
    answers = [json.loads(line)["a"] for line in out.read_text().splitlines()]
    assert answers == ["got owl: a note about owl"] * 6
    assert notes.record.sessions == 1


def test_bad_servers_and_unknown_names_are_input_errors(tmp_path: Path, notes: HttpServer, use_model: Any) -> None:
    template = tmp_path / "t.sd"
    template.write_text("Look up owl [[a|mcp=files]]\n")
    use_model(lookup_model())
    result = sd("run", template, "--mcp", "no-such-mcp-server --stdio")
    assert result.exit_code == 2
    assert result.stderr == "error: --mcp: MCP server command 'no-such-mcp-server' is not a file or a program on PATH\n"
    result = sd("run", template, "--mcp-config", tmp_path / "absent.json")
    assert result.exit_code == 2 and result.stderr.startswith("error: --mcp-config: MCP config ")
    result = sd("run", template, "--mcp", f"notes={notes.url}")
    assert result.exit_code == 2
    assert "t.sd:1:17: slot 'a' asks for MCP server 'files', which this run does not have" in result.stderr
    assert "hint: this run's MCP servers: notes" in result.stderr
    assert notes.record.sessions == 0


def test_sd_check_mcp_checks_tool_names_against_the_servers_tools(tmp_path: Path, notes: HttpServer) -> None:
    """Issue 40 item 4: `sd check --mcp` lists the servers' tools and checks every name."""
    template = tmp_path / "t.sd"
    template.write_text('Q [[a|use_tools=true, budget="notes_lokup=1"]]\nR [[b|use_tools=true, approve=notes_lookup]]\n')
    result = sd("check", template, "--mcp", f"notes={notes.url}")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"{template}:1:30: error: budget= names 'notes_lokup', which is not a tool of this run"
    assert "hint: did you mean 'notes_lookup'? the run's tools: notes_erase, notes_fail, notes_hang, notes_lookup, notes_remember" in result.stdout
    assert result.stderr == "1 error, 0 warnings in 1 template\n"

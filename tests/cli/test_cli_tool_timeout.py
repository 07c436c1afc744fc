"""SPEC §14 / §22 on the CLI: every `--tools` file tool is sync, so the per-call default
`tool_timeout` (60 s) protects `sd run` users only because it fires for a sync tool. The
default is lowered on the CLI's own environment for the test; the tool waits on a gate the
test holds (released at teardown)."""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, sd, use_model  # noqa: F401
from scripted import Script, Tools
from struckdown.environment import default_environment

GATE_GUARD_S = 10.0  # only so a run that waits for the thread fails instead of hanging

TOOLS_FILE = '''
import sd_cli_gate


def forecast(city: str) -> str:
    """The weather in a city (waits for the test's gate)."""
    if not sd_cli_gate.release.wait(sd_cli_gate.guard):
        sd_cli_gate.expired.append(city)
    return f"late: sunny in {city}"
'''


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.SimpleNamespace]:
    """What the tools file imports as `sd_cli_gate`."""
    shared = types.SimpleNamespace(release=threading.Event(), guard=GATE_GUARD_S, expired=[])
    monkeypatch.setitem(sys.modules, "sd_cli_gate", shared)
    yield shared
    shared.release.set()


def test_sd_run_cuts_a_sync_tools_file_tool_at_the_default_tool_timeout(
    tmp_path: Path, use_model: Any, gate: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment = default_environment()
    assert environment.tool_timeout == 60.0  # what `sd run` users get without asking
    monkeypatch.setitem(environment.defaults, "tool_timeout", 0.05)  # the same default, shorter for the test
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS_FILE, encoding="utf-8")
    template = tmp_path / "t.sd"
    template.write_text("Weather in Paris? [[answer|use_tools=true]]\n", encoding="utf-8")
    script = Script(lambda call: Tools([("forecast", {"city": "Paris"})]) if len(script.calls) == 1 else "no forecast")
    use_model(script.model())

    result = sd("run", template, "--tools", tools, "--no-cache")

    assert gate.expired == [], "sd run waited for the sync tool past its deadline"
    assert result.exit_code == 0, result.output
    message = "TimeoutError: tool 'forecast' took longer than 0.05 s"
    assert script.calls[1].turns == [
        ("user", "Weather in Paris?"),
        ("call", 'forecast({"city": "Paris"})'),
        ("return", message),
    ]
    assert "answer: no forecast\n" in result.stdout
    assert "late" not in result.output

"""`sd resume` on a state file someone may have edited (issue 39 N3, N4, N5).

The attack: the prompt asked `Allow issue_refund(order_id="5531", amount=49.0)?` and, after
an edit to the saved state, `amount=4900.0` ran. And `sd resume FILE` imported the tools
file and the model factory the state named before checking anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, sd  # noqa: F401

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SUPPORT = Path(__file__).resolve().parents[1] / "support"
TEMPLATE = EXAMPLES / "refund_agent.sd"
MODEL = "cli_models:refund_agent"


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.txt"
    monkeypatch.setenv("SD_TEST_CALLS", str(path))
    return path


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The refund tools, plus a line that records each import of the file (and each refund)."""
    marker = tmp_path / "imported.txt"
    monkeypatch.setenv("SD_TEST_IMPORTED", str(marker))
    source = (EXAMPLES / "refund_tools.py").read_text()
    source = source.replace("import struckdown\n", "import os\n\nimport struckdown\n\n"
                            "with open(os.environ['SD_TEST_IMPORTED'], 'a') as _log:\n    _log.write('imported\\n')\n", 1)
    source = source.replace('    return f"refunded {amount:.2f} for order {order_id}"',
                            "    with open(os.environ['SD_TEST_IMPORTED'], 'a') as log:\n"
                            "        log.write(f'refund {amount}\\n')\n"
                            '    return f"refunded {amount:.2f} for order {order_id}"')
    path = tmp_path / "refund_tools.py"
    path.write_text(source)
    return path, marker


def pause(tmp_path: Path, tools: Path, marker: Path, calls: Path) -> Path:
    state = tmp_path / "refund.state.json"
    result = sd("run", TEMPLATE, "--context", EXAMPLES / "refund_agent.json", "--tools", tools, "--model", MODEL,
                "--no-cache", "--pause-to", state)
    assert result.exit_code == 4, result.output
    assert (f"continue with: sd resume {state} --tools {tools} --model {MODEL} --approve reply.1") in result.stderr
    marker.unlink()
    calls.unlink()
    return state


def sd_process(*args: Any) -> subprocess.CompletedProcess[str]:
    pythonpath = os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "struckdown.cli", *map(str, args)],
                          env={**os.environ, "PYTHONPATH": pythonpath}, capture_output=True, text=True, timeout=120)


def edit(state: Path, change: Any) -> None:
    data = json.loads(state.read_text())
    change(data)
    state.write_text(json.dumps(data))


def refund_args(data: dict[str, Any]) -> dict[str, Any]:
    (slot,) = data["paused"]
    response = next(m for m in reversed(slot["messages"]) if m["kind"] == "response")
    part = next(p for p in response["parts"] if p.get("tool_name") == "issue_refund")
    if isinstance(part["args"], str):
        part["args"] = json.loads(part["args"])
    args: dict[str, Any] = part["args"]
    return args


@pytest.mark.process  # the attack as a user meets it: sd in a new process
def test_the_edited_amount_never_runs_end_to_end(tmp_path: Path, tools: tuple[Path, Path], calls: Path) -> None:
    path, marker = tools
    state = pause(tmp_path, path, marker, calls)
    edit(state, lambda data: refund_args(data).update(amount=4900.0))
    done = sd_process("resume", state, "--tools", path, "--model", MODEL, "--approve", "reply.1")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {state}: the paused state was edited since it was signed: paused slot 'reply' differs; "
        "refusing to resume it"
    )
    assert not marker.exists()  # nothing imported, no refund
    assert not calls.exists()  # no model request


def test_a_forged_finished_guard_and_a_nulled_template_path_are_refused(
    tmp_path: Path, tools: tuple[Path, Path], calls: Path
) -> None:
    path, marker = tools
    state = pause(tmp_path, path, marker, calls)
    saved = state.read_text()
    edit(state, lambda data: data.update(template_path=None))
    nulled = sd("resume", state, "--tools", path, "--model", MODEL, "--approve", "reply.1")
    assert nulled.exit_code == 2
    assert "the paused state was edited since it was signed: template_path differs" in nulled.stderr
    state.write_text(saved)
    edit(state, lambda data: data["finished"].__setitem__(0, {**data["finished"][0], "output": {
        "triggered": False, "reason": "forged"}}))
    forged = sd("resume", state, "--tools", path, "--model", MODEL, "--approve", "reply.1")
    assert forged.exit_code == 2
    assert "finished slot 'abusive' differs" in forged.stderr
    assert not marker.exists() and not calls.exists()


def test_sd_resume_imports_only_what_its_command_line_names(
    tmp_path: Path, tools: tuple[Path, Path], calls: Path
) -> None:
    path, marker = tools
    state = pause(tmp_path, path, marker, calls)
    bare = sd("resume", state, "--approve", "reply.1")
    assert bare.exit_code == 2
    assert (f"error: the paused run used the tools file {path}; sd resume imports only what its command line "
            f"names: pass --tools {path} (or --trust-state to load what the state names)") in bare.stderr
    no_model = sd("resume", state, "--tools", path, "--approve", "reply.1")
    assert no_model.exit_code == 2
    assert (f"error: the paused run used the model factory {MODEL}; sd resume imports only what its command line "
            f"names: pass --model {MODEL} (or --trust-state to load what the state names)") in no_model.stderr
    assert marker.read_text() == "imported\n"  # --tools was named: imported (once), the model was refused
    marker.unlink()
    assert not calls.exists()

    evil = tmp_path / "evil.py"
    evil.write_text("import os\nopen(os.environ['SD_TEST_IMPORTED'], 'a').write('evil\\n')\ndef x() -> int:\n    return 1\n")
    saved = state.read_text()
    edit(state, lambda data: data["extra"]["cli"].update(tools=str(evil)))
    trusted_edit = sd("resume", state, "--trust-state", "--approve", "reply.1")
    assert trusted_edit.exit_code == 2
    assert "extra (the host's settings) differs" in trusted_edit.stderr
    assert not marker.exists()  # checked before anything the state names was imported

    state.write_text(saved)
    trusted = sd("resume", state, "--trust-state", "--approve", "reply.1", "-o", tmp_path / "out.json")
    assert trusted.exit_code == 0, trusted.output
    assert marker.read_text() == "imported\nrefund 49.0\n"
    assert json.loads((tmp_path / "out.json").read_text())["answers"]["reply"] == "Order 5531: refunded 49.00 for order 5531"


def test_a_states_fallback_factory_is_imported_only_with_trust_state(
    tmp_path: Path, tools: tuple[Path, Path], calls: Path
) -> None:
    path, marker = tools
    state = tmp_path / "fallback.state.json"
    result = sd("run", TEMPLATE, "--context", EXAMPLES / "refund_agent.json", "--tools", path, "--model", MODEL,
                "--fallback", "cli_models:echo", "--no-cache", "--pause-to", state)
    assert result.exit_code == 4, result.output
    assert json.loads(state.read_text())["options"]["fallback"] == ["cli_models:echo"]
    refused = sd("resume", state, "--tools", path, "--model", MODEL, "--approve", "reply.1")
    assert refused.exit_code == 2
    assert ("error: the paused run used the fallback model factory cli_models:echo; sd resume starts or imports "
            "them only with --trust-state") in refused.stderr
    assert sd("resume", state, "--trust-state", "--approve", "reply.1").exit_code == 0

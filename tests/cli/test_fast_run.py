"""`sd run` reads its flags without typer (cli/fast/run.py, SPEC §28). Its table is
generated from the typer app and must be up to date; the same command lines go through the
fast path and through the typer app and must give the same request, and in fresh processes
the same exit code, stdout and stderr."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from struckdown.cli import run_cmd
from struckdown.cli import generate, run_fast
from struckdown.cli.fast import run as fast_run
from struckdown.cli.app import app
from struckdown.cli.fast.run import parse_run_args

FAST = "import sys; sys.argv = ['sd', *sys.argv[1:]]; from struckdown.cli import main; main()"
TYPER = "import sys; sys.argv = ['sd', *sys.argv[1:]]; from struckdown.cli.app import app; app()"


def test_the_stored_table_is_the_typer_apps() -> None:
    stored = (Path(fast_run.__file__).with_name("run_params.py")).read_text(encoding="utf-8")
    assert stored == generate.run_params(), "run python -m struckdown.cli.generate --write"


@pytest.mark.parametrize(
    "argv",
    [[], ["--help"], ["a.sd", "-h"], ["a.sd", "--unknown"], ["a.sd", "-cx=1"], ["a.sd", "-c=x=1"], ["a.sd", "--"],
     ["a.sd", "--model"], ["-"], ["--set", "x=1"], ["a.sd", "b.sd"], ["a.sd", "--json=1"], ["a.sd", "--retries", "2"],
     ["a.sd", "--max-cost=1"], ["a.sd", "-o", ""], ["a.sd", "-c", "-x"], [""], ["a.sd", "--version"]],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert parse_run_args(argv) is None


LINES = [
    ["t.sd"],
    ["t.sd", "--model", "test", "-c", "name=Ann"],
    ["--model=test", "t.sd", "--set=name=Ann", "--json", "--no-stream"],
    ["t.sd", "-m", "test", "-c", "a=1", "-c", "b=2", "--stream", "-o", "out.json", "--no-cache"],
    ["t.sd", "--model-name", "test", "--context", "ctx.json", "-I", "inc", "--include-path=more", "--strict"],
    ["t.sd", "--model", "test", "--fallback", "x", "--fallback=y", "--thinking", "high", "--on-truncate", "keep"],
    ["t.sd", "--model", "test", "--stop-at", "greeting", "--approve", "none", "--pause-to", "p.json", "--otel"],
    ["t.sd", "--model", "test", "--no-prompt-cache", "--journal", "j", "--type", "types", "--prices", "p.json"],
    ["t.sd", "--model", "test", "--tools", "tools.py", "-t", "other.py", "--mcp", "srv", "--mcp-config", "m.json"],
]


def _requests(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[Any, Any]:
    """The RunRequest (and --type files) each path hands to `run_command`."""
    seen: list[Any] = []
    monkeypatch.setattr(run_cmd, "run_command", lambda request: seen.append(request) or 0)
    loaded: list[Any] = []
    monkeypatch.setattr("struckdown.cli.compat.options.load_type_files", lambda paths: loaded.append(paths))
    with pytest.raises(SystemExit) as typer_exit:
        app(["run", *argv])
    assert typer_exit.value.code == 0
    values = parse_run_args(argv)
    assert values is not None, argv
    assert run_fast(values) == 0
    assert len(seen) == 2 and len(loaded) in (0, 2)
    return (seen[0], loaded[:1]), (seen[1], loaded[1:])


@pytest.mark.parametrize("argv", LINES)
def test_the_fast_path_hands_run_what_typer_hands_it(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    by_typer, by_fast = _requests(monkeypatch, argv)
    assert by_fast == by_typer


def _sd(code: str, args: list[str], cwd: Path, cache: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "STRUCKDOWN_CACHE_DIR": str(cwd / cache), "HOME": str(cwd)},
    )
    seconds = re.compile(r"\d+\.\d+ s\b")  # the run's own time, in the summary line
    return done.returncode, seconds.sub("N s", done.stdout), seconds.sub("N s", done.stderr)


@pytest.mark.process
def test_the_fast_path_answers_as_the_typer_app(tmp_path: Path) -> None:
    (tmp_path / "ok.sd").write_text("Say hi to {{ name }}.\n\n[[greeting]]\n")
    (tmp_path / "bad.sd").write_text("Hi {{ name }\n\n[[int:n|min=5,max=1]]\n")
    (tmp_path / "two.sd").write_text("Pick.\n\n[[pick:colour|red,blue]]\n\n[[int:n]]\n")
    (tmp_path / "ctx.json").write_text(json.dumps({"name": "Ann"}))
    (tmp_path / "broken.json").write_text("{")
    lines = [
        ["run", "ok.sd", "--model", "test", "-c", "name=Ann"],
        ["run", "ok.sd", "--model", "test", "--context", "ctx.json", "--json"],
        ["run", "two.sd", "--model=test", "--no-stream", "-o", "out.json", "--no-cache"],
        ["run", "two.sd", "--model", "test", "--stop-at", "colour", "--json"],
        ["run", "two.sd", "--model", "test", "--stop-at", "nope"],
        ["run", "ok.sd", "--model", "test"],
        ["run", "ok.sd", "--model", "test", "--strict"],
        ["run", "bad.sd", "--model", "test"],
        ["run", "missing.sd", "--model", "test"],
        ["run", "ok.sd", "--model", "test", "--context", "broken.json"],
        ["run", "ok.sd", "--model", "test", "-c", "novalue"],
        ["run", "ok.sd", "--model", "test", "--tools", "missing.py"],
        ["run", "ok.sd", "--model", "test", "--thinking", "loud"],
        ["run", "ok.sd", "--model", "test", "--on-truncate", "maybe"],
        ["run", "ok.sd", "--model", "test", "--type", "nothere"],
        ["run", "ok.sd", "--model", "nosuchprovider:model"],
    ]
    for n, argv in enumerate(lines):
        fast = _sd(FAST, argv, tmp_path, f"cache-fast-{n}")
        assert fast == _sd(TYPER, argv, tmp_path, f"cache-typer-{n}"), argv
        assert "Traceback" not in fast[2], argv
    assert _sd(FAST, lines[1], tmp_path, "again")[:2] == (0, json.dumps({"greeting": "success (no tool calls)"},
                                                                        indent=2) + "\n")
    assert _sd(FAST, lines[8], tmp_path, "again")[0] == 2

"""`sd check` reads its flags without typer (cli/fast/check.py, SPEC §28). The same command
lines go through the fast path and through the typer app; stdout, stderr and the exit
code must be the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from struckdown.cli.fast.check import CheckArgs, parse_check_args

FAST = "import sys; sys.argv = ['sd', *sys.argv[1:]]; from struckdown.cli import main; main()"
TYPER = "import sys; sys.argv = ['sd', *sys.argv[1:]]; from struckdown.cli.app import app; app()"


def test_plain_flags_are_read_as_typer_reads_them() -> None:
    args = parse_check_args(
        ["a.sd", "--context", "c.json", "-c", "x=1", "--set=y=2", "b.sd", "-I", "inc", "--include-path=more",
         "--tools", "t.py", "-t", "u.py", "--mcp", "srv", "--mcp-config", "m.json"]
    )
    assert args == CheckArgs(
        templates=[Path("a.sd"), Path("b.sd")], context=Path("c.json"), pairs=["x=1", "y=2"], tools=Path("u.py"),
        include_paths=[Path("inc"), Path("more")], mcp=["srv"], mcp_config=Path("m.json"),
    )


@pytest.mark.parametrize(
    "argv",
    [[], ["--help"], ["a.sd", "-h"], ["a.sd", "--unknown"], ["a.sd", "-cx=1"], ["a.sd", "-c=x=1"], ["a.sd", "--"],
     ["a.sd", "--context"], ["-"], ["--set", "x=1"]],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert parse_check_args(argv) is None


def _sd(code: str, args: list[str], cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "STRUCKDOWN_CACHE_DIR": str(cwd / "cache"), "HOME": str(cwd)},
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.process
def test_the_fast_path_answers_as_the_typer_app(tmp_path: Path) -> None:
    (tmp_path / "ok.sd").write_text("Say hi to {{ name }}.\n\n[[greeting]]\n")
    (tmp_path / "bad.sd").write_text("Hi {{ name }\n\n[[int:n|min=5,max=1]]\n")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "part.sd").write_text("Part {{ topic | upper }}.\n")
    (tmp_path / "uses.sd").write_text('<include src="part.sd"/>\n[[think:why]]\n[[respond:answer|max_length=50]]\n')
    (tmp_path / "ctx.json").write_text(json.dumps({"name": "Ann"}))
    (tmp_path / "broken.json").write_text("{")
    lines = [
        ["check", "ok.sd"],
        ["check", "ok.sd", "--context", "ctx.json"],
        ["check", "ok.sd", "-c", "other=1"],
        ["check", "ok.sd", "bad.sd"],
        ["check", "uses.sd", "-I", "inc", "--set=topic=x"],
        ["check", "uses.sd"],
        ["check", "missing.sd"],
        ["check", "ok.sd", "--context", "broken.json"],
        ["check", "ok.sd", "-c", "novalue"],
        ["check", "ok.sd", "--tools", "missing.py"],
    ]
    for argv in lines:
        fast = _sd(FAST, argv, tmp_path)
        assert fast == _sd(TYPER, argv, tmp_path), argv
        assert "Traceback" not in fast[2], argv
    assert _sd(FAST, ["check", "ok.sd", "bad.sd"], tmp_path)[0] == 1
    assert _sd(FAST, ["check", "missing.sd"], tmp_path) == (2, "", "error: template missing.sd does not exist\n")

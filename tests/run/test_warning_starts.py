"""Issue 48 item 1: a struckdown warning never ends the run, whichever way the user started
Python. A `__main__` run from `python -c` or a script on stdin has the built-in importer
as its loader, which cannot give source: a warning that asked it for the caller's source
line died with `ImportError: '__main__' is not a built-in module`.

The in-process tests run the caller's code as such a `__main__` (its globals name the
built-in importer); the `process` tests start Python each way a user does."""

from __future__ import annotations

import asyncio
import importlib.machinery
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd

MESSAGE = "undefined variable 'nme' (line 1): not in the context and not answered before; did you mean 'name'?"

DIRECT = """\
import struckdown as sd
print(sd.complete("Hello {{ nme }} [[x]]", {"name": "A"}, model="test"))
"""
THREAD = """\
import threading
import struckdown as sd

def work():
    print(sd.complete("Hello {{ nme }} [[x]]", {"name": "A"}, model="test"))

worker = threading.Thread(target=work)
worker.start()
worker.join()
"""
LOOP = """\
import asyncio
import struckdown as sd

async def cell():
    print(sd.complete("Hello {{ nme }} [[x]]", {"name": "A"}, model="test"))

asyncio.run(cell())
"""
#: The program, and the line of its `sd.complete(...)`.
PROGRAMS = {"direct": (DIRECT, 2), "thread": (THREAD, 5), "loop": (LOOP, 5)}


def _run_as_main_without_source(program: str, filename: str) -> list[tuple[str, int, str]]:
    """`program` run as a `__main__` whose loader is the built-in importer (`python -c`)."""
    scope: dict[str, Any] = {"__name__": "__main__", "__loader__": importlib.machinery.BuiltinImporter}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(program, filename, "exec"), scope)
    return [(w.filename, w.lineno, str(w.message)) for w in caught if w.category is UserWarning]


@pytest.mark.parametrize("how", sorted(PROGRAMS))
@pytest.mark.parametrize("filename", ["<string>", "<stdin>"])
def test_a_warning_from_a_main_without_source_is_shown_and_the_run_ends(
    how: str, filename: str, capsys: pytest.CaptureFixture[str]
) -> None:
    program, line = PROGRAMS[how]
    assert _run_as_main_without_source(program, filename) == [(filename, line, MESSAGE)]
    assert capsys.readouterr().out == "Result({'x': 'success (no tool calls)'})\n"


def test_inside_a_running_loop_the_warning_names_the_callers_line_not_the_templates() -> None:
    """A notebook cell: `sd.complete` inside a running loop runs on a loop in a thread of its
    own while the cell waits; the warning still names the cell's line."""

    async def cell() -> None:
        sd.complete("Hello {{ nme }} [[x]]", {"name": "A"}, model="test")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(cell())
    code = cell.__code__
    assert [(w.filename, w.lineno, str(w.message)) for w in caught if w.category is UserWarning] == [
        (code.co_filename, code.co_firstlineno + 1, MESSAGE)
    ]  # (a ResourceWarning of another test's garbage may be collected meanwhile)


def _python(args: list[str], tmp_path: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, text=True, check=False, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip


@pytest.mark.process
@pytest.mark.parametrize("how", sorted(PROGRAMS))
@pytest.mark.parametrize("start", ["file", "-c", "stdin"])
def test_every_way_of_starting_python_shows_the_warning_and_finishes(how: str, start: str, tmp_path: Path) -> None:
    program, line = PROGRAMS[how]
    script = tmp_path / "user.py"
    script.write_text(program)
    if start == "file":
        done = _python([str(script)], tmp_path)
        source = "  " + program.splitlines()[line - 1].strip() + "\n"
        where = str(script)
    elif start == "-c":
        done = _python(["-c", program], tmp_path)
        source, where = "", "<string>"
    else:
        done = _python(["-"], tmp_path, stdin=program)
        source, where = "", "<stdin>"
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "Result({'x': 'success (no tool calls)'})\n", f"{where}:{line}: UserWarning: {MESSAGE}\n{source}",
    )  # fmt: skip

"""Every ```python and ```bash block of docs/*.md runs (issue 40 item 7), so a doc cannot
drift from the behaviour again.

Python blocks of one page run in order in one namespace (a page reads like one session),
with a prelude for the names the fragments take as given (`template`, `context`, `tools`,
`model`, `rows`, …), in a scratch directory holding the files the pages name. Every model,
named by a string or built with `openai_compatible`, is a scripted model that answers each
slot validly. Bash blocks run their `sd …` lines through the CLI with `--model test`, and
their `export NAME=value` lines set the environment for the lines after them.

The pages whose blocks start a Dask cluster or real processes (an MCP server, the parser
fuzzer) run in the `cluster` / `process` stages (`pytest -m cluster`, `-m process`). A block
that cannot run here says so itself, with a comment line
`# docs-test: skip (REASON)` whose reason names the network, an API key or a server it
needs; the test counts them (SKIPPED below), so a new one is a visible change. Nothing is
skipped silently.
"""

from __future__ import annotations

import ast
import asyncio
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd
from cli_support import plain_environment, sd as sd_cli  # noqa: F401
from scripted import Script, auto_answer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARKER = re.compile(r"#\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)")
ALLOWED_REASONS = re.compile(r"network|API key|server|install", re.I)
#: Blocks that say they cannot run here (each with its reason in the block).
SKIPPED = 7


def blocks(page: Path) -> list[tuple[int, str, str]]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"^```(python|bash)\n(.*?)^```", text, re.S | re.M):
        found.append((text[: match.start()].count("\n") + 1, match.group(1), match.group(2)))
    return found


PAGES = sorted(p for p in DOCS.glob("*.md") if blocks(p))
#: Pages whose blocks start processes: they run in those stages (`-m cluster`, `-m process`), not skipped
STAGED = {"distributed.md": pytest.mark.cluster, "mcp.md": pytest.mark.process, "security.md": pytest.mark.process}

PRELUDE = '''
import struckdown as sd
from pydantic_ai.usage import UsageLimits
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic import BaseModel

template = "Summarise the report in one line. [[summary]]"  # reads no variable: fragments call it with and without context
context = {"text": "a long text"}
text = "a long text"
msg = "Where is my order?"
rows = [{"text": f"row {i}"} for i in range(3)]
tickets = interviews = ["one", "two"]

def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"

def fetch(url: str) -> str:
    """Fetch a page."""
    return f"page {url}"

def lookup_order(order_id: str) -> dict:
    """Look up an order."""
    return {"id": order_id, "status": "delivered"}

tools = [search, fetch]

def issue_refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"

class _Bank:  # durable.md's payment service
    def refund(self, order_id, idempotency_key=None):
        return None

    def refund_by_key(self, key):
        return None

bank = _Bank()

from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai.models.instrumented import InstrumentationSettings
tracer_provider = TracerProvider()

# the engine's own declarations that architecture.md quotes
from typing import Annotated, Optional
import typer
from struckdown.run_options import RunOption as _O, _seconds
from struckdown.cli.options import Flag

class Address(BaseModel):
    street: str
    city: str

def store(index, answers):
    stored.append((index, answers))

stored = []
'''


def scripted_model(*args: Any, **kwargs: Any) -> Any:
    return Script(auto_answer).model()


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the files the pages name; every model is scripted."""
    for name in ("receipt.png", "library.py", "refund_tools.py"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "library.py", tmp_path / "examples" / "library.py")
    (tmp_path / "support.sd").write_text("Help with {{ message }} [[summary]]\n")
    (tmp_path / "review.sd").write_text("Review {{ title }} [[review]]\n")
    (tmp_path / "paper.json").write_text('{"title": "A paper"}')
    (tmp_path / "tickets.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    (tmp_path / "prompts").mkdir()
    (tmp_path / "triage.sd").write_text("Ticket: {{ message }}\nHow urgent? [[pick:urgency|low, high]]\n")
    (tmp_path / "triage.eval.yaml").write_text(
        "cases:\n  - name: refund\n    context: {message: I want my money back}\n    expect: {urgency: high}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("struckdown.models._from_string", scripted_model)
    monkeypatch.setattr("struckdown.models.openai_compatible", scripted_model)
    monkeypatch.setenv("STRUCKDOWN_MODEL", "test")
    # the scripted model's price, so max_cost= examples run (a real model's is known)
    monkeypatch.setitem(sd.default_environment().defaults, "prices", {"scripted": {"input": 1.0, "output": 1.0}})
    return tmp_path


def run_python(code: str, namespace: dict[str, Any], where: str) -> None:
    try:
        tree = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:  # a row of a table in the source (`"name": Flag(…),`): checked as one
        tree = compile("{" + code + "}", where, "exec")
    outcome = eval(tree, namespace)  # noqa: S307 - the docs' own code
    if asyncio.iscoroutine(outcome):  # a block with top-level await (an async fragment)
        asyncio.run(outcome)
    if "main" in namespace and code.count("async def main") and "asyncio.run(main())" not in code:
        asyncio.run(namespace.pop("main")())  # a block that defines main() and leaves running it to the reader


def run_bash(code: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for number, raw in enumerate(code.replace("\\\n", " ").splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.strip().startswith("#") else ""
        if not line:
            continue
        words = shlex.split(line)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            monkeypatch.setenv(name, value)
        elif words[:3] == ["python", "-m", "pytest"]:  # the suite runs these: they must exist
            missing = [w for w in words[3:] if not w.startswith("-") and not (ROOT / w).exists()]
            assert not missing, f"{where} line {number}: no such test files: {missing}"
        elif words[:3] == ["python", "-m", "bench.fuzz"]:  # the same command, a few cases (100,000 take minutes)
            run_fuzz(words[3:], where, number)
        elif words[0] == "sd":
            result = sd_cli(*words[1:], *(["--model", "test"] if words[1] in ("run", "batch", "chat") else []))
            assert result.exit_code == 0, f"{where} line {number}: {line}\n{result.output}"
        else:
            raise AssertionError(f"{where} line {number}: {line!r} is not an sd command: mark the block "
                                 "`# docs-test: skip (…)` if it needs the network, an API key or a server")


def run_fuzz(arguments: list[str], where: str, number: int) -> None:
    import subprocess
    import sys

    if "--cases" in arguments:
        arguments[arguments.index("--cases") + 1] = "200"
    done = subprocess.run([sys.executable, "-m", "bench.fuzz", *arguments], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, f"{where} line {number}: {done.stdout}{done.stderr}"


@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=STAGED[p.name]) if p.name in STAGED else p for p in PAGES], ids=lambda p: p.name
)
def test_every_code_block_of_the_page_runs(page: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    exec(PRELUDE, namespace)  # noqa: S102
    namespace["model"] = namespace["m"] = scripted_model()
    for line, language, code in blocks(page):
        if MARKER.search(code):
            continue
        where = f"docs/{page.name}:{line}"
        if language == "python":
            run_python(code, namespace, where)
        else:
            run_bash(code, where, monkeypatch)


def test_skipped_blocks_are_counted_and_say_why() -> None:
    reasons = [
        (f"{page.name}:{line}", match["reason"])
        for page in PAGES
        for line, _, code in blocks(page)
        if (match := MARKER.search(code))
    ]
    assert all(ALLOWED_REASONS.search(reason) for _, reason in reasons), reasons
    assert len(reasons) == SKIPPED, reasons


def test_no_flag_row_is_written_twice_in_a_table_of_cli_md() -> None:
    """Issue 40 item 7: a flag documented in two rows of `sd batch`'s table said two things."""
    flags_seen: dict[str, int] = {}
    table = 0
    for line in (DOCS / "cli.md").read_text(encoding="utf-8").splitlines():
        if not line.startswith("| "):
            table += 1
            flags_seen.clear()
            continue
        for flag in re.findall(r"`(--?[a-z][a-z-]*)", line.split("|")[1]):
            assert flag not in flags_seen, f"{flag} is in two rows of one table of docs/cli.md"
            flags_seen[flag] = table

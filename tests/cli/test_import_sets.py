"""What each `sd` command imports (SPEC §28): a fresh process runs the command and lists
`sys.modules` at exit; the test fails when the set grows past the command's list.

The lists name third-party top-level packages (the standard library is left out: it
moves with the Python version) and, for the light commands, struckdown's own modules.
A new entry is a start-up cost: make it lazy, or add it here with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from struckdown.cli.fast.help_pages import PAGES

pytestmark = pytest.mark.process

PROBE = """
import atexit, json, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["sd", *sys.argv[2:]]
from struckdown.cli import main
main()
"""

#: Third-party packages every command may find loaded: the interpreter's own start-up
#: (site hooks of the venv) and nothing else.
BASE = {"_distutils_hack", "_sysconfigdata__linux_x86_64-linux-gnu"}

HELP_MODULES = {
    "struckdown", "struckdown._version", "struckdown.cli", "struckdown.cli.fast", "struckdown.cli.fast.help",
    "struckdown.cli.fast.help_pages",
}

#: `sd check` of free-text slots: the parser (lark) and nothing else. Its flags are read
#: without typer (cli/fast/check.py), free-text specs are built without pydantic
#: (types/output.py), a bare `{{ name }}` is checked without Jinja (render.py), and lark
#: is imported without the `regex` module it would load (syntax/parser.py).
CHECK_PACKAGES = {"lark", "struckdown"}

#: `sd run --model test`: the parser the first time (later the parsed template is read from
#: the cache folder: syntax/stored.py; text of bare `{{ name }}`s renders without Jinja),
#: pydantic (slot types), pydantic-ai-slim and what it imports itself (httpx, OTel's API
#: through logfire-api, genai-prices' code, griffe). Not rich (to a pipe the display writes
#: plain lines: cli/display.py), nor typer (its flags are read by cli/fast/run.py), nor Dask,
#: MCP, OTel's SDK, openai, scikit-learn, Pillow, nor the web stack, nor genai-prices' data
#: (pydantic-ai loads it in every `Model` it constructs; for the test model it is deferred:
#: models/deferred_prices.py).
RUN_PACKAGES = CHECK_PACKAGES | {
    "annotated_types", "pydantic", "pydantic_core", "typing_extensions", "typing_inspection",
    "anyio", "genai_prices", "griffe", "h11", "httpcore2", "httpx2", "idna", "logfire_api", "opentelemetry",
    "pydantic_ai", "pydantic_graph", "sniffio", "truststore",
}
NEVER = {
    "dask", "distributed", "numpy", "mcp", "openai", "sklearn", "PIL", "starlette", "uvicorn", "fastapi",
    "opentelemetry.sdk", "anthropic", "google",
}


def modules_of(tmp_path: Path, *args: str) -> tuple[list[str], str]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        capture_output=True, text=True, check=False, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache"),
             "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stdout


def third_party(modules: list[str]) -> set[str]:
    return {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"__main__"} - BASE


def grown(modules: list[str], allowed: set[str]) -> set[str]:
    return third_party(modules) - allowed


def test_sd_help_imports_only_the_stored_pages(tmp_path: Path) -> None:
    modules, stdout = modules_of(tmp_path, "--help")
    assert stdout == PAGES[""]
    assert {m for m in modules if m.startswith("struckdown")} == HELP_MODULES
    assert third_party(modules) == {"struckdown"}
    assert not {"typer", "click", "rich", "logging"} & set(modules)


def test_sd_check_imports_only_the_parser(tmp_path: Path) -> None:
    template = tmp_path / "one.sd"
    template.write_text("Say hi to {{ name }}.\n\n[[greeting]]\n")
    modules, _ = modules_of(tmp_path, "check", str(template))
    assert grown(modules, CHECK_PACKAGES) == set(), "sd check imports more than its list"
    assert not {"pydantic_ai", "pydantic", "typer", "jinja2", "regex"} & third_party(modules)


def test_sd_check_of_a_typed_slot_imports_no_pydantic_and_reads_the_kept_parse(tmp_path: Path) -> None:
    """A realistic template (a context variable, a `bool` slot): its spec cannot fail, so it is
    built at its first use (plan.py), not to check it; the second check reads the template the
    first one kept (the command's Environment is given a template cache: syntax/stored.py)."""
    template = tmp_path / "two.sd"
    template.write_text("Say hi to {{ name }}.\n\n[[greeting]]\n\nIs {{ name }} common?\n\n[[bool:common]]\n")
    first, _ = modules_of(tmp_path, "check", str(template))
    assert third_party(first) == {"lark", "struckdown"}
    again, _ = modules_of(tmp_path, "check", str(template))
    assert third_party(again) == {"struckdown"}
    assert len(list((tmp_path / "cache" / "templates").glob("*.json"))) == 1


def test_sd_run_with_the_test_model_imports_no_optional_part(tmp_path: Path) -> None:
    template = tmp_path / "one.sd"
    template.write_text("Say hi to {{ name }}.\n\n[[greeting]]\n")
    modules, stdout = modules_of(tmp_path, "run", str(template), "--model", "test", "-c", "name=Ann", "--json")
    assert json.loads(stdout) == {"greeting": "success (no tool calls)"}
    assert grown(modules, RUN_PACKAGES) == set(), "sd run imports more than its list"
    assert "lark" in third_party(modules)  # the first run parses the template
    again, stdout = modules_of(tmp_path, "run", str(template), "--model", "test", "-c", "name=Ann", "--json")
    assert json.loads(stdout) == {"greeting": "success (no tool calls)"}
    assert third_party(again) == third_party(modules) - {"lark"}  # the parsed template is kept (syntax/stored.py)
    assert NEVER & set(modules) == set()
    assert "genai_prices.data" not in modules
    assert not {"typer", "click", "shellingham", "jinja2", "rich"} & third_party(modules)

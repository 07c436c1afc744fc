"""`sd --help` from stored pages (struckdown/cli/fast/help.py): each page is exactly what
typer prints, and the fast path answers only the command lines it can answer exactly."""

from __future__ import annotations

import pytest
import typer.main

from struckdown.cli import generate
from struckdown.cli.fast import help as fast_help
from struckdown.cli.app import app
from struckdown.cli.fast.help_pages import PAGES


def typer_help(path: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """What typer itself prints for `sd PATH --help` on an 80-column terminal: the app's
    click command run as `app()` runs it (typer's CliRunner would force 80-column help)."""
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        typer.main.get_command(app).main([*path.split(), "--help"], prog_name="sd")
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_every_command_has_a_stored_page() -> None:
    assert set(PAGES) == set(generate.help_pages())
    assert {"", "run", "check", "batch", "resume", "cache", "cache stats", "cache clear"} <= set(PAGES)


@pytest.mark.parametrize("path", sorted(PAGES))
def test_stored_page_is_typers_page(
    path: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert PAGES[path] == typer_help(path, capsys, monkeypatch), (
        f"`sd {path} --help` changed: run python -m struckdown.cli.generate --write"
    )


def test_stored_module_is_what_the_generator_writes() -> None:
    from pathlib import Path

    stored = Path(fast_help.__file__).with_name("help_pages.py").read_text(encoding="utf-8")
    assert stored == generate.render_module(generate.help_pages())


@pytest.mark.parametrize(
    ("argv0", "argv", "columns", "page"),
    [
        ("/venv/bin/sd", ["--help"], "80", ""),
        ("/venv/bin/sd", ["-h"], "120", ""),
        ("sd", ["run", "--help"], "80", "run"),
        ("sd", ["cache", "stats", "-h"], "80", "cache stats"),
        ("sd", ["--help"], "79", None),  # click wraps narrower: typer answers
        ("python -m struckdown.cli", ["--help"], "80", None),  # another program name
        ("sd", ["run", "x.sd", "--help"], "80", None),  # an argument: not a plain help request
        ("sd", ["--version", "--help"], "80", None),
        ("sd", ["nosuch", "--help"], "80", None),  # typer reports the unknown command
        ("sd", ["run"], "80", None),
        ("sd", [], "80", None),
    ],
)
def test_fast_path_answers_only_plain_help_requests(
    monkeypatch: pytest.MonkeyPatch, argv0: str, argv: list[str], columns: str, page: str | None
) -> None:
    monkeypatch.setattr("sys.argv", [argv0, *argv])
    monkeypatch.setenv("COLUMNS", columns)
    assert fast_help.stored_page(argv) == (None if page is None else PAGES[page])

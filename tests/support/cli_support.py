"""What the CLI tests share: a clean environment, a scripted-model hook, `sd(...)`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import typer.testing
from typer.testing import CliRunner

from struckdown.cli.app import app

# typer's CliRunner builds the click command from the app on every invoke: some 45 ms for sd's
# commands (the type hints of every parameter), paid by every CLI test. The app never changes
# in a test run, so it is built once (click commands keep no state between invocations).
assert hasattr(typer.testing, "_get_command"), "typer.testing no longer builds the command per invoke"
typer.testing._get_command = functools.cache(typer.testing._get_command)

runner = CliRunner()


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No forced colours, no model from the environment, a private cache."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def use_model(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(model: Any) -> None:
        """Every model string (the default's included) but `test` is `model`: `models._from_string`
        is where one becomes a Model, whichever command or option named it (`--fallback test`
        still names pydantic-ai's TestModel)."""
        from struckdown import models

        real = models._from_string
        monkeypatch.setenv("STRUCKDOWN_MODEL", "scripted")
        monkeypatch.setattr(models, "_from_string", lambda name, *a, **k: real(name, *a, **k) if name == "test" else model)

    return install


def sd(*args: Any, input: str | None = None) -> Any:
    """Run `sd ARGS…` in-process; never a traceback, never an unexpected exception."""
    result = runner.invoke(app, [str(a) for a in args], input=input)
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result

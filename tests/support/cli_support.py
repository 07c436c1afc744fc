"""What the CLI tests share: a clean environment, a scripted-model hook, `sd(...)`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from struckdown.cli.app import app

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
        monkeypatch.setattr("struckdown.cli.loading.resolve_cli_model", lambda name: model)

    return install


def sd(*args: Any, input: str | None = None) -> Any:
    """Run `sd ARGS…` in-process; never a traceback, never an unexpected exception."""
    result = runner.invoke(app, [str(a) for a in args], input=input)
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result

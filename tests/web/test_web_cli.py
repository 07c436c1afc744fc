"""`sd serve` and `sd edit` refuse what they must before listening."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import sd


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::"])
def test_serve_refuses_a_non_loopback_host_without_a_key(monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    monkeypatch.delenv("STRUCKDOWN_API_KEY", raising=False)
    result = sd("serve", "--host", host, "--port", "0")
    assert result.exit_code == 2
    assert f"refusing to serve on {host} without a key: pass --api-key-file or --api-key, or set STRUCKDOWN_API_KEY" in result.output


def test_serve_refuses_a_missing_tools_file(tmp_path: Path) -> None:
    result = sd("serve", "--api-key", "k", "--tools", tmp_path / "nope.py", "--port", "0")
    assert result.exit_code == 2
    assert "tools file" in result.output and "does not exist" in result.output


def test_edit_needs_a_folder(tmp_path: Path) -> None:
    result = sd("edit", tmp_path / "missing", "--no-browser")
    assert result.exit_code == 2
    assert f"{tmp_path / 'missing'} is not a folder" in result.output


@pytest.mark.parametrize("name", ["nope.py", "notes.txt"])
def test_edit_refuses_a_tools_file_that_is_not_a_py_file(tmp_path: Path, name: str) -> None:
    (tmp_path / "notes.txt").write_text("x")
    result = sd("edit", tmp_path, "--no-browser", "--tools", tmp_path / name)
    assert result.exit_code == 2
    assert f"tools file {tmp_path / name} is not a .py file" in result.output

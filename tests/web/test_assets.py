"""The page ships with the package and needs nothing from the network."""

from __future__ import annotations

import re
from pathlib import Path

import struckdown.web

STATIC = Path(struckdown.web.__file__).parent / "static"


def test_the_page_and_its_assets_are_in_the_package() -> None:
    assert sorted(p.name for p in STATIC.iterdir()) == ["api-docs.html", "app.js", "index.html", "style.css"]


def test_no_asset_loads_anything_from_another_host() -> None:
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), path.name
        assert "@import" not in text, path.name


def test_the_cli_does_not_import_the_web_stack_to_start() -> None:
    import subprocess
    import sys

    code = "import sys, struckdown.cli.app; print(sorted(m for m in ('starlette', 'uvicorn', 'pydantic_ai') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

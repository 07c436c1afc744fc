"""`sd preview` writes a template as a highlighted HTML page."""

from __future__ import annotations

from pathlib import Path

from cli_support import runner, sd
from editor_spans import EXAMPLES


def test_preview_writes_highlighted_html(tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    result = sd("preview", EXAMPLES[0], "-o", out)
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html")
    assert f"<title>{EXAMPLES[0].name}</title>" in page
    # [[pick:team|billing, …]]: punctuation, the type, the key and the first choice, each highlighted
    assert '<span class="p">[[</span><span class="kt">pick</span><span class="p">:</span><span class="nv">team</span>' in page
    assert '<span class="l">billing</span>' in page
    assert '<span class="nt">&lt;system&gt;</span>' in page


def test_preview_without_output_prints_the_page() -> None:
    from struckdown.cli.app import app

    # not through sd(): the page's CSS names the token type Generic.Traceback
    result = runner.invoke(app, ["preview", str(EXAMPLES[0])])
    assert result.exit_code == 0 and result.exception is None
    assert result.stdout.rstrip().endswith("</html>")


def test_preview_of_a_missing_template_exits_2(tmp_path: Path) -> None:
    result = sd("preview", tmp_path / "nope.sd")
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_lsp_is_a_command_of_sd() -> None:
    result = sd("lsp", "--help")
    assert result.exit_code == 0
    assert "language server on stdio" in result.output

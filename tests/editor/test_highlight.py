"""The highlighters built from the roles table: the Pygments lexer and the generated
TextMate grammars (checked in, and failing here when stale)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from editor_spans import CORPUS, EXAMPLES, ROOT, Span, lark_spans, scan_spans
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Error

from struckdown.editor import textmate
from struckdown.editor.pygments_lexer import StruckdownLexer, scan
from struckdown.editor.roles import Rule, split_alternatives


@pytest.mark.parametrize("path", EXAMPLES + CORPUS, ids=lambda p: p.name)
def test_pygments_lexer_spans_equal_the_parsers_tokens(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert scan_spans(source, scan(source)) == lark_spans(source)


def test_pygments_finds_the_lexer_by_name_and_by_file_name() -> None:
    assert isinstance(get_lexer_by_name("struckdown"), StruckdownLexer)
    assert isinstance(get_lexer_for_filename("prompt.sd"), StruckdownLexer)


def test_lexer_keeps_every_character_and_marks_what_a_slot_cannot_hold() -> None:
    text = "Hi [[x|a]] [[bad name#]] {{ y"
    tokens = list(StruckdownLexer().get_tokens_unprocessed(text))
    assert "".join(value for _, _, value in tokens) == text
    assert [(pos, value) for pos, token, value in tokens if token is Error] == [(21, "#")]


@pytest.mark.editor  # seven process starts: with the other editor tests, off the unit run
def test_pygmentize_highlights_every_example(tmp_path: Path) -> None:
    pygmentize = shutil.which("pygmentize", path=str(Path(sys.executable).parent))
    assert pygmentize is not None
    outputs = {path: tmp_path / f"{path.stem}.html" for path in EXAMPLES}
    running = [  # all at once: each is a process start
        subprocess.Popen(
            [pygmentize, "-l", "struckdown", "-f", "html", "-o", str(out), str(path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for path, out in outputs.items()
    ]
    for process in running:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    for out in outputs.values():
        html = out.read_text(encoding="utf-8")
        assert '<span class="kt">' in html  # Keyword.Type: a slot's type (every example has one)
        assert '<span class="err">' not in html


def test_checked_in_textmate_grammars_are_up_to_date() -> None:
    assert textmate.stale_files(ROOT) == [], "run: python -m struckdown.editor.textmate --write"


def test_textmate_check_command_fails_on_a_stale_grammar(tmp_path: Path) -> None:
    assert textmate.main(["--root", str(tmp_path), "--write"]) == 0
    assert textmate.main(["--root", str(tmp_path), "--check"]) == 0
    grammar = tmp_path / textmate.SYNTAXES / textmate.GRAMMAR_FILE
    grammar.write_text(grammar.read_text().replace("meta.slot.struckdown", "meta.slot.old"))
    assert textmate.main(["--root", str(tmp_path), "--check"]) == 1


def test_alternatives_split_at_the_top_level_only() -> None:
    assert split_alternatives(r"(?:a|b(?:c|d)|[|]x)+") == ["a", "b(?:c|d)", "[|]x"]
    assert split_alternatives(r"(?:a)(?:b)") == ["(?:a)(?:b)"]


def test_a_rule_naming_a_terminal_the_grammar_lacks_is_refused() -> None:
    from struckdown.editor.roles import compile_rule, grammar_regexes

    with pytest.raises(LookupError, match="no terminal GONE"):
        compile_rule(Rule("GONE", "tag"), grammar_regexes())


def test_head_idents_get_their_role_from_what_surrounds_them() -> None:
    source = "[[!pick+:k|a]][[@set:n|1]][[plain]]"
    spans = [s for s in scan_spans(source, scan(source)) if s.role.startswith("slot.") and s.role != "slot.open"]
    assert sorted((s for s in spans if s.role in ("slot.type", "slot.key", "slot.action")), key=lambda s: s.start) == [
        Span("slot.type", 3, 7, "pick"),
        Span("slot.key", 9, 10, "k"),
        Span("slot.action", 17, 20, "set"),
        Span("slot.key", 21, 22, "n"),
        Span("slot.key", 28, 33, "plain"),
    ]


def test_pygments_lexer_agrees_with_the_parser_on_generated_templates() -> None:
    from editor_spans import random_templates

    for text in random_templates(300, seed=21):
        assert scan_spans(text, scan(text)) == lark_spans(text), text

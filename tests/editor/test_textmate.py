"""VS Code's own tokenizer (vscode-textmate + vscode-oniguruma, from npm) on the checked-in
grammars gives the same slot, tag and Jinja spans as the Lark parser's tokens.

Needs `npm ci` in tests/editor/node (`.ci/run` does it); marker `editor`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from editor_spans import CORPUS, EXAMPLES, ROOT, Span, lark_spans, textmate_spans

from struckdown.editor import textmate

pytestmark = pytest.mark.editor

NODE_DIR = ROOT / "tests" / "editor" / "node"
EXTENSION = ROOT / "editors" / "vscode"
STUB_MARKDOWN = ROOT / "tests" / "editor" / "stub-markdown.tmLanguage.json"


def tokenize(documents: list[dict[str, str]], injections: dict[str, list[str]] | None = None) -> list[Any]:
    assert (NODE_DIR / "node_modules" / "vscode-textmate").is_dir(), "run `npm ci` in tests/editor/node"
    # the grammars as the extension contributes them
    contributed = json.loads((EXTENSION / "package.json").read_text())["contributes"]["grammars"]
    grammars = {g["scopeName"]: str((EXTENSION / g["path"]).resolve()) for g in contributed}
    if injections is None:
        injections = {}
        for g in contributed:
            for target in g.get("injectTo", []):
                injections.setdefault(target, []).append(g["scopeName"])
    request = {
        "grammars": {**grammars, "text.html.markdown": str(STUB_MARKDOWN)},
        "injections": injections,
        "documents": documents,
    }
    done = subprocess.run(
        ["node", str(NODE_DIR / "tokenize.js")], input=json.dumps(request), capture_output=True, text=True,
        check=False, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def tokenized() -> dict[Path, list[Any]]:
    files = EXAMPLES + CORPUS
    results = tokenize([{"scope": textmate.SCOPE, "text": f.read_text(encoding="utf-8")} for f in files])
    return dict(zip(files, results))


def test_the_corpus_covers_every_role_the_parser_produces(tokenized: dict[Path, list[Any]]) -> None:
    roles = {s.role for f in tokenized for s in lark_spans(f.read_text(encoding="utf-8"))}
    assert roles == {
        "comment", "tag", "checkpoint", "include", "jinja.block", "jinja.statement", "jinja.expression",
        "slot", "slot.open", "slot.close", "slot.separator", "slot.required", "slot.at", "slot.action",
        "slot.type", "slot.key", "slot.quantifier", "option.key", "option.string", "option.value",
    }


@pytest.mark.parametrize("path", EXAMPLES + CORPUS, ids=lambda p: p.name)
def test_vscode_textmate_spans_equal_the_parsers_tokens(path: Path, tokenized: dict[Path, list[Any]]) -> None:
    source = path.read_text(encoding="utf-8")
    expected = lark_spans(source)
    assert expected, "the parser found no tokens worth highlighting"
    assert textmate_spans(source, tokenized[path]) == expected


def test_multiline_tokens_are_one_span_each(tokenized: dict[Path, list[Any]]) -> None:
    path = ROOT / "tests" / "editor" / "corpus" / "multiline.sd"
    spans = textmate_spans(path.read_text(encoding="utf-8"), tokenized[path])
    assert Span("comment", 0, 39, "<!-- a comment\nover [[three]] lines -->") in spans
    assert [s.text for s in spans if s.role == "jinja.block"][0] == "{% if lines\n      and more %}"


def test_markdown_injection_highlights_slots_inside_markdown() -> None:
    text = "# Title\n\nA paragraph asks {{ who }}:\n[[pick:answer|yes, no]]\n\n```\n[[code]]\n```\n"
    (tokens,) = tokenize([{"scope": "text.html.markdown", "text": text}])
    spans = textmate_spans(text, tokens)
    slots = [s.text for s in spans if s.role == "slot"]
    assert slots == ["[[pick:answer|yes, no]]", "[[code]]"]
    assert Span("jinja.expression", 26, 35, "{{ who }}") in spans
    heading = [t for t in tokens if t[0] == 0]
    assert any("markup.heading.markdown" in t[3] for t in heading)  # markdown's own rules still apply


def test_markdown_without_the_injection_has_no_slots() -> None:
    text = "A paragraph [[x]]\n"
    (tokens,) = tokenize([{"scope": "text.html.markdown", "text": text}], injections={})
    assert textmate_spans(text, tokens) == []


def test_vscode_textmate_agrees_with_the_parser_on_generated_templates() -> None:
    from editor_spans import random_templates

    texts = random_templates(400, seed=18)
    results = tokenize([{"scope": textmate.SCOPE, "text": t} for t in texts])
    for text, tokens in zip(texts, results):
        assert textmate_spans(text, tokens) == lark_spans(text), text

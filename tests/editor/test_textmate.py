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


MARKDOWN = (
    "# Title\n\nA note with [[a wiki link]] and {{ braces }}.\n\n"
    "```struckdown\nAsk {{ who }}:\n[[pick:answer|yes, no]]\n```\n\n"
    "~~~sd title=x\n[[!int:n]]\n~~~\n\n"
    "```python\nrows = [[1, 2], [3]]\n```\n"
)


def test_markdown_injection_highlights_struckdown_code_blocks_only() -> None:
    (tokens,) = tokenize([{"scope": "text.html.markdown", "text": MARKDOWN}])
    spans = textmate_spans(MARKDOWN, tokens)
    assert [s.text for s in spans if s.role == "slot"] == ["[[pick:answer|yes, no]]", "[[!int:n]]"]
    assert [s.text for s in spans if s.role == "jinja.expression"] == ["{{ who }}"]
    block = MARKDOWN.index("```struckdown")
    assert [s for s in spans if s.role == "slot.type"] == [
        Span("slot.type", MARKDOWN.index("pick"), MARKDOWN.index("pick") + 4, "pick"),
        Span("slot.type", MARKDOWN.index("int:"), MARKDOWN.index("int:") + 3, "int"),
    ]
    lines = MARKDOWN.split("\n")
    fence_line = MARKDOWN[:block].count("\n")
    fence_scopes = [t[3] for t in tokens if t[0] == fence_line]
    assert any("fenced_code.block.language.markdown" in scopes for scopes in fence_scopes)
    assert any("markup.heading.markdown" in t[3] for t in tokens if t[0] == 0)  # Markdown's own rules apply
    python = lines.index("```python")
    assert not [t for t in tokens if t[0] >= python and any(sc.endswith(".struckdown") for sc in t[3])]


def test_markdown_without_the_injection_has_no_slots() -> None:
    (tokens,) = tokenize([{"scope": "text.html.markdown", "text": MARKDOWN}], injections={})
    assert textmate_spans(MARKDOWN, tokens) == []

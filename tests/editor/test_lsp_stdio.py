"""`sd lsp` through a real language client (pygls's) over stdio: the server runs as a
subprocess, exactly as an editor starts it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

import struckdown as sd

pytestmark = pytest.mark.editor

SD = Path(sys.executable).parent / "sd"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Session:
    """A started server, a client, and the diagnostics it has published per document."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.published: dict[str, asyncio.Queue[lsp.PublishDiagnosticsParams]] = {}
        self.legend: list[str] = []

    def queue(self, uri: str) -> asyncio.Queue[lsp.PublishDiagnosticsParams]:
        return self.published.setdefault(uri, asyncio.Queue())

    async def open(self, path: Path, text: str | None = None) -> tuple[str, list[lsp.Diagnostic]]:
        uri = from_fs_path(str(path))
        assert uri is not None
        text = path.read_text(encoding="utf-8") if text is None else text
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="struckdown", version=1, text=text))
        )
        params = await asyncio.wait_for(self.queue(uri).get(), timeout=30)
        return uri, list(params.diagnostics)

    async def change(self, uri: str, version: int, text: str) -> list[lsp.Diagnostic]:
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        params = await asyncio.wait_for(self.queue(uri).get(), timeout=30)
        assert params.version == version
        return list(params.diagnostics)


def with_server(scenario: Callable[[Session], Awaitable[Any]], init_options: Any = None) -> Any:
    async def main() -> Any:
        client = LanguageClient("struckdown-tests", "1")
        session = Session(client)

        @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
            session.queue(params.uri).put_nowait(params)

        await client.start_io(str(SD), "lsp")
        try:
            result = await asyncio.wait_for(
                client.initialize_async(
                    lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), initialization_options=init_options)
                ),
                timeout=30,
            )
            assert result.capabilities.hover_provider
            provider = result.capabilities.semantic_tokens_provider
            assert isinstance(provider, lsp.SemanticTokensOptions)
            session.legend = list(provider.legend.token_types)
            client.initialized(lsp.InitializedParams())
            return await scenario(session)
        finally:
            await asyncio.wait_for(client.shutdown_async(None), timeout=30)
            client.exit(None)
            await client.stop()

    return asyncio.run(main())


def at(line: int, character: int) -> lsp.Position:
    return lsp.Position(line=line, character=character)


def test_a_broken_template_gets_the_diagnostic_at_the_parsers_line_and_column(tmp_path: Path) -> None:
    text = "Hello\nHow warm?\n[[number:t|mni=3]]\n"
    with pytest.raises(sd.TemplateSyntaxError) as caught:
        sd.parse(text)
    error = caught.value
    assert (error.line, error.column) == (3, 12)

    wide = "\U0001f600 " + text.splitlines()[2]  # an emoji: one character, two UTF-16 units
    with pytest.raises(sd.TemplateSyntaxError) as caught_wide:
        sd.parse(wide)
    assert (caught_wide.value.line, caught_wide.value.column) == (1, 14)

    async def scenario(session: Session) -> tuple[list[lsp.Diagnostic], list[lsp.Diagnostic], list[lsp.Diagnostic]]:
        uri, broken = await session.open(tmp_path / "broken.sd", text)
        fixed = await session.change(uri, 2, text.replace("mni=", "min="))
        _, on_wide_line = await session.open(tmp_path / "wide.sd", wide)
        _, at_the_end = await session.open(tmp_path / "end.sd", "Q\nA [[pick:x]]")  # no final newline
        assert [d.range for d in at_the_end] == [lsp.Range(at(1, 2), at(1, 12))]
        return broken, fixed, on_wide_line

    broken, fixed, on_wide_line = with_server(scenario)
    assert [d.range for d in on_wide_line] == [lsp.Range(at(0, 14), at(0, 18))]  # UTF-16 units, as LSP counts
    assert len(broken) == 1
    diagnostic = broken[0]
    assert diagnostic.range == lsp.Range(at(error.line - 1, error.column - 1), at(2, 15))  # the option `mni=`
    assert diagnostic.severity == lsp.DiagnosticSeverity.Error
    assert diagnostic.message.startswith("unknown option 'mni' for a number slot\nhint: ")
    assert diagnostic.source == "struckdown"
    assert fixed == []


def test_completion_after_brackets_lists_the_types(tmp_path: Path) -> None:
    text = "Which colour?\n[[\n"

    async def scenario(session: Session) -> lsp.CompletionList:
        uri, _ = await session.open(tmp_path / "t.sd", text)
        result = await session.client.text_document_completion_async(
            lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), at(1, 2))
        )
        assert isinstance(result, lsp.CompletionList)
        return result

    result = with_server(scenario)
    labels = [item.label for item in result.items]
    assert labels == [
        "bool", "date", "datetime", "duration", "extract", "halt", "int", "json", "number", "pick", "record",
        "respond", "score", "speak", "think", "time",
    ]
    pick = next(item for item in result.items if item.label == "pick")
    assert pick.insert_text == "pick:"
    assert pick.kind == lsp.CompletionItemKind.Class
    assert isinstance(pick.documentation, lsp.MarkupContent) and "positional choices" in pick.documentation.value


def test_hover_on_a_slot_shows_its_clamped_limits(tmp_path: Path) -> None:
    text = "Look it up.\n[[reply|use_tools=true, max_iter=50, max_calls=4]]\n"
    (tmp_path / "agent_tools.py").write_text(
        'import struckdown\n\n@struckdown.readonly\ndef lookup(order_id: str) -> str:\n    """Find an order."""\n'
        '    return order_id\n\ndef refund(order_id: str) -> str:\n    """Refund it."""\n    return "ok"\n'
    )

    async def scenario(session: Session) -> tuple[list[lsp.Diagnostic], lsp.Hover | None, lsp.Hover | None]:
        uri, diagnostics = await session.open(tmp_path / "agent.sd", text)
        on_slot = await session.client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), at(1, 4)))
        on_text = await session.client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), at(0, 3)))
        return diagnostics, on_slot, on_text

    diagnostics, on_slot, on_text = with_server(scenario)
    assert [d.message for d in diagnostics] == [
        "slot 'reply' asks for max_iter=50 above the default ceiling 20; 20 will be used"
    ]
    assert diagnostics[0].severity == lsp.DiagnosticSeverity.Warning
    assert on_slot is not None and isinstance(on_slot.contents, lsp.MarkupContent)
    assert on_slot.range == lsp.Range(at(1, 0), at(1, 50))
    assert on_slot.contents.value.splitlines() == [
        "**slot `reply`**: `respond`, one answer, may be null",
        "- limits: 20 requests (max_iter=50, clamped to the ceiling) · 4 tool calls (max_calls=4) · "
        "250,000 output tokens",
        "- tools: `lookup`, `refund` (from agent_tools.py)",
        "- the last permitted request offers no tools, so the model must answer",
        "- waits for pending guards before it starts (not every tool is `@readonly`)",
    ]
    assert on_text is None


def test_document_symbols_are_segments_holding_their_slots() -> None:
    path = EXAMPLES / "research_chain.sd"

    async def scenario(session: Session) -> Any:
        uri, diagnostics = await session.open(path)
        assert diagnostics == []
        return await session.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))
        )

    symbols = with_server(scenario)
    outline = [(s.name, [(c.name, c.detail, c.range.start.line) for c in s.children or []]) for s in symbols]
    assert outline == [
        ("segment 0", [("outline", "respond", 4)]),
        ("segment 1 'Draft'", [("draft", "respond", 12)]),
        ("segment 2 'Review'", [("improvements", "respond", 20), ("ready", "bool", 23)]),
    ]
    assert symbols[1].range.start == at(6, 0)


def test_semantic_tokens_come_in_utf16_units_with_the_declared_legend(tmp_path: Path) -> None:
    text = "\U0001f600 [[pick:c|a, b]]\n{{ x }}"

    async def scenario(session: Session) -> tuple[list[str], list[int]]:
        uri, _ = await session.open(tmp_path / "s.sd", text)
        tokens = await session.client.text_document_semantic_tokens_full_async(
            lsp.SemanticTokensParams(lsp.TextDocumentIdentifier(uri))
        )
        assert isinstance(tokens, lsp.SemanticTokens)
        return session.legend, tokens.data

    legend, data = with_server(scenario)
    rows = [data[i : i + 5] for i in range(0, len(data), 5)]
    decoded = [(line, start, length, legend[kind]) for line, start, length, kind, _ in rows]
    assert decoded == [
        (0, 3, 2, "operator"),  # `[[` after the emoji (2 UTF-16 units) and a space
        (0, 2, 4, "type"), (0, 4, 1, "operator"), (0, 1, 1, "variable"), (0, 1, 1, "operator"),
        (0, 1, 1, "enumMember"), (0, 1, 1, "operator"), (0, 2, 1, "enumMember"), (0, 1, 2, "operator"),
        (1, 0, 7, "macro"),
    ]


def test_a_burst_of_changes_is_published_once_with_the_last_version(tmp_path: Path) -> None:
    """With a debounce longer than the test, nothing is published until the save, which
    runs the pending diagnostics once, on the last text."""
    text = "Which colour?\n[[pick:c|a, b]]\n"

    async def scenario(session: Session) -> tuple[list[lsp.PublishDiagnosticsParams], Any]:
        uri, _ = await session.open(tmp_path / "burst.sd", text)
        for version in range(2, 12):
            broken = text.replace("pick", "pikc") if version == 11 else text.replace("c|", f"c{version}|")
            session.client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    [lsp.TextDocumentContentChangeWholeDocument(text=broken)],
                )
            )
        # a request's answer proves the changes were handled: nothing was published
        await session.client.text_document_document_symbol_async(lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri)))
        assert session.queue(uri).empty()
        session.client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
        published = [await asyncio.wait_for(session.queue(uri).get(), timeout=30)]
        symbols = await session.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))
        )
        while not session.queue(uri).empty():
            published.append(session.queue(uri).get_nowait())
        return published, symbols

    published, symbols = with_server(scenario, init_options={"diagnosticsDelay": 3_600_000})
    assert [p.version for p in published] == [11]
    assert [d.message.splitlines()[0] for d in published[0].diagnostics] == ["unknown type 'pikc'"]
    assert symbols

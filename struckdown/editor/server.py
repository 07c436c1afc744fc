"""`sd lsp`: the struckdown language server (pygls, stdio).

Diagnostics on open, change and save; completion; hover with a slot's plan;
document symbols. The answers are computed in `features`; this module only
speaks the protocol and converts offsets to the client's position units.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from .. import __version__
from . import features
from .roles import SEMANTIC_TYPES

SEVERITY = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning}
COMPLETION_KIND = {
    "type": lsp.CompletionItemKind.Class,
    "option": lsp.CompletionItemKind.Property,
    "value": lsp.CompletionItemKind.EnumMember,
    "variable": lsp.CompletionItemKind.Variable,
    "action": lsp.CompletionItemKind.Function,
    "tool": lsp.CompletionItemKind.Function,
}
SYMBOL_KIND = {
    "segment": lsp.SymbolKind.Namespace,
    "slot": lsp.SymbolKind.Field,
    "guard": lsp.SymbolKind.Event,
    "action": lsp.SymbolKind.Function,
}
TRIGGERS = ["[", "|", ",", "{", "@", "=", " "]


class StruckdownServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("struckdown", __version__)
        self.settings = features.Workspace()

    def analysis(self, uri: str) -> tuple[TextDocument, features.Analysis]:
        document = self.workspace.get_text_document(uri)
        path = to_fs_path(uri)
        return document, features.analyze(document.source, Path(path) if path else None, self.settings)


server = StruckdownServer()


def _position(document: TextDocument, offset: int) -> lsp.Position:
    """An offset as the client counts (pygls's own conversion puts the end of a text
    without a final newline on a line that does not exist)."""
    text = document.source
    line_start = text.rfind("\n", 0, offset) + 1
    return lsp.Position(text.count("\n", 0, offset), document.position_codec.client_num_units(text[line_start:offset]))


def _range(document: TextDocument, start: int, end: int) -> lsp.Range:
    return lsp.Range(_position(document, start), _position(document, end))


def publish(ls: StruckdownServer, uri: str) -> None:
    document, analysis = ls.analysis(uri)
    found = [
        lsp.Diagnostic(
            range=_range(document, d.start, d.end),
            message=d.message,
            severity=SEVERITY[d.severity],
            source="struckdown",
        )
        for d in features.diagnostics(analysis)
    ]
    ls.text_document_publish_diagnostics(
        lsp.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=document.version)
    )


@server.feature(lsp.INITIALIZE)
def initialize(ls: StruckdownServer, params: lsp.InitializeParams) -> None:
    options: Any = params.initialization_options
    if isinstance(options, dict) and isinstance(options.get("toolsFile"), str):
        ls.settings.tools_file = options["toolsFile"]


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: StruckdownServer, params: lsp.DidOpenTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: StruckdownServer, params: lsp.DidChangeTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: StruckdownServer, params: lsp.DidSaveTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: StruckdownServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=TRIGGERS))
def completion(ls: StruckdownServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    document, analysis = ls.analysis(params.text_document.uri)
    offset = document.offset_at_position(params.position)
    items = [
        lsp.CompletionItem(
            label=c.label,
            kind=COMPLETION_KIND[c.kind],
            detail=c.detail or None,
            documentation=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=c.documentation) if c.documentation else None,
            insert_text=c.insert_text,
        )
        for c in features.completions(analysis, offset)
    ]
    return lsp.CompletionList(is_incomplete=False, items=items)


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: StruckdownServer, params: lsp.HoverParams) -> lsp.Hover | None:
    document, analysis = ls.analysis(params.text_document.uri)
    found = features.hover(analysis, document.offset_at_position(params.position))
    if found is None:
        return None
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=found.markdown),
        range=_range(document, found.start, found.end),
    )


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbol(ls: StruckdownServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
    document, analysis = ls.analysis(params.text_document.uri)

    def convert(symbol: features.Symbol) -> lsp.DocumentSymbol:
        return lsp.DocumentSymbol(
            name=symbol.name,
            kind=SYMBOL_KIND[symbol.kind],
            detail=symbol.detail,
            range=_range(document, symbol.start, symbol.end),
            selection_range=_range(document, symbol.select_start, symbol.select_end),
            children=[convert(c) for c in symbol.children],
        )

    return [convert(s) for s in features.symbols(analysis)]


LEGEND = lsp.SemanticTokensLegend(token_types=list(SEMANTIC_TYPES), token_modifiers=[])


@server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
def semantic_tokens(ls: StruckdownServer, params: lsp.SemanticTokensParams) -> lsp.SemanticTokens:
    """Relative (line, start, length, type, modifiers) quintuples, in the client's units."""
    document, analysis = ls.analysis(params.text_document.uri)
    data: list[int] = []
    last_line = last_start = 0
    for token in features.semantic_tokens(analysis):
        start = _position(document, token.start)
        length = document.position_codec.client_num_units(document.source[token.start : token.end])
        delta_line = start.line - last_line
        data += [delta_line, start.character - (last_start if delta_line == 0 else 0), length]
        data += [token.type_index, 0]
        last_line, last_start = start.line, start.character
    return lsp.SemanticTokens(data=data)


def serve() -> None:
    server.start_io()

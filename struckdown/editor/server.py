"""`sd lsp`: the struckdown language server (pygls, stdio).

Diagnostics on open and save, and after a pause in changes (`debounce`); completion;
hover with a slot's plan; document symbols; semantic tokens. The answers are computed
in `features`, once per text (the analysis is cached); this module only speaks the
protocol and converts offsets to the client's position units. Its own reader loop
(`transport`) answers malformed messages with errors and reads on.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import default_converter
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from .._version import __version__
from . import features
from .debounce import Debouncer, Timers
from .roles import SEMANTIC_TYPES
from .transport import Dispatcher, serve_stream

DELAY_MS = 200  # the pause after the last change before diagnostics run

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
    """`timers` (what `call_later` is called on; default: the running event loop) and
    `delay` (seconds) drive the debounce of diagnostics after changes."""

    def __init__(self, timers: Callable[[], Timers] | None = None, delay: float = DELAY_MS / 1000) -> None:
        self.converter = default_converter()  # type: ignore[no-untyped-call]
        super().__init__("struckdown", __version__, converter_factory=lambda: self.converter)
        self.settings = features.Workspace()
        self.cache: dict[str, tuple[tuple[Any, ...], features.Analysis]] = {}
        self.analyses = 0  # how many times a text was analysed (the cache missed)
        self.exit_code = 0  # `sd lsp`'s: 1 after an `exit` without `shutdown` (the LSP spec)
        self.debounce = Debouncer(delay, lambda uri: publish(self, uri), timers or asyncio.get_running_loop)

    def analysis(self, uri: str) -> tuple[TextDocument, features.Analysis]:
        """The document and its analysis, computed once per text (and per state of the
        context and tools files it read)."""
        document = self.workspace.get_text_document(uri)
        try:
            document.source  # noqa: B018 (a document the client did not open is read from disk)
        except (OSError, UnicodeDecodeError) as exc:
            raise JsonRpcInvalidParams(f"{uri} is not open and cannot be read: {exc}") from None
        cached = self.cache.get(uri)
        if cached is not None and cached[1].text == document.source and cached[0] == _stamps(cached[1]):
            return document, cached[1]
        path = to_fs_path(uri)
        found = features.analyze(document.source, Path(path) if path else None, self.settings)
        self.analyses += 1
        self.cache[uri] = (_stamps(found), found)
        return document, found

    def forget(self, uri: str) -> None:
        self.cache.pop(uri, None)
        self.debounce.drop(uri)

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """pygls's stdio server with struckdown's reader loop (`transport`)."""
        self._stop_event = stop = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        dispatcher = Dispatcher(self.protocol, self.converter)
        try:
            asyncio.run(serve_stream(stdin or sys.stdin.buffer, dispatcher, stop))
        except BrokenPipeError:
            logging.getLogger("struckdown.lsp").error("the client closed the connection")
        except KeyboardInterrupt:
            pass
        except SystemExit as stop_code:  # pygls's `exit` handler: 1 when no `shutdown` came first
            self.exit_code = stop_code.code if isinstance(stop_code.code, int) else 0
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]


def _stamps(analysis: features.Analysis) -> tuple[Any, ...]:
    """The modification times of the files beside the template that the analysis read."""
    out: list[Any] = []
    for path in (analysis.context_file, analysis.tools_file):
        try:
            out.append(path.stat().st_mtime_ns if path else None)
        except OSError:
            out.append(-1)
    return tuple(out)



def _counter(encoding: Any) -> Callable[[str], int]:
    """Code units of a string in the client's position encoding, counted in C (pygls
    counts character by character in Python: seconds on a 1 MB template)."""
    if encoding == lsp.PositionEncodingKind.Utf32:
        return len
    if encoding == lsp.PositionEncodingKind.Utf8:
        return lambda s: len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))
    return lambda s: len(s) if s.isascii() else len(s.encode("utf-16-le", "surrogatepass")) // 2


class Positions:
    """Offsets as the client counts them: line by bisection over the line starts,
    character in the client's units (pygls's own conversion puts the end of a text
    without a final newline on a line that does not exist). Offsets asked in order
    (tokens) count only the text since the last one, so a long line costs its length
    once, not once per token."""

    def __init__(self, document: TextDocument, analysis: features.Analysis) -> None:
        self.text = analysis.text
        self.starts = analysis.lines.starts
        self.units = _counter(document.position_codec.encoding)
        self.last = (-1, 0, 0)  # line, offset, units from the line start

    def position(self, offset: int) -> lsp.Position:
        line = bisect_right(self.starts, offset) - 1
        last_line, last_offset, last_units = self.last
        if line == last_line and offset >= last_offset:
            character = last_units + self.units(self.text[last_offset:offset])
        else:
            character = self.units(self.text[self.starts[line] : offset])
        self.last = (line, offset, character)
        return lsp.Position(line, character)

    def range(self, start: int, end: int) -> lsp.Range:
        return lsp.Range(self.position(start), self.position(end))


def publish(ls: StruckdownServer, uri: str) -> None:
    document, analysis = ls.analysis(uri)
    at = Positions(document, analysis)
    found = [
        lsp.Diagnostic(
            range=at.range(d.start, d.end),
            message=d.message,
            severity=SEVERITY[d.severity],
            source="struckdown",
        )
        for d in features.diagnostics(analysis)
    ]
    ls.text_document_publish_diagnostics(
        lsp.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=document.version)
    )


def initialize(ls: StruckdownServer, params: lsp.InitializeParams) -> None:
    options: Any = params.initialization_options
    if not isinstance(options, dict):
        return
    if isinstance(options.get("toolsFile"), str):
        ls.settings.tools_file = options["toolsFile"]
    delay = options.get("diagnosticsDelay")
    if isinstance(delay, (int, float)) and not isinstance(delay, bool) and delay >= 0:
        ls.debounce.delay = delay / 1000


def did_open(ls: StruckdownServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.debounce.flush(params.text_document.uri)


def did_change(ls: StruckdownServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.debounce.touch(params.text_document.uri)


def did_save(ls: StruckdownServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.cache.pop(params.text_document.uri, None)  # files beside it may have changed too
    ls.debounce.flush(params.text_document.uri)


def did_close(ls: StruckdownServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.forget(params.text_document.uri)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


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


def hover(ls: StruckdownServer, params: lsp.HoverParams) -> lsp.Hover | None:
    document, analysis = ls.analysis(params.text_document.uri)
    found = features.hover(analysis, document.offset_at_position(params.position))
    if found is None:
        return None
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=found.markdown),
        range=Positions(document, analysis).range(found.start, found.end),
    )


def document_symbol(ls: StruckdownServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
    document, analysis = ls.analysis(params.text_document.uri)
    at = Positions(document, analysis)

    def convert(symbol: features.Symbol) -> lsp.DocumentSymbol:
        return lsp.DocumentSymbol(
            name=symbol.name,
            kind=SYMBOL_KIND[symbol.kind],
            detail=symbol.detail,
            range=at.range(symbol.start, symbol.end),
            selection_range=at.range(symbol.select_start, symbol.select_end),
            children=[convert(c) for c in symbol.children],
        )

    return [convert(s) for s in features.symbols(analysis)]


LEGEND = lsp.SemanticTokensLegend(token_types=list(SEMANTIC_TYPES), token_modifiers=[])


async def semantic_tokens(ls: StruckdownServer, params: lsp.SemanticTokensParams) -> lsp.SemanticTokens:
    """Relative (line, start, length, type, modifiers) quintuples, in the client's units.
    During a burst of changes it waits for the debounced run and answers from its
    analysis, so the burst is analysed once."""
    uri = params.text_document.uri
    await ls.debounce.settled(uri)
    document, analysis = ls.analysis(uri)
    at = Positions(document, analysis)
    units = at.units
    data: list[int] = []
    last_line = last_start = 0
    for token in features.semantic_tokens(analysis):
        start = at.position(token.start)
        delta_line = start.line - last_line
        data += [delta_line, start.character - (last_start if delta_line == 0 else 0)]
        data += [units(analysis.text[token.start : token.end]), token.type_index, 0]
        last_line, last_start = start.line, start.character
    return lsp.SemanticTokens(data=data)


FEATURES: list[tuple[str, Any, Callable[..., Any]]] = [
    (lsp.INITIALIZE, None, initialize),
    (lsp.TEXT_DOCUMENT_DID_OPEN, None, did_open),
    (lsp.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
    (lsp.TEXT_DOCUMENT_DID_SAVE, None, did_save),
    (lsp.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
    (lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=TRIGGERS), completion),
    (lsp.TEXT_DOCUMENT_HOVER, None, hover),
    (lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL, None, document_symbol),
    (lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND, semantic_tokens),
]


def create(timers: Callable[[], Timers] | None = None, delay: float = DELAY_MS / 1000) -> StruckdownServer:
    """A server with every feature registered (tests pass their own timers)."""
    ls = StruckdownServer(timers, delay)
    for method, options, handler in FEATURES:
        ls.feature(method, options)(handler)
    return ls


def serve() -> int:
    """`sd lsp`: errors go to stderr too, which editors show as the server's output. The
    exit code: 0, or 1 after an `exit` that no `shutdown` came before."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("struckdown lsp: %(levelname)s: %(message)s"))
    log = logging.getLogger("struckdown.lsp")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    server = create()
    server.start_io()
    return server.exit_code

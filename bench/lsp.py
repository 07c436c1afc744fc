"""(k) The language server on a 1 MB template: diagnostics time, and a burst of typing.

The server runs in this process on a thread, over `os.pipe()`s, exactly as `sd lsp`
reads stdio (`struckdown.editor.server.create().start_io`). Times are process CPU
("server time": the client here only writes the messages and waits), next to the
floor: the uncached parse of the same text (`bench.parse.uncached_parse`), trials
interleaved.

- open: `didOpen` of the 1 MB text (a new document each trial, so nothing is cached)
  until its `publishDiagnostics`; target under 2 s and within 1.5x of the parse.
- open, stressed: 1 MB of slots in one segment, each warned twice (18,000
  diagnostics): within 2x of the parse, which is itself slower on so many slots.
- burst: 20 one-character edits sent at once (incremental changes, as editors send
  them), then the time until the one `publishDiagnostics` of the debounce, and how
  many analyses the burst cost (1).
- tokens: `semanticTokens/full` after the burst, answered from the same analysis.

Runnable alone: `python -m bench.lsp [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import select
import threading
import time
from typing import Any

from .common import Row, best, interleaved, print_table, ratio_of, secs, target_row
from .parse import generated_template, uncached_parse

TARGET_SECONDS = 2.0
TARGET_RATIO = 1.5
STRESS_RATIO = 2.0  # 18,000 diagnostics to place, convert and send on top of the parse
BURST = 20


class Pipes:
    """A client on the server's pipes: frames out, framed messages in."""

    def __init__(self) -> None:
        from struckdown.editor.framing import Body, Framer
        from struckdown.editor.server import create

        self.body_type = Body
        self.server = create()
        server_in, self.out_fd = os.pipe()
        self.in_fd, server_out = os.pipe()
        stdin, stdout = os.fdopen(server_in, "rb"), os.fdopen(server_out, "wb")
        self.thread = threading.Thread(target=self.server.start_io, args=(stdin, stdout), daemon=True)
        self.thread.start()
        self.framer = Framer()
        self.waiting: list[dict[str, Any]] = []
        self.ids = itertools.count(1)
        self.documents = itertools.count()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        while data:
            data = data[os.write(self.out_fd, data) :]

    def receive(self) -> dict[str, Any]:
        while not self.waiting:
            ready, _, _ = select.select([self.in_fd], [], [], 120)
            if not ready:
                raise TimeoutError("the language server sent nothing for 120 s")
            for item in self.framer.feed(os.read(self.in_fd, 1 << 20)):
                if not isinstance(item, self.body_type):
                    raise RuntimeError(f"bad frame from the server: {item}")
                self.waiting.append(json.loads(item.data))
        return self.waiting.pop(0)

    def until(self, method: str | None = None, msg_id: int | None = None) -> dict[str, Any]:
        while True:
            message = self.receive()
            if (method and message.get("method") == method) or (msg_id is not None and message.get("id") == msg_id):
                return message

    def call(self, method: str, params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.send({"id": msg_id, "method": method, "params": params})
        return self.until(msg_id=msg_id)

    def close(self) -> None:
        self.call("shutdown", None)
        self.send({"method": "exit", "params": None})
        os.close(self.out_fd)
        self.thread.join(30)
        os.close(self.in_fd)


def warned_slots(size: int) -> int:
    return size // 110


def warned_template(size: int) -> str:
    """About `size` bytes of questions in one segment, each slot warned twice (max_iter
    above the ceiling, use_tools=true without tools): thousands of diagnostics."""
    return "".join(
        f"Question {i} about the parcel and the refund policy, please answer.\n[[reply_{i}|use_tools=true, max_iter=50]]\n\n"
        for i in range(warned_slots(size))
    )


async def open_row(
    pipes: Pipes, label: str, text: str, expected: int, repeats: int, target: float, absolute: bool
) -> tuple[Row, float]:
    """didOpen of `text` until its diagnostics, against the uncached parse of the same
    text; the row and the parse's CPU time. `absolute`: the row also fails at 2 s."""
    from struckdown.environment import default_environment

    problems: list[str] = []

    async def open_document() -> None:
        """A new document and a new text each trial, every cache of the parser cleared
        (as `uncached_parse` does): the worst case, the first open."""
        number = next(pipes.documents)
        uri = f"file:///bench/lsp-{number}.sd"
        default_environment().clear_caches()
        item = {"uri": uri, "languageId": "struckdown", "version": 1, "text": f"{text}<!-- trial {number} -->\n"}
        pipes.send({"method": "textDocument/didOpen", "params": {"textDocument": item}})
        published = pipes.until("textDocument/publishDiagnostics")
        found = len(published["params"]["diagnostics"])
        if published["params"]["uri"] != uri or found != expected:
            problems.append(f"{found} diagnostics, expected {expected}")
        pipes.send({"method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
        pipes.until("textDocument/publishDiagnostics")

    async def parse_alone() -> None:
        uncached_parse(text)

    cpu: dict[str, list[float]] = {}
    wall = await interleaved({"lsp": open_document, "parse": parse_alone}, repeats=repeats, cpu=cpu)
    lsp_cpu, parse_cpu = best(cpu["lsp"]), best(cpu["parse"])
    if absolute and lsp_cpu >= TARGET_SECONDS:
        problems.append(f"over {TARGET_SECONDS:.0f} s")
    kb = f"{len(text.encode()) / 1000:,.0f} KB"
    row = target_row(
        f"k. sd lsp: didOpen {kb}{label} → publishDiagnostics (server CPU)", secs(lsp_cpu),
        f"{secs(parse_cpu)} (parse alone)", ratio_of(lsp_cpu, parse_cpu), target, problem="; ".join(sorted(set(problems))),
        note=f"{expected:,} diagnostics; wall {secs(best(wall['lsp']))} vs {secs(best(wall['parse']))}"
        + (f"; target also < {TARGET_SECONDS:.0f} s CPU" if absolute else ""),
    )  # fmt: skip
    return row, parse_cpu


async def run(quick: bool = False) -> list[Row]:
    from struckdown.environment import default_environment

    size = 100_000 if quick else 1_000_000
    repeats = 1 if quick else 3
    text = generated_template(size)
    kb = f"{len(text.encode()) / 1000:,.0f} KB"
    pipes = Pipes()
    pipes.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    pipes.send({"method": "initialized", "params": {}})
    clean, parse_cpu = await open_row(pipes, "", text, 0, repeats, TARGET_RATIO, True)
    warned, _ = await open_row(
        pipes, ", one segment, 2 warnings a slot", warned_template(size), 2 * warned_slots(size), repeats,
        STRESS_RATIO, False,
    )
    rows = [clean, warned]

    # a burst of typing on the open document: one analysis, one publish
    uri = "file:///bench/lsp-burst.sd"
    item = {"uri": uri, "languageId": "struckdown", "version": 1, "text": text}
    pipes.send({"method": "textDocument/didOpen", "params": {"textDocument": item}})
    pipes.until("textDocument/publishDiagnostics")
    default_environment().clear_caches()
    before = pipes.server.analyses
    cpu_started, started = time.process_time(), time.perf_counter()
    for version in range(2, BURST + 2):
        change = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "x"}
        pipes.send({"method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}})  # fmt: skip
    published = pipes.until("textDocument/publishDiagnostics")
    burst_cpu, burst_wall = time.process_time() - cpu_started, time.perf_counter() - started
    runs = pipes.server.analyses - before
    burst_problem = "" if (runs, published["params"]["version"]) == (1, BURST + 1) else (
        f"{runs} analyses, published version {published['params']['version']}"
    )
    rows.append(Row(
        f"k. sd lsp: {BURST} edits at once on {kb} → diagnostics", f"{secs(burst_cpu)} CPU, {runs} analysis",
        f"{secs(parse_cpu)} (one parse)", None, "1 analysis", not burst_problem,
        f"wall {secs(burst_wall)} (with the {pipes.server.debounce.delay * 1000:.0f} ms debounce); {burst_problem}".rstrip("; "),
    ))  # fmt: skip
    tokens_started = time.process_time()
    answer = pipes.call("textDocument/semanticTokens/full", {"textDocument": {"uri": uri}})
    tokens_cpu = time.process_time() - tokens_started
    count = len(answer.get("result", {}).get("data", [])) // 5
    rows.append(Row(
        f"k. sd lsp: semanticTokens/full on {kb}", f"{secs(tokens_cpu)} ({count:,} tokens)", "-", None, "info", None,
        "" if pipes.server.analyses - before == 1 else "the token request analysed the text again",
    ))  # fmt: skip
    pipes.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lsp", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print_table(asyncio.run(run(parser.parse_args().quick)), "the language server")


if __name__ == "__main__":
    main()

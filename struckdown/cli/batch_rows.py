"""What `sd batch` keeps while its rows finish, a few bytes a row: rows for stdout held
until the earlier ones are out (`InOrder`), the counts the summary and the exit code
need (`Tally`), and per-row arrays read as sequences (`Pending`, `Hashes`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from ..batch.tables import json_line
from ..wording import counted
from .costs import cache_part, cost_part
from .errors import cli_words
from .text import visible

SHOWN_FAILURES = 5
NOT_RUN = "not run: budget spent"  # the one name of rows the batch budget kept from starting


class InOrder:
    """Writes rows to stdout as JSONL in input order, each as soon as all earlier ones are
    out. Rows that must wait are held in memory up to `HELD`, then in a temporary file."""

    HELD = 1000

    def __init__(self) -> None:
        self.next = 0
        self.waiting: dict[int, str | tuple[int, int]] = {}
        self.held = 0
        self.spool: Any = None
        self.spooled = 0

    def offer(self, index: int, row: dict[str, Any]) -> None:
        line = json_line(row) + "\n"
        if index != self.next:
            self._hold(index, line)
            return
        sys.stdout.write(line)
        self.next += 1
        while self.next in self.waiting:
            sys.stdout.write(self._take(self.waiting.pop(self.next)))
            self.next += 1
        sys.stdout.flush()

    def _hold(self, index: int, line: str) -> None:
        if self.held < self.HELD:
            self.waiting[index] = line
            self.held += 1
            return
        import tempfile

        if self.spool is None:
            self.spool = tempfile.TemporaryFile()
        data = line.encode("utf-8")
        self.spool.write(data)
        self.spool.flush()
        self.waiting[index] = (self.spooled, len(data))
        self.spooled += len(data)

    def _take(self, held: str | tuple[int, int]) -> str:
        if isinstance(held, str):
            self.held -= 1
            return held
        import os

        offset, size = held
        return os.pread(self.spool.fileno(), size, offset).decode("utf-8")


class Tally:
    """What the summary and the exit code need, counted as rows finish: never the rows."""

    def __init__(self) -> None:
        self.rows = 0
        self.failed = 0
        self.halted = 0
        self.failures = 0
        self.unrun = 0  # rows the batch budget kept from starting
        self.unknown = 0  # SPEC §29: rows waiting for a decision about a call whose outcome is unknown
        self.denied = 0  # tool calls that needed approval and were denied
        self.denied_rows = 0
        self.requests = 0
        self.cached = 0  # answers served by the response cache
        self.tokens = 0
        self.input_tokens = 0
        self.cache_read = 0  # SPEC §24: input tokens read from the provider's prompt cache
        self.cache_saved: float | None = None
        self.cost = 0.0
        self.priced = True  # every row that made a request has a cost
        self.usages: list[dict[str, Any]] = []  # --head: the rows' usage, for the projection (at most N)
        self.keep_usages = False
        self.answer_keys: dict[str, None] = {}
        self.first_failures: list[tuple[int, str]] = []  # a max-heap by -index of the first ones
        self.reruns: list[int] | None = None  # SPEC §25: [slots reused, slots re-run] of rows run again

    def add(self, entry: dict[str, Any], reruns: Any = None) -> None:
        import heapq

        self.rows += 1
        if reruns is not None:  # a row the effect journal held answers of (run/durable/rerun.py)
            self.reruns = self.reruns or [0, 0]
            self.reruns[0] += reruns.reused_count
            self.reruns[1] += reruns.rerun_count
        self.answer_keys.update(dict.fromkeys(entry["answers"]))
        usage = entry["usage"]
        if entry.get("denied"):
            self.denied += entry["denied"]
            self.denied_rows += 1
        self.requests += usage.get("requests", 0)
        self.cached += entry.get("cached", 0)
        self.tokens += usage.get("total_tokens", 0)
        self.input_tokens += usage.get("input_tokens", 0) or 0
        self.cache_read += usage.get("cache_read_tokens", 0) or 0
        if usage.get("cache_saved") is not None:
            self.cache_saved = (self.cache_saved or 0.0) + float(usage["cache_saved"])
        if usage.get("cost") is not None:
            self.cost += float(usage["cost"])
        elif usage.get("requests"):
            self.priced = False
        if self.keep_usages:
            self.usages.append({"usage": usage})
        if entry["ok"]:
            return
        if entry.get("not_run"):  # not a failure: the budget kept it from starting
            self.unrun += 1
            return
        if entry.get("unknown"):  # neither ok nor failed: it waits for the user's decision
            self.unknown += 1
            return
        self.failures += 1
        if entry.get("halted"):
            self.halted += 1
        else:
            self.failed += 1
        item = (-entry["index"], str(entry["error"]))
        if len(self.first_failures) < SHOWN_FAILURES:
            heapq.heappush(self.first_failures, item)
        elif item > self.first_failures[0]:
            heapq.heapreplace(self.first_failures, item)

    def summary(self, console: Any, request: Any, total: int, earlier: int, elapsed: float) -> None:
        ok = total - self.failed - self.halted - self.unrun - self.unknown
        target = f" → {request.output}" if request.output is not None else ""
        parts = [f"{ok} ok"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.halted:
            parts.append(f"{self.halted} halted")
        if self.unrun:
            parts.append(f"{self.unrun} {NOT_RUN} (--resume runs them)")
        if self.unknown:
            parts.append(f"{self.unknown} unknown")
        line = f"batch: {counted(total, 'row')}{target}: {', '.join(parts)}"
        if earlier:
            line += f" ({earlier} done earlier, from the journal)"
        if self.cached:
            line += f" · {counted(self.cached, 'answer')} cached"
        line += f" · {counted(self.requests, 'request')} · {counted(self.tokens, 'token')}"
        cost = cost_part({"cost": self.cost}) if self.priced and self.requests else None
        line += f" · {cost}" if cost is not None else ""
        cache = cache_part(self.cache_read, self.input_tokens, self.cache_saved if cost is not None else None)
        line += f" · {cache}" if cache is not None else ""
        line += f" · {elapsed:.2f} s"
        if self.reruns is not None:
            slots = "slot" if self.reruns[0] == 1 else "slots"
            line += f" · reused {self.reruns[0]} {slots}, re-ran {self.reruns[1]}"
        for index, error in sorted((-i, e) for i, e in self.first_failures):
            console.file.write(f"row {index + 1}: {visible(cli_words(error))}\n")  # rows are numbered from 1
        if self.failures > SHOWN_FAILURES:
            more = self.failures - SHOWN_FAILURES
            console.file.write(f"… and {more:,} more failed {'row' if more == 1 else 'rows'} (see the _error column)\n")
        console.file.write(line + "\n")
        if self.unknown:
            waiting = counted(self.unknown, "row")
            console.file.write(
                f"{waiting} wait{'s' if self.unknown == 1 else ''} for a decision about a call whose outcome is unknown "
                "(see the _unknown column): sd batch … --resume --decide happened|not-happened|deny [--row N]\n"
            )
        if self.denied and getattr(request, "approve", "none") == "none":
            calls, rows = self.denied, self.denied_rows
            console.file.write(
                f"note: {counted(calls, 'tool call')} that need{'s' if calls == 1 else ''} approval "
                f"{'was' if calls == 1 else 'were'} denied in {counted(rows, 'row')} "
                "(--approve none is the default; --approve all allows them)\n"
            )
        console.file.flush()


class Pending(Sequence[int]):
    """The row indexes this run runs, by batch position (the rows not done): what
    `ProviderBatchJob` maps positions with. Built on first use, 8 bytes a row."""

    def __init__(self, skip: bytearray) -> None:
        self.skip = skip
        self._indexes: Any = None

    def _built(self) -> Any:
        if self._indexes is None:
            from array import array

            self._indexes = array("q", (i for i, done in enumerate(self.skip) if not done))
        return self._indexes

    def __len__(self) -> int:
        return len(self._built())

    def __getitem__(self, position: Any) -> Any:
        return self._built()[position]


class Hashes(Sequence[str]):
    """Each row's input hash, read from the run's packed bytes."""

    def __init__(self, packed: bytearray) -> None:
        self.packed = packed

    def __len__(self) -> int:
        return len(self.packed) // 8

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.packed[8 * index : 8 * index + 8].hex()

"""Batch progress on stderr: a rich bar (rate, ETA) on a terminal, plain lines elsewhere."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console

PLAIN_EVERY_S = 1.0


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class BatchProgress:
    """`advance(ok)` once per finished row; rows already done count from the start."""

    def __init__(self, console: Console, total: int, already_done: int, label: str = "batch", unit: str = "rows") -> None:
        self.label, self.unit = label, unit  # `sd eval`: "eval", "runs"
        self.console = console
        self.total = total
        self.done = already_done
        self.finished_now = 0
        self.failed = 0
        self.retries = 0  # SPEC §14: requests sent again, slots that fell back, answers cut at their cap
        self.fallbacks = 0
        self.truncated = 0
        self.started = time.perf_counter()
        self._last_line = 0.0
        self._printed_at = already_done  # `done` as of the last plain line
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> BatchProgress:
        if self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                SpinnerColumn(),
                TextColumn(f"[bold]{self.label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]}"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._bar.start()
            self._task = self._bar.add_task("batch", total=self.total, completed=self.done, failed="", rate="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self._printed_at != self.done:
            self._plain_line()

    def rate(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.finished_now / elapsed if elapsed > 0 else 0.0

    def advance(self, ok: bool) -> None:
        self.done += 1
        self.finished_now += 1
        self.failed += not ok
        if self._bar is not None:
            failed = f"[red]{self.failed} failed" if self.failed else ""
            extra = ", ".join(self._resilience())
            failed = f"{failed} [yellow]{extra}" if extra else failed
            self._bar.update(self._task, advance=1, failed=failed, rate=f"{self.rate():.1f} {self.unit}/s")
            return
        now = time.perf_counter()
        if self.done == self.total or now - self._last_line >= PLAIN_EVERY_S:
            self._plain_line()

    def _plain_line(self) -> None:
        rate = self.rate()
        remaining = self.total - self.done
        parts = [f"{self.label}: {self.done}/{self.total} {self.unit}"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        parts += self._resilience()
        parts.append(f"{rate:.1f} {self.unit}/s")
        if remaining and rate > 0:
            parts.append(f"ETA {format_duration(remaining / rate)}")
        self.console.file.write(", ".join(parts) + "\n")
        self.console.file.flush()
        self._last_line = time.perf_counter()
        self._printed_at = self.done

    def _resilience(self) -> list[str]:
        counts = (
            (self.retries, "retr", "y", "ies"), (self.fallbacks, "fallback", "", "s"), (self.truncated, "truncated", "", ""),
        )  # fmt: skip
        return [f"{n} {word}{one if n == 1 else many}" for n, word, one, many in counts if n]

    def resilience_event(self, event: Any) -> None:
        """A SlotRetry or SlotFallback of some row, as it happens (`on_retry=`)."""
        if event.type == "slot_retry":
            self.retries += 1
        elif event.type == "slot_fallback":
            self.fallbacks += 1
            self.note(f"{event.slot}: falling back from {event.from_model} to {event.to_model} — {event.reason}")

    def note(self, message: str) -> None:
        """A line printed above the bar (or plainly)."""
        if self._bar is not None:
            self._bar.console.print(message, markup=False, highlight=False)
        else:
            self.console.file.write(message + "\n")
            self.console.file.flush()

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

    def __init__(self, console: Console, total: int, already_done: int) -> None:
        self.console = console
        self.total = total
        self.done = already_done
        self.finished_now = 0
        self.failed = 0
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
                TextColumn("[bold]batch"),
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
            self._bar.update(self._task, advance=1, failed=failed, rate=f"{self.rate():.1f} rows/s")
            return
        now = time.perf_counter()
        if self.done == self.total or now - self._last_line >= PLAIN_EVERY_S:
            self._plain_line()

    def _plain_line(self) -> None:
        rate = self.rate()
        remaining = self.total - self.done
        parts = [f"batch: {self.done}/{self.total} rows"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        parts.append(f"{rate:.1f} rows/s")
        if remaining and rate > 0:
            parts.append(f"ETA {format_duration(remaining / rate)}")
        self.console.file.write(", ".join(parts) + "\n")
        self.console.file.flush()
        self._last_line = time.perf_counter()
        self._printed_at = self.done

    def note(self, message: str) -> None:
        """A line printed above the bar (or plainly)."""
        if self._bar is not None:
            self._bar.console.print(message, markup=False, highlight=False)
        else:
            self.console.file.write(message + "\n")
            self.console.file.flush()

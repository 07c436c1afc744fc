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
    """`advance(ok)` once per finished row; rows already done count from the start.

    The rate and the ETA come from the rows that finished, never from a guess: with each
    row's own time (`seconds=`, from when the batch took it) and the rows that run at once
    (`concurrency`, `-j`), the rate is `-j` / the mean time of a finished row, so the first
    ETA, taken when the first of eight parallel rows finishes, counts the seven still
    running instead of treating the rows as one after another. The rows left run `-j` at a
    time: the last few take one row's time, not a fraction of it. Without row times
    (`sd eval`), rows finished / time since the start."""

    def __init__(
        self, console: Console, total: int, already_done: int, label: str = "batch", unit: str = "rows",
        concurrency: int = 1,
    ) -> None:
        self.label, self.unit = label, unit  # `sd eval`: "eval", "runs"
        self.console = console
        self.total = total
        self.done = already_done
        self.finished_now = 0
        self.failed = 0
        self.unrun = 0  # rows the batch budget kept from starting (not failures)
        self.retries = 0  # SPEC §14: requests sent again, slots that fell back, answers cut at their cap
        self.fallbacks = 0
        self.truncated = 0
        self.clock = time.perf_counter
        self.started = self.clock()
        self.concurrency = max(1, concurrency)
        self._row_seconds = 0.0  # the finished rows' own times
        self._timed = 0
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
            )

            self._bar = Progress(
                SpinnerColumn(),
                TextColumn(f"[bold]{self.label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]}"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"),
                console=self.console,
            )
            self._bar.start()
            self._task = self._bar.add_task(
                "batch", total=self.total, completed=self.done, failed="", rate="", eta=self._eta_text()
            )
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self._printed_at != self.done:
            self._plain_line()

    def rate(self) -> float:
        """Rows a second, from the rows that finished (see the class)."""
        if self._timed and self._row_seconds > 0:
            return min(self.concurrency, max(1, self.total - self.done + self.finished_now)) * self._timed / self._row_seconds
        elapsed = self.clock() - self.started
        return self.finished_now / elapsed if elapsed > 0 else 0.0

    def eta(self) -> float | None:
        """Seconds until the last row, once a row has finished (None before, and at the end)."""
        remaining = self.total - self.done
        if not remaining or not self.finished_now:
            return None
        if self._timed and self._row_seconds > 0:
            return remaining * (self._row_seconds / self._timed) / min(self.concurrency, remaining)
        rate = self.rate()
        return remaining / rate if rate > 0 else None

    def _eta_text(self) -> str:
        """The bar's ETA column: `ETA …` until a row has finished, then the estimate."""
        if self.done >= self.total:
            return "ETA 0s"
        eta = self.eta()
        return f"ETA {format_duration(eta)}" if eta is not None else "ETA …"

    def advance(self, ok: bool, *, unrun: bool = False, seconds: float | None = None) -> None:
        self.done += 1
        self.finished_now += 1
        self.unrun += unrun
        self.failed += not ok and not unrun
        if seconds is not None and not unrun:  # a row kept from starting took no time
            self._row_seconds += seconds
            self._timed += 1
        if self._bar is not None:
            failed = ", ".join(self._troubles())
            failed = f"[red]{failed}" if failed else ""
            extra = ", ".join(self._resilience())
            failed = f"{failed} [yellow]{extra}" if extra else failed
            self._bar.update(
                self._task, advance=1, failed=failed, rate=f"{self.rate():.1f} {self.unit}/s", eta=self._eta_text()
            )
            return
        now = self.clock()
        if self.done == self.total or now - self._last_line >= PLAIN_EVERY_S:
            self._plain_line()

    def _plain_line(self) -> None:
        parts = [f"{self.label}: {self.done}/{self.total} {self.unit}", *self._troubles()]
        parts += self._resilience()
        parts.append(f"{self.rate():.1f} {self.unit}/s")
        eta = self.eta()
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        self.console.file.write(", ".join(parts) + "\n")
        self.console.file.flush()
        self._last_line = self.clock()
        self._printed_at = self.done

    def _troubles(self) -> list[str]:
        from .batch_rows import NOT_RUN

        return ([f"{self.failed} failed"] if self.failed else []) + ([f"{self.unrun} {NOT_RUN}"] if self.unrun else [])

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

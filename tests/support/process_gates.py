"""Gates between a test and a real child process (tests marked `process`, `browser`).

The child writes a word into a FIFO when it reaches the point the test waits for;
`wait_for_gate` blocks until then. The other way round, `Release` is a gate the child
waits on until the test releases it (`wait_until_released` in the child). Nothing waits on the clock: if the child ends
before it writes, a watcher thread writes the exit code instead, so a broken child
fails the test at once rather than hanging it.
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

EXITED = "exited with "


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


class Release:
    """A FIFO the test holds open for writing: a child's `wait_until_released(path)`
    blocks until the test calls `release()` (or ends: its end of the FIFO closes with
    it), and returns at once from then on. Nothing polls."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDWR)  # a writer for as long as the gate is shut

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def released(self) -> bool:
        return self._fd is None


def wait_until_released(path: str | Path) -> None:
    """In the child: block until the test released the `Release` gate at `path` (its
    read sees the end of the FIFO once no writer is left)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening never waits for a writer
    try:
        os.set_blocking(fd, True)
        while os.read(fd, 4096):  # nobody writes data; end of file = released
            pass
    finally:
        os.close(fd)


def wait_for_gate(gate: Path, process: subprocess.Popen[Any]) -> str:
    """What the child wrote into the FIFO `gate` (the child opens it for writing,
    writes and closes), or `exited with CODE` if the process ended first."""
    # Reader and writer at once: the open never blocks, and the read blocks until
    # someone writes, the child or the watcher below.
    fd = os.open(gate, os.O_RDWR)

    def watch() -> None:
        code = process.wait()
        try:
            out = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader left: the test has read its gate already
            return
        try:
            os.write(out, f"{EXITED}{code}".encode())
        finally:
            os.close(out)

    threading.Thread(target=watch, name="process-gate-watch", daemon=True).start()
    try:
        return os.read(fd, 4096).decode()
    finally:
        os.close(fd)


#: A tools file (format it with `started` and `effect` paths) whose one tool tells the
#: test through the FIFO `started` that it runs, then blocks its thread for an hour and
#: would only then write `effect`: a side effect that must never happen after Ctrl-C.
BLOCKING_TOOLS = '''
import pathlib
import time

def slow_write(note: str) -> str:
    """Write a note, slowly."""
    with open({started!r}, "w") as gate:  # a FIFO: the test reads it, so it knows the tool runs
        gate.write("1")
    time.sleep(3600)  # blocks its thread; the run is interrupted meanwhile
    pathlib.Path({effect!r}).write_text(note)
    return "written"
'''


class RowGates:
    """One `Release` gate per row of a batch (`gate=DIR` of `cli_models.dask_rows`) and
    the FIFO DIR/started their first model calls announce themselves on (`N pid`), from
    whichever process runs them. The test reads the starts in the order they happened
    (`next_start`) and decides which row goes on (`release`). `stop()` (the test's batch
    thread ending) puts an end mark in the FIFO, so a reader never waits for a start
    that cannot come."""

    STOP = -1

    def __init__(self, folder: Path, rows: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        os.mkfifo(folder / "started")
        self._fd = os.open(folder / "started", os.O_RDWR)  # reader and writer: no open ever waits
        self._buffer = b""
        self.gates = {row: Release(folder / str(row)) for row in range(rows)}

    def next_start(self, safety_net: float = 120.0) -> tuple[int, int]:
        """The next `(row, pid)` that started, or `(STOP, 0)` after `stop()`. The timeout
        is only a net against a hung batch (the test fails instead of hanging); no
        result depends on it."""
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self._fd], [], [], safety_net)
            if not ready:
                raise AssertionError(f"no row started in {safety_net:.0f} s: the batch is stuck")
            self._buffer += os.read(self._fd, 4096)
        line, _, self._buffer = self._buffer.partition(b"\n")
        row, pid = line.split()
        return int(row), int(pid)

    def release(self, row: int) -> None:
        self.gates[row].release()

    def release_all(self) -> None:
        for gate in self.gates.values():
            gate.release()

    def stop(self) -> None:
        os.write(self._fd, f"{self.STOP} 0\n".encode())

    def close(self) -> None:
        self.release_all()
        os.close(self._fd)

    def conduct(self, batch: Callable[[], T], conductor: Callable[[RowGates], Any]) -> T:
        """Run `batch()` in a thread while `conductor(self)` decides, here, which rows go
        on; every gate opens when the conductor returns or fails, so the batch always
        ends. Returns what `batch()` returned (or raises what it raised)."""
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["value"] = batch()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
                outcome["error"] = exc
            finally:
                self.stop()

        thread = threading.Thread(target=run, name="gated-batch", daemon=True)
        thread.start()
        try:
            conductor(self)
        finally:
            self.release_all()
            thread.join()
        if "error" in outcome:
            raise outcome["error"]
        value: T = outcome["value"]
        return value

    def hold_until(self, running: int) -> list[tuple[int, int]]:
        """Hold every row until `running` of them have started at once; then let them
        and every later row go as they start. Returns the starts it saw while holding."""
        held: list[tuple[int, int]] = []
        while len(held) < running:
            start = self.next_start()
            if start[0] == self.STOP:
                raise AssertionError(f"the batch ended with {len(held)} of {running} rows started at once")
            held.append(start)
        self.release_all()
        return held

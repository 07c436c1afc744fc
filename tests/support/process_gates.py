"""Gates between a test and a real child process (tests marked `process`, `browser`).

The child writes a word into a FIFO when it reaches the point the test waits for;
`wait_for_gate` blocks until then. The other way round, `Release` is a gate the child
waits on until the test releases it (`wait_until_released` in the child). Nothing waits on the clock: if the child ends
before it writes, a watcher thread writes the exit code instead, so a broken child
fails the test at once rather than hanging it.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

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

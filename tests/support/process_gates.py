"""Gates between a test and a real child process (tests marked `process`).

The child writes a word into a FIFO when it reaches the point the test waits for;
`wait_for_gate` blocks until then. Nothing waits on the clock: if the child ends
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

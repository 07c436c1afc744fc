"""Where an MCP stdio server's own stderr goes: a log file per server, never `sd`'s stderr.

A server started over stdio writes its banner, its logging and its tracebacks to its
stderr. Inherited, those lines land between `sd`'s answers and warnings with nothing to
say whose they are. Each server's stderr is appended to `<dir>/<server name>.log`
instead, after a header line naming the session; `<dir>` is `STRUCKDOWN_MCP_LOG_DIR`,
else `$XDG_STATE_HOME/struckdown/mcp`, else `~/.local/state/struckdown/mcp`. When a
server fails to start, its last lines of this session are quoted in the error, so the
reason is not lost in a file. A folder that cannot be made leaves stderr as it was.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

#: Lines of a failed server's stderr quoted in its error.
TAIL_LINES = 5


def log_dir() -> Path:
    named = os.environ.get("STRUCKDOWN_MCP_LOG_DIR")
    if named:
        return Path(named).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "struckdown" / "mcp"


@dataclass(frozen=True)
class ServerLog:
    """One session's part of a server's log file: it starts at `offset`."""

    path: Path
    offset: int

    @classmethod
    def start(cls, name: str, command: tuple[str, ...]) -> ServerLog | None:
        """Append the session's header; None when the log cannot be written (stderr then stays)."""
        path = log_dir() / f"{name}.log"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                handle.write(f"--- {stamp} struckdown pid {os.getpid()} starts MCP server {name!r}: {' '.join(command)}\n")
                offset = handle.tell()
        except OSError:
            return None
        return cls(path, offset)

    def tail(self, lines: int = TAIL_LINES) -> list[str]:
        """The last lines this session's server wrote (none when it wrote nothing)."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()][-lines:]

    def note(self) -> str:
        """What an error about a server that would not start adds: its last lines and the file."""
        lines = self.tail()
        if not lines:
            return f" (it wrote nothing to its stderr; log: {self.path})"
        return f"; its stderr ends: {' | '.join(line.strip() for line in lines)} (log: {self.path})"

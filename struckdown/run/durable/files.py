"""The files of an effect journal (SPEC §25): its header's name, and reading a journal file
from where the last read stopped, which the journal and the shards its Dask workers write
beside it (run/durable/shards.py) are read with."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...errors import InputError

HEADER = "struckdown effects"

#: SPEC §29: every record line ends with its signature, an HMAC-SHA256 (the paused states'
#: key, approval/signing.py) over the journal's job and the line without it.
SIG = b',"sig":"'
SIG_HEX = 32


def journal_key() -> bytes:
    """The key journals are signed with: the paused states' key of this context."""
    from ...approval.signing import state_key

    try:
        return state_key()
    except ValueError as exc:
        raise InputError(f"cannot sign the journal: {exc}") from None


def _mac(key: bytes, job: str, body: bytes) -> bytes:
    import hashlib
    import hmac

    return hmac.new(key, job.encode() + b"\0" + body, hashlib.sha256).hexdigest()[:SIG_HEX].encode()


def signed(key: bytes, job: str, body: bytes) -> bytes:
    """A JSON object's text (`{…}`) as a signed journal line (with its newline)."""
    return body[:-1] + SIG + _mac(key, job, body) + b'"}\n'


def verify_line(key: bytes, job: str, line: bytes, path: Path, number: int) -> None:
    """An InputError naming the line unless it is what this key signed for this job."""
    import hmac

    text = line.rstrip(b"\r\n")
    at = text.rfind(SIG)
    mac = text[at + len(SIG) : -2] if at >= 0 and text.endswith(b'"}') else b""
    if len(mac) == SIG_HEX and hmac.compare_digest(mac, _mac(key, job, text[:at] + b"}")):
        return
    why = "it is not signed" if at < 0 else "its signature does not match (it was edited, or signed with another key)"
    raise InputError(
        f"journal {path} line {number}: {why}; refusing to read it (journals are signed with the paused states' "
        "key, STRUCKDOWN_STATE_KEY_FILE)"
    )


def shard_paths(journal: Path) -> list[Path]:
    """The files the Dask workers of a batch write beside `journal` (`JOURNAL.worker1`, …),
    in order; their `.lock` files are not among them."""
    prefix = journal.name + ".worker"
    try:
        names = os.listdir(journal.parent)
    except OSError:
        return []
    numbered = [(int(n[len(prefix):]), n) for n in names if n.startswith(prefix) and n[len(prefix):].isdigit()]
    return [journal.with_name(name) for _, name in sorted(numbered)]


class Tail:
    """One journal file read from where the last `read` stopped, whole lines only (a line
    a writer has not finished is read next time); `job` is its header's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.job = ""
        self.lines = 0  # whole lines read so far (an edited one is refused by its number)
        self._key: bytes | None = None

    def header_job(self) -> str:
        """The job its header names now ("" when the file is gone or has no header)."""
        try:
            with self.path.open("rb") as handle:
                first = handle.readline()
            entry = json.loads(first)
        except (OSError, ValueError):
            return ""
        return str(entry.get("job") or "") if isinstance(entry, dict) and entry.get("journal") == HEADER else ""

    def read(self) -> list[dict[str, Any]]:
        """The effect records written since the last read."""
        try:
            if os.stat(self.path).st_size <= self.offset:
                return []
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise InputError(f"cannot read journal {self.path}: {exc}") from None
        end = data.rfind(b"\n") + 1
        self.offset += end
        entries: list[dict[str, Any]] = []
        for line in data[:end].splitlines():
            self.lines += 1
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue  # a line a kill cut short
            if not isinstance(entry, dict):
                continue
            if entry.get("journal") == HEADER:
                self.job = self.job or str(entry.get("job") or "")
            elif isinstance(entry.get("effect"), str):
                if self.job:  # a shard of another job is emptied unread (shards.py)
                    if self._key is None:
                        self._key = journal_key()
                    verify_line(self._key, self.job, line, self.path, self.lines)
                entries.append(entry)
        return entries

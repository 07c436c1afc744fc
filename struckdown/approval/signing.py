"""Signed paused states (issue 39 N3/N5): the call a person approves is the call that runs.

A `Paused.state` leaves the process (a file, a web page, a database) and comes back to
`resume`. Whoever can edit it in between could change a call's arguments after they were
shown, add a "finished" entry that skips a guard, or null `template_path`. So every state
carries `signature`: a SHA-256 digest of each part (the template, its path, the context,
each finished slot, each paused slot, each request, …) and an HMAC-SHA256 over those
digests with a secret key. `verify_state` recomputes the digests, names the parts that
differ, and checks the HMAC; a state without a signature, or signed with another key, is
refused.

The key: the one `using_state_key` set for the current context (`sd serve`: one per
server and API key), else the file `STRUCKDOWN_STATE_KEY_FILE` names, else
`$XDG_CONFIG_HOME/struckdown/state.key` (`~/.config/struckdown/state.key`), made with 32
random bytes and mode 0600 on first use. Resuming on another machine needs the same file.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

SIGNATURE = "signature"
KEY_ENV = "STRUCKDOWN_STATE_KEY_FILE"

#: The signing key of this context (`using_state_key`). A ContextVar: `sd serve`'s worker signs
#: each request's states with the caller's key while other requests run (web/worker.py).
_KEY: contextvars.ContextVar[bytes | None] = contextvars.ContextVar("struckdown_state_key", default=None)

#: Parts of a state compared as a whole, with how an error names them.
_PARTS = {
    "format": "its format", "struckdown": "its struckdown version", "template": "the template text",
    "template_path": "template_path", "includes": "the included files' hashes", "context": "the context",
    "tools": "the tool names", "actions": "the actions that ran", "options": "the recorded run options",
    "extra": "extra (the host's settings)",
}
#: Lists of a state compared item by item: (field, the item's name field, how an error names one).
_ITEMS = (("finished", "key", "finished slot"), ("paused", "slot", "paused slot"), ("requests", "id", "request"))


@contextlib.contextmanager
def using_state_key(key: bytes) -> Iterator[None]:
    """Sign and verify the states of this context with `key` (not the per-user key file)."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)


def key_file() -> Path:
    named = os.environ.get(KEY_ENV)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "struckdown" / "state.key"


def state_key() -> bytes:
    """The signing key of this context (see the module's docstring)."""
    key = _KEY.get()
    if key is not None:
        return key
    path = key_file()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = _make_key_file(path)
    except OSError as exc:
        raise ValueError(f"cannot read the paused-state key {path} ({KEY_ENV}): {exc.strerror or exc}") from None
    if len(data) < 16:
        raise ValueError(f"the paused-state key {path} ({KEY_ENV}) is shorter than 16 bytes")
    return data


def _make_key_file(path: Path) -> bytes:
    """32 random bytes in a new 0600 file; a file another process made first wins."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
        try:
            os.link(temp, path)  # atomic, and never replaces a key someone else made
        except FileExistsError:
            pass
        finally:
            os.unlink(temp)
        return path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot make the paused-state key {path} ({KEY_ENV}): {exc.strerror or exc}") from None


def _canonical(value: Any) -> bytes:
    """The bytes a part is signed as: sorted keys, and numbers as JavaScript writes them back
    (the playground's page returns the state through `JSON.parse`/`JSON.stringify`, which
    turns `12.0` into `12`): an integral float is its int."""
    return json.dumps(_js_numbers(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      default=str).encode()


def _js_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _js_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_js_numbers(v) for v in value]
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


def digests(state: Mapping[str, Any]) -> dict[str, Any]:
    """A digest of each part of `state` (each finished slot, paused slot and request apart)."""
    out: dict[str, Any] = {name: _digest(state.get(name)) for name in _PARTS}
    for name, key, _ in _ITEMS:
        items = state.get(name) or []
        if not isinstance(items, list):
            out[name] = {"": _digest(items)}
            continue
        out[name] = {str(item.get(key) if isinstance(item, Mapping) else index): _digest(item)
                     for index, item in enumerate(items)}
        if len(out[name]) != len(items):
            out[name][""] = _digest(items)  # two items of one name: compare the whole list
    return out


def key_id(key: bytes) -> str:
    return hashlib.sha256(b"struckdown state key id\0" + key).hexdigest()[:12]


def sign_state(state: dict[str, Any]) -> dict[str, Any]:
    """Sign `state` in place (again, after a host changed its `extra`) and return it."""
    key = state_key()
    found = digests({k: v for k, v in state.items() if k != SIGNATURE})
    mac = hmac.new(key, _canonical(found), hashlib.sha256).hexdigest()
    state[SIGNATURE] = {"key_id": key_id(key), "digests": found, "hmac": mac}
    return state


def call_hash(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """What a decision binds: the tool's name and its exact arguments."""
    return _digest({"tool_name": tool_name, "arguments": arguments})


def verify_state(state: Mapping[str, Any]) -> None:
    """A ValueError unless `state` is exactly what this key signed, naming what differs."""
    signature = state.get(SIGNATURE)
    if not isinstance(signature, Mapping) or not isinstance(signature.get("digests"), Mapping):
        raise ValueError(
            "the paused state is not signed, so it may have been edited; refusing to resume it "
            "(states are signed since struckdown 1.0: run the template again and pause it anew)"
        )
    key = state_key()
    if signature.get("key_id") != key_id(key):
        raise ValueError(
            f"the paused state was signed with another key (key id {signature.get('key_id')!r}, this one's is "
            f"{key_id(key)!r}): resume it where it paused, or with that key ({KEY_ENV})"
        )
    now = digests({k: v for k, v in state.items() if k != SIGNATURE})
    changed = _differences(signature["digests"], now)
    if changed:
        raise ValueError(f"the paused state was edited since it was signed: {'; '.join(changed)}; refusing to resume it")
    expected = hmac.new(key, _canonical(signature["digests"]), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(str(signature.get("hmac")), expected):
        raise ValueError("the paused state's signature does not match its contents (it was edited); refusing to resume it")


def _differences(signed: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    changed = [f"{label} differs" for name, label in _PARTS.items() if signed.get(name) != now[name]]
    for name, _, label in _ITEMS:
        before, after = signed.get(name), now[name]
        if not isinstance(before, Mapping):
            changed.append(f"the {name} list differs")
            continue
        for item in sorted(set(before) | set(after)):
            if item not in after:
                changed.append(f"{label} {item!r} was removed")
            elif item not in before:
                changed.append(f"{label} {item!r} was added")
            elif before[item] != after[item]:
                changed.append(f"{label} {item!r} differs")
    return changed


#: SPEC §29: the paused states resumed already, one line each (`ID<TAB>when<TAB>by`), beside the key file.
RESUMED_FILE = "resumed.log"


def state_id(state: Mapping[str, Any]) -> str:
    """A signed state's id: its signature's HMAC (a new pause is a new state, a new id)."""
    signature = state.get(SIGNATURE)
    mac = signature.get("hmac") if isinstance(signature, Mapping) else None
    return "state_" + str(mac)[:24]


def claim_resume(state: Mapping[str, Any], by: str) -> None:
    """Record `state` as resumed (by `sd resume`, the playground), once: a second use is a
    ValueError naming the first (two resumes of one state would run its approved calls twice).
    Call it after the state and its decisions were checked, before anything runs."""
    import fcntl
    import time

    ident = state_id(state)
    path = key_file().parent / RESUMED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                parts = line.rstrip("\n").split("\t")
                if parts[0] == ident:
                    when = parts[1] if len(parts) > 1 else "earlier"
                    who = parts[2] if len(parts) > 2 else "a resume"
                    raise ValueError(
                        f"this paused state ({ident}) was resumed already, by {who} at {when}: a paused state is "
                        "resumed once (its approved calls would run again); run the template again to pause anew"
                    )
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        os.write(fd, f"{ident}\t{stamp}\t{by}\n".encode())
    finally:
        os.close(fd)  # the lock goes with it

"""The playground's run messages as AG-UI events (`?protocol=ag-ui`, SPEC §36), built
with the protocol's own package (`ag-ui-protocol`, module `ag_ui`, in the `web` extra)
and encoded by its `EventEncoder`.

pydantic-ai's AG-UI adapter drives one agent run; a template is many agent runs under
one engine, so the engine's events are translated here instead:

| struckdown                                   | AG-UI |
|----------------------------------------------|-------|
| `run_started`                                | `RUN_STARTED`, `STATE_SNAPSHOT {answers: {}}` |
| `token_delta` (a slot's text)                | `TEXT_MESSAGE_START` (once a slot), `TEXT_MESSAGE_CONTENT` |
| `tool_started` / `tool_completed`            | `TOOL_CALL_START`, `_ARGS`, `_END` / `TOOL_CALL_RESULT` |
| `slot_partial`, `slot_completed`             | `STATE_DELTA` (JSON Patch `add /answers/KEY`); the text message ends |
| `slot_retracted`                             | `STATE_DELTA` (`remove /answers/KEY`) |
| `processing_complete`                        | `RUN_FINISHED`, `result` = the JSON answer (paused: with `requests`, `state`) |
| `processing_error`, `diagnostics`            | `RUN_ERROR` |
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any


def _pointer(key: str) -> str:
    return "/answers/" + key.replace("~", "~0").replace("/", "~1")


class AgUiTranslator:
    def __init__(self, name: str, keys: frozenset[str]) -> None:
        from ag_ui.encoder import EventEncoder

        self.encoder = EventEncoder()
        self.thread_id = f"{name}-{secrets.token_hex(6)}"
        self.run_id = secrets.token_hex(8)
        self.open: set[str] = set()  # slots whose text message is open
        self.answered: set[str] = set()
        self.calls: dict[tuple[str, str, str], list[str]] = {}
        self.count = 0
        self.keys = keys  # the answers the output schema lists (guards give none)

    def __call__(self, message: dict[str, Any]) -> list[bytes]:
        return [self.encoder.encode(event).encode() for event in self.events(message)]

    def _message_id(self, slot: str) -> str:
        return f"{self.run_id}:{slot}"

    def events(self, message: dict[str, Any]) -> list[Any]:
        from ag_ui import core

        kind = message.get("type")
        out: list[Any] = []
        if kind == "run_started":
            out.append(core.RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id))
            out.append(core.StateSnapshotEvent(snapshot={"answers": {}}))
        elif kind == "token_delta":
            slot = str(message["slot"])
            if slot not in self.open:
                self.open.add(slot)
                out.append(core.TextMessageStartEvent(message_id=self._message_id(slot), role="assistant", name=slot))
            if message.get("delta"):
                out.append(core.TextMessageContentEvent(message_id=self._message_id(slot), delta=message["delta"]))
        elif kind == "tool_started":
            self.count += 1
            call_id = f"{self.run_id}:call-{self.count}"
            self.calls.setdefault(self._call_key(message), []).append(call_id)
            out += [
                core.ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(message["tool_name"])),
                core.ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(message.get("arguments") or {})),
                core.ToolCallEndEvent(tool_call_id=call_id),
            ]
        elif kind == "tool_completed":
            waiting = self.calls.get(self._call_key(message)) or []
            if waiting:
                call_id = waiting.pop(0)
                content = json.dumps(message.get("output")) if message.get("ok") else str(message.get("error"))
                out.append(core.ToolCallResultEvent(
                    message_id=f"{call_id}:result", tool_call_id=call_id, content=content, role="tool"
                ))
        elif kind in ("slot_partial", "slot_completed"):
            slot = str(message["slot"])
            value = message.get("value") if kind == "slot_partial" else (message.get("result") or {}).get("output")
            if kind == "slot_completed":
                out += self._close(slot)
            self.answered.add(slot)
            out.append(core.StateDeltaEvent.model_validate({"delta": [{"op": "add", "path": _pointer(slot), "value": value}]}))
        elif kind == "slot_retracted":
            slot = str(message["slot"])
            out += self._close(slot)
            if slot in self.answered:
                self.answered.discard(slot)
                out.append(core.StateDeltaEvent.model_validate({"delta": [{"op": "remove", "path": _pointer(slot)}]}))
        elif kind == "processing_complete":
            for slot in sorted(self.open):
                out += self._close(slot)
            usage = message.get("usage") or {}
            answers = {k: v for k, v in (message.get("result") or {}).items() if k in self.keys}
            result = {"answers": answers, "usage": usage, "cost": usage.get("cost"),
                      "halted": message.get("halted")}
            if message.get("state") is not None:  # paused: what /v1/templates/T/approval takes back
                result.update(requests=message.get("requests") or [], state=message["state"])
            out.append(core.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=result))
        elif kind in ("processing_error", "diagnostics"):
            text = message.get("error") or "; ".join(
                f"{d['line']}:{d['column']}: {d['message']}" for d in message.get("diagnostics", [])
            )
            out.append(core.RunErrorEvent(message=str(text), code=str(kind)))
        return out

    def _close(self, slot: str) -> list[Any]:
        from ag_ui import core

        if slot not in self.open:
            return []
        self.open.discard(slot)
        return [core.TextMessageEndEvent(message_id=self._message_id(slot))]

    @staticmethod
    def _call_key(message: dict[str, Any]) -> tuple[str, str, str]:
        return (str(message.get("slot")), str(message.get("tool_name")),
                json.dumps(message.get("arguments"), sort_keys=True))


def translator(name: str, keys: frozenset[str]) -> Callable[[dict[str, Any]], list[bytes]]:
    return AgUiTranslator(name, keys)

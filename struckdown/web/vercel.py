"""The playground's run messages as the Vercel AI SDK's UI message stream
(`?protocol=vercel-ai`, SPEC §36): server-sent events of the chunk types pydantic-ai's
Vercel AI adapter publishes (`pydantic_ai.ui.vercel_ai.response_types`), each encoded by
the chunk itself, with the `x-vercel-ai-ui-message-stream: v1` header.

As for AG-UI (`agui.py`), the adapter itself drives one agent run, and a template is many,
so the engine's events are translated here:

- `run_started`: `start`
- `token_delta` (a slot's text): `text-start` (id `RUN:SLOT`, once a slot), `text-delta`;
  `text-end` when the slot is done
- `tool_started` / `tool_completed`: `tool-input-start`, `tool-input-available` /
  `tool-output-available` or `tool-output-error`
- `slot_partial`, `slot_completed`: `data-answer` `{slot, value, final}` whose id is the slot
  (a client replaces it in place)
- a run paused for approval: per call `tool-input-available`, `tool-approval-request`
  (the approval id is the request id)
- `processing_complete`: `data-result` `{answers, usage, cost, halted, state?}`, `finish`, `[DONE]`
- `processing_error`, `diagnostics`: `error`, `finish` (reason `error`), `[DONE]`
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
SDK_VERSION = 6  # tool approval chunks are the AI SDK's v6


class VercelTranslator:
    def __init__(self, keys: frozenset[str]) -> None:
        self.run_id = secrets.token_hex(8)
        self.keys = keys
        self.open: set[str] = set()
        self.calls: dict[tuple[str, str, str], list[str]] = {}
        self.count = 0

    def __call__(self, message: dict[str, Any]) -> list[bytes]:
        out = []
        for chunk in self.chunks(message):
            out.append(f"data: {chunk.encode(SDK_VERSION)}\n\n".encode())
        return out

    def _text_id(self, slot: str) -> str:
        return f"{self.run_id}:{slot}"

    def chunks(self, message: dict[str, Any]) -> list[Any]:
        from pydantic_ai.ui.vercel_ai import response_types as v

        kind = message.get("type")
        out: list[Any] = []
        if kind == "run_started":
            out.append(v.StartChunk(message_id=self.run_id))
        elif kind == "token_delta":
            slot = str(message["slot"])
            if slot not in self.open:
                self.open.add(slot)
                out.append(v.TextStartChunk(id=self._text_id(slot)))
            if message.get("delta"):
                out.append(v.TextDeltaChunk(id=self._text_id(slot), delta=message["delta"]))
        elif kind == "tool_started":
            self.count += 1
            call_id = f"{self.run_id}:call-{self.count}"
            self.calls.setdefault(_call_key(message), []).append(call_id)
            name = str(message["tool_name"])
            out += [
                v.ToolInputStartChunk(tool_call_id=call_id, tool_name=name),
                v.ToolInputAvailableChunk(tool_call_id=call_id, tool_name=name, input=message.get("arguments") or {}),
            ]
        elif kind == "tool_completed":
            waiting = self.calls.get(_call_key(message)) or []
            if waiting:
                call_id = waiting.pop(0)
                if message.get("ok"):
                    out.append(v.ToolOutputAvailableChunk(tool_call_id=call_id, output=message.get("output")))
                else:
                    out.append(v.ToolOutputErrorChunk(tool_call_id=call_id, error_text=str(message.get("error"))))
        elif kind in ("slot_partial", "slot_completed"):
            slot = str(message["slot"])
            final = kind == "slot_completed"
            value = (message.get("result") or {}).get("output") if final else message.get("value")
            if final:
                out += self._close(slot)
            if slot in self.keys:
                out.append(v.DataChunk(type="data-answer", id=slot, data={"slot": slot, "value": value, "final": final}))
        elif kind == "processing_complete":
            for slot in sorted(self.open):
                out += self._close(slot)
            for request in message.get("requests") or []:
                call_id = str(request["id"])
                out += [
                    v.ToolInputAvailableChunk(tool_call_id=call_id, tool_name=str(request["tool_name"]),
                                              input=request.get("arguments") or {}),
                    v.ToolApprovalRequestChunk(approval_id=call_id, tool_call_id=call_id),
                ]
            usage = message.get("usage") or {}
            result: dict[str, Any] = {
                "answers": {k: val for k, val in (message.get("result") or {}).items() if k in self.keys},
                "usage": usage, "cost": usage.get("cost"), "halted": message.get("halted"),
            }
            if message.get("state") is not None:  # a paused run: what /api/approval takes back
                result["state"] = message["state"]
            out += [v.DataChunk(type="data-result", data=result), v.FinishChunk(finish_reason="stop"), v.DoneChunk()]
        elif kind in ("processing_error", "diagnostics"):
            text = message.get("error") or "; ".join(
                f"{d['line']}:{d['column']}: {d['message']}" for d in message.get("diagnostics", [])
            )
            out += [v.ErrorChunk(error_text=str(text)), v.FinishChunk(finish_reason="error"), v.DoneChunk()]
        return out

    def _close(self, slot: str) -> list[Any]:
        from pydantic_ai.ui.vercel_ai import response_types as v

        if slot not in self.open:
            return []
        self.open.discard(slot)
        return [v.TextEndChunk(id=self._text_id(slot))]


def _call_key(message: dict[str, Any]) -> tuple[str, str, str]:
    return (str(message.get("slot")), str(message.get("tool_name")), json.dumps(message.get("arguments"), sort_keys=True))


def translator(keys: frozenset[str]) -> Callable[[dict[str, Any]], list[bytes]]:
    return VercelTranslator(keys)

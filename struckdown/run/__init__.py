"""The engine: one walker over a Program's plan that produces the SPEC §6 events.

`events()` is the only execution path; `run_to_result()` consumes it in place (both in
`entry`). Inside: `engine` (segments, together, guards, actions), `slot` (one pydantic-ai
agent run per slot; its streamed text through `text_stream`, typed answers through
`partials`), `tools` (the per-slot tool wrapper), `guards` (pending verdicts),
`conversation` (turns and instructions), `caches` (agents reused across runs of one
Environment).
"""

from .entry import events, run_to_result
from .settings import RunSettings

__all__ = ["RunSettings", "events", "run_to_result"]

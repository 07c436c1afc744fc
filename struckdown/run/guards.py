"""Pending guard verdicts: futures the engine joins before anything irreversible.

A guard is *preceding* a point of the run when it belongs to an earlier segment,
or was reached earlier in the same segment. Joining waits for every preceding
guard: started ones to finish, not-yet-started ones to start and finish (or be
skipped because their branch or segment did not run). Guard model calls never
count as "calls beside" a guard.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..errors import Halted


@dataclass
class GuardState:
    key: str
    segment: int
    when: bool = True
    done: anyio.Event = field(default_factory=anyio.Event)
    started: bool = False
    calls_beside: int = 0
    verdict: dict[str, Any] | None = None

    @property
    def tripped(self) -> bool:
        return self.verdict is not None and bool(self.verdict.get("triggered")) == self.when


class GuardBoard:
    def __init__(self, guards_by_segment: dict[int, list[str]]) -> None:
        self.states: dict[str, GuardState] = {
            key: GuardState(key, seg) for seg, keys in guards_by_segment.items() for key in keys
        }
        self.trip: Halted | None = None

    def start(self, key: str, when: bool) -> GuardState:
        state = self.states[key]
        state.started, state.when = True, when
        return state

    def finish(self, key: str, verdict: dict[str, Any]) -> bool:
        state = self.states[key]
        state.verdict = verdict
        state.done.set()
        return state.tripped

    def skip(self, keys: Iterable[str]) -> None:
        for key in keys:
            state = self.states.get(key)
            if state is not None and not state.started:
                state.done.set()

    def _preceding(self, segment: int, exclude: str | None) -> list[GuardState]:
        return [
            s
            for s in self.states.values()
            if s.key != exclude and (s.segment < segment or (s.segment == segment and s.started))
        ]

    async def join(self, segment: int, exclude: str | None = None) -> None:
        """Wait for every guard preceding this point of `segment` (a guard's own tools
        do not wait for the guard itself); raise if one tripped."""
        for state in self._preceding(segment, exclude):
            await state.done.wait()
            self._raise_if_tripped(state)

    async def join_all(self) -> None:
        for state in list(self.states.values()):
            await state.done.wait()
            self._raise_if_tripped(state)

    async def before_model_call(self) -> None:
        """A started guard gets one model call beside it; the next call waits for it."""
        for state in list(self.states.values()):
            if state.started and not state.done.is_set():
                if state.calls_beside >= 1:
                    await state.done.wait()
                else:
                    state.calls_beside += 1
            self._raise_if_tripped(state)

    def _raise_if_tripped(self, state: GuardState) -> None:
        if state.tripped:
            raise self.halted(state)

    def halted(self, state: GuardState) -> Halted:
        if self.trip is None:
            reason = str((state.verdict or {}).get("reason", ""))
            self.trip = Halted(state.key, reason)
        return self.trip

    @property
    def pending(self) -> bool:
        return any(not s.done.is_set() for s in self.states.values())

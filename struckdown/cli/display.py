"""What `sd run` shows while a template runs.

On a terminal: a rich live region with the slots in progress (their tokens as they
stream, a typed answer's partial object as it grows, running tools) above which finished answers, tool calls and guard verdicts
are printed for good. Anywhere else (a pipe, a file, CI): plain lines, no control
codes; the tokens of one slot at a time are written as they arrive. The plain form
imports no rich (`run_console`, `Line`): rich costs `sd run` a tenth of its start-up.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from ..wording import counted
from .attachments import attachment_lines
from .text import visible

TAIL_LINES = 6
ARG_WIDTH = 60
OUTPUT_WIDTH = 100

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.spinner import Spinner
    from rich.text import Text


def make_console(stream: TextIO) -> Console:
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=False)


def run_console(stream: TextIO) -> Console | PlainConsole:
    """The console of `sd run`'s display: rich's where rich would see a terminal (or is
    told to: FORCE_COLOR, TTY_COMPATIBLE), a `PlainConsole` (no rich imported) elsewhere."""
    return PlainConsole(stream) if _plain(stream) else make_console(stream)


def _plain(stream: TextIO) -> bool:
    """Whether rich's `Console(file=stream).is_terminal` is surely False: the stream says
    it is no terminal and none of the variables rich reads to decide otherwise is set."""
    import os

    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return False
    isatty = getattr(stream, "isatty", None)
    if isatty is None:
        return False
    try:
        return not isatty()
    except ValueError:  # a closed stream: rich says no terminal too
        return True


class PlainConsole:
    """What `RunDisplay` uses of a rich `Console` writing to no terminal: `file`,
    `is_terminal`, and `print`, which hands a line to a rich console made then (a failed
    run's last line), so what it prints is rich's."""

    is_terminal = False

    def __init__(self, stream: TextIO) -> None:
        self.file = stream
        self._rich: Console | None = None

    def print(self, renderable: Any) -> None:
        if self._rich is None:
            self._rich = make_console(self.file)
        self._rich.print(as_rich(renderable))


class Line:
    """A line of the display: text with rich styles, built as rich's `Text` is (`Line(text,
    style=)` then `append(text, style=)`), but plain data: the plain display prints `plain`,
    the live one converts it (`as_rich`) when it prints it."""

    __slots__ = ("parts", "style")

    def __init__(self, text: str = "", style: str | None = None) -> None:
        self.style = style
        self.parts: list[tuple[str, str | None]] = [(text, None)]

    def append(self, text: str, style: str | None = None) -> Line:
        self.parts.append((text, style))
        return self

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.parts)


def as_rich(renderable: Any) -> Any:
    """A `Line` as rich's `Text` (the same calls made on it); anything else as it is."""
    if not isinstance(renderable, Line):
        return renderable
    from rich.text import Text

    (first, _), *rest = renderable.parts
    text = Text(first, style=renderable.style or "")
    for part, style in rest:
        text.append(part, style=style)
    return text


def short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = visible(" ".join(text.split()) if "\n" in text else text)
    return text if len(text) <= width else text[: width - 1] + "…"


def call_label(tool_name: str, arguments: Mapping[str, Any]) -> str:
    args = ", ".join(
        f"{k}={short(json.dumps(v, ensure_ascii=False, default=str), ARG_WIDTH)}" for k, v in arguments.items()
    )
    return f"{visible(tool_name)}({args})"


def token_rate(started: float, pieces: int, now: float) -> str:
    """`412 tokens · 15.2 tok/s · 27 s` of a streaming answer (a streamed piece is about a token)."""
    elapsed = max(now - started, 1e-9)
    return f"{counted(pieces, 'token')} · {pieces / elapsed:.1f} tok/s · {elapsed:.0f} s"


def answer_text(value: Any) -> str:
    """An answer as the display prints it: text, and a value that is one string in JSON (a
    date, a time, a decimal), as it is; anything else as JSON."""
    if isinstance(value, str):
        return visible(value)
    from ..codec import jsonable

    plain = jsonable(value)
    if isinstance(plain, str):
        return visible(plain)
    return visible(json.dumps(plain, ensure_ascii=False))


def partial_text(value: Any, complete: Sequence[str | int]) -> str:
    """A partial answer as the live region shows it: indented JSON, then which members are done."""
    from ..codec import jsonable

    text = json.dumps(jsonable(value), ensure_ascii=False, indent=2)
    done = ", ".join(str(member) for member in complete)
    return f"{text}\n✓ {done}" if done else text


def stats_line(result: Any, elapsed_s: float) -> str:
    usage = result.usage
    cached = sum(1 for slot in result.results.values() if getattr(slot, "cached", False))
    parts = [
        counted(len(result), "answer") + (f" ({cached} cached)" if cached else ""),
        counted(usage.requests, "request"),
    ]
    if usage.tool_calls:
        parts.append(counted(usage.tool_calls, "tool call"))
    parts.append(f"{counted(usage.total_tokens, 'token')} ({usage.input_tokens:,} in, {usage.output_tokens:,} out)")
    from .costs import cache_part, cost_part

    cost = cost_part(usage)
    if cost is not None:
        parts.append(cost)
    cache = cache_part(usage.cache_read_tokens, usage.input_tokens, usage.cache_saved if cost is not None else None)
    if cache is not None:
        parts.append(cache)
    parts.append(f"{elapsed_s:.2f} s")
    return " · ".join(parts)


class RunDisplay:
    """Feed it every event of a run (`handle`), then `summary` the Result."""

    def __init__(
        self,
        console: Console | PlainConsole,
        guards: Mapping[str, bool],
        order: Sequence[str] = (),
        settles: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.console = console
        self.live_mode = console.is_terminal
        self.guards = guards  # guard key → its `when` value
        # Answers are shown in template order: one that finishes early waits until every
        # answer above it is shown or will never come (`settles`: the keys a key's
        # completion proves finished or skipped, see `answer_order`).
        self.order = tuple(order)
        self.rank = {key: i for i, key in enumerate(order)}
        self.settles = settles or {}
        self.resolved: set[str] = set()  # keys that finished (or were skipped): nothing more comes
        self.shown: set[str] = set()  # keys whose answer (or verdict) has been shown, or never will be
        self.frontier = 0  # every key ranked below it is shown
        self.stop_rank: int | None = None  # a guard tripped here: nothing ranked after it is shown live
        self.verdicts: set[str] = set()  # guards whose verdict has been shown
        self.held_answers: dict[str, Any] = {}  # SlotCompleted events waiting for the answers above them
        self.streams: dict[str, str] = {}  # slot → text streamed so far, while it streams
        self.rates: dict[str, tuple[float, int]] = {}  # slot → (when it started streaming, pieces so far)
        self.running: dict[str, list[str]] = {}  # slot → tools it is running now
        self.answers = 0
        self.started = time.perf_counter()
        self.owner: str | None = None  # plain mode: the slot whose tokens are being written
        self.held: list[str] = []  # plain mode: lines that wait for the owner's line to end
        self.midline = False
        self._live: Any = None
        self._spinners: dict[str, Spinner] = {}  # kept, so they animate
        self.attached: set[str] = set()  # images and files already named as sent

    # -- lifecycle -------------------------------------------------------------
    def __enter__(self) -> RunDisplay:
        if self.live_mode:
            from rich.console import Console
            from rich.live import Live

            assert isinstance(self.console, Console)  # a PlainConsole is never a terminal
            self._live = Live(self, console=self.console, refresh_per_second=12, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.owner is not None:  # the run ended mid-answer (an error)
            self.streams.clear()
            self._finish_owner()

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """The live region steps aside while a person is asked something (SPEC §12)."""
        live = self._live
        if live is not None:
            live.stop()
        try:
            yield
        finally:
            if live is not None and self._live is live:
                live.start()

    def __rich__(self) -> RenderableType:
        """The live region; called from rich's refresh thread, so it reads snapshots."""
        from rich.console import Group
        from rich.text import Text

        streams = dict(list(self.streams.items()))
        running = dict(list(self.running.items()))
        parts: list[RenderableType] = []
        rates = dict(list(self.rates.items()))
        now = time.perf_counter()
        for slot in sorted(set(streams) | set(running)):
            title = Text(slot, style="bold cyan")
            if slot in rates:  # a runaway shows: many tokens, still going
                title.append(f" · {token_rate(*rates[slot], now)}", style="dim")
            parts.append(self._spinner(slot, title))
            lines = visible(streams.get(slot, "")).splitlines()[-TAIL_LINES:]
            if lines:
                parts.append(Text("\n".join("  " + line for line in lines)))
            for label in list(running.get(slot, [])):
                parts.append(Text(f"  ⚙ {label} …", style="yellow"))
        elapsed = time.perf_counter() - self.started
        status = Text(f"running · {counted(self.answers, 'answer')} · {elapsed:.1f} s", style="dim")
        parts.append(self._spinner("", status))
        return Group(*parts)

    def _spinner(self, key: str, label: Text) -> Spinner:
        spinner = self._spinners.get(key)
        if spinner is None:
            from rich.spinner import Spinner

            spinner = self._spinners[key] = Spinner("dots", label)
        spinner.update(text=label)
        return spinner

    # -- events ----------------------------------------------------------------
    def handle(self, event: Any) -> None:
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event)

    def _on_slot_stream_start(self, event: Any) -> None:
        self.streams[event.slot] = ""
        self.rates[event.slot] = (time.perf_counter(), 0)

    def _on_token_delta(self, event: Any) -> None:
        self.streams[event.slot] = event.accumulated
        started, pieces = self.rates.get(event.slot, (time.perf_counter(), 0))
        self.rates[event.slot] = (started, pieces + 1)
        if self.live_mode:
            return
        if self.owner is None:
            self.owner = event.slot
            self._write(f"{event.slot}: {event.accumulated}")
        elif self.owner == event.slot:
            self._write(event.delta)

    def _on_slot_partial(self, event: Any) -> None:
        """SPEC §26: a typed answer so far, redrawn in place in the live region (plain
        output, which cannot redraw, shows only the final answer)."""
        self.streams[event.slot] = partial_text(event.value, event.complete_fields)

    def _on_tool_started(self, event: Any) -> None:
        self.running.setdefault(event.slot, []).append(call_label(event.tool_name, event.arguments))

    def _on_tool_completed(self, event: Any) -> None:
        label = call_label(event.tool_name, event.arguments)
        running = self.running.get(event.slot, [])
        if label in running:
            running.remove(label)
        line = Line(f"[{event.slot}] tool {label} → ", style="yellow")
        if event.ok:
            line.append(short(event.output, OUTPUT_WIDTH))
        else:
            line.append(f"error: {visible(str(event.error))}", style="red")
        source = getattr(event, "source", None)  # SPEC §29: it did not run
        if source is not None:
            line.append(f" ({source})", style="dim")
        else:
            line.append(" (cached)" if event.was_cached else f" ({event.elapsed_ms:.0f} ms)", style="dim")
        self._line(line)

    def _on_slot_completed(self, event: Any) -> None:
        slot = event.slot
        for line in attachment_lines(slot, event.result.messages, self.attached):  # images and files sent
            self._line(Line(visible(line), style="dim"))
        self.streams.pop(slot, None)
        self.rates.pop(slot, None)
        self.running.pop(slot, None)
        self.resolved.add(slot)
        for earlier in self.settles.get(slot, ()):
            self.resolved.add(earlier)
            if earlier not in self.held_answers:
                self.shown.add(earlier)  # finished and shown, or skipped: nothing to wait for
        if event.result.type == "halt":
            self.answers += 1
            self.verdicts.add(slot)
            self.shown.add(slot)
            self._line(self._verdict(slot, event.result.output))
            if self._tripped(slot, event.result.output):
                # an answer beside a guard that trips is never shown (SPEC §4)
                self.stop_rank = min(self.stop_rank or len(self.order), self.rank.get(slot, len(self.order)))
            self._release()
            return
        if self.owner == slot:  # its tokens are on the screen already
            self.answers += 1
            self.shown.add(slot)
            self._finish_owner()
            self._truncation_note(event)
            self._release()
            return
        if slot not in self.rank:
            self.answers += 1
            self.shown.add(slot)
            self._show_answer(event)
            return
        self.held_answers[slot] = event
        self._release()

    def _tripped(self, slot: str, output: Any) -> bool:
        verdict = output if isinstance(output, Mapping) else {}
        return bool(verdict.get("triggered")) == self.guards.get(slot, True)

    def _release(self) -> None:
        """Show the held answers whose turn has come, in template order."""
        order, stop = self.order, self.stop_rank if self.stop_rank is not None else len(self.order)
        while self.frontier < min(len(order), stop):
            key = order[self.frontier]
            if key in self.held_answers:
                self.answers += 1
                self.shown.add(key)
                self._show_answer(self.held_answers.pop(key))
            elif key not in self.shown:
                return  # still running (or not reached yet)
            self.frontier += 1

    def _show_answer(self, event: Any) -> None:
        slot = event.slot
        value = answer_text(event.result.output)
        if self.live_mode:
            from rich.console import Group
            from rich.text import Text

            head = Text(slot, style="bold cyan")
            head.append(f"  {event.result.type} · {event.elapsed_ms / 1000:.2f} s", style="dim")
            if event.was_cached:
                head.append(" · cached", style="dim")
            if getattr(event, "truncated", False):
                head.append(" · truncated", style="yellow")
            if confidence_note(event.result):
                head.append(f" · {confidence_note(event.result)}", style="dim")
            body = Text("\n".join("  " + line for line in (value.splitlines() or [""])))
            self._line(Group(head, body))
        else:  # (a slot that streamed while another one was writing shows up here, whole)
            self._line(Line(f"{slot}: {value}"))
            if confidence_note(event.result):
                self._line(Line(f"{slot}: {confidence_note(event.result)}", style="dim"))
            self._truncation_note(event)

    def _on_slot_retry(self, event: Any) -> None:
        """SPEC §14: a transient provider failure, sent again after a wait."""
        line = Line(f"{event.slot}: retry {event.attempt} in {event.delay_s:.1f} s", style="yellow")
        line.append(f" — {visible(str(event.error))}", style="dim")
        self._line(line)

    def _on_slot_fallback(self, event: Any) -> None:
        """SPEC §14: the slot starts again on its next model."""
        line = Line(
            f"{event.slot}: falling back from {visible(event.from_model)} to {visible(event.to_model)}", style="yellow"
        )
        line.append(f" — {visible(str(event.reason))}", style="dim")
        self._line(line)

    def _truncation_note(self, event: Any) -> None:
        if getattr(event, "truncated", False):
            self._line(Line(f"{event.slot}: cut off at its limit (raise max_tokens= or --max-tokens; "
                            "max_seconds= or --max-seconds)", style="yellow"))  # fmt: skip

    def _on_approval_requested(self, event: Any) -> None:
        label = call_label(event.tool_name, event.arguments)
        self._line(Line(f"[{event.slot}] {event.request_id}: {label} needs approval", style="yellow"))

    def _on_approval_decided(self, event: Any) -> None:
        line = Line(f"[{event.slot}] {event.request_id}: ", style="yellow")
        if event.approved:
            line.append("allowed", style="green")
        else:
            line.append(f"denied ({visible(str(event.message))})", style="red")
        self._line(line)

    def _on_slot_retracted(self, event: Any) -> None:
        self.streams.pop(event.slot, None)
        if self.owner == event.slot:
            self._finish_owner()
        style = "yellow" if event.reason in ("retry", "fallback") else "red"  # SPEC §14: the slot starts again
        self._line(Line(f"{event.slot}: retracted ({visible(str(event.reason))})", style=style))

    def _verdict(self, slot: str, output: Any) -> Line:
        verdict = output if isinstance(output, Mapping) else {}
        tripped = self._tripped(slot, output)
        reason = visible(str(verdict.get("reason") or ""))
        line = Line(f"guard {slot}: ")
        line.append("TRIPPED" if tripped else "passed", style="bold red" if tripped else "green")
        if reason:
            line.append(f" — {reason}")
        return line

    # -- output ----------------------------------------------------------------
    def summary(self, result: Any, elapsed_s: float) -> None:
        # answers still held (something above them never ran): shown, in template order,
        # if the run delivered them
        for key in sorted(self.held_answers, key=lambda k: self.rank.get(k, len(self.order))):
            if key in result.results:
                self.answers += 1
                self._show_answer(self.held_answers[key])
        self.held_answers = {}
        stats = stats_line(result, elapsed_s)
        if result.halted is not None:
            line = Line(f"halted by guard {result.halted.slot!r}", style="bold red")
            if result.halted.reason:
                line.append(f": {visible(str(result.halted.reason))}")
            self._line(line)
            self._line(Line(stats, style="dim"))
        elif getattr(result, "paused", None) is not None:
            count = len(result.paused.requests)
            waits = "call awaits" if count == 1 else "calls await"
            self._line(Line(f"paused: {count} {waits} approval · {stats}", style="yellow"))
        else:
            self._line(Line(f"done · {stats}", style="dim"))
        reruns = getattr(result, "reruns", None)
        if reruns is not None:  # SPEC §25: a re-run with a journal
            self._line(Line(reruns.summary(), style="dim"))
            for key in reruns.rerun:
                new = short(answer_text(result[key]), OUTPUT_WIDTH // 2) if key in result.results else "-"
                old = short(answer_text(reruns.previous[key]), OUTPUT_WIDTH // 2) if key in reruns.previous else "(new)"
                self._line(Line(f"  {visible(key)}: {old} → {new}", style="dim"))

    def _finish_owner(self) -> None:
        self._end_line()
        self.owner = None
        held, self.held = self.held, []
        for line in held:
            self._write(line)
        waiting = next(iter(self.streams), None)  # another slot already streaming takes over
        if waiting is not None:
            self.owner = waiting
            self._write(f"{waiting}: {self.streams[waiting]}")

    def _line(self, renderable: Any) -> None:
        if self.live_mode:
            self.console.print(as_rich(renderable))
            return
        plain = renderable.plain if isinstance(renderable, Line) else str(renderable)
        if self.owner is not None:  # never cut into a line of streaming tokens
            self.held.append(plain + "\n")
        else:
            self._write(plain + "\n")

    def _end_line(self) -> None:
        if self.midline:
            self._write("\n")

    def _write(self, text: str) -> None:
        if not text:
            return
        self.console.file.write(visible(text))
        self.console.file.flush()
        self.midline = not text.endswith("\n")


def answer_order(program: Any) -> dict[str, frozenset[str]]:
    """For each answer key, the earlier keys its completion settles: those before it in
    its own segment (slots of a segment run one after another, so they finished or were
    skipped), except the other members of its `<together>` block and guards (which run
    beside the slots after them and settle only with their own verdict)."""
    from ..syntax.nodes import Action, If, Slot, Together, walk

    settles: dict[str, frozenset[str]] = {}
    for segment in program.segments:
        seen: list[str] = []

        def visit(nodes: Sequence[Any], seen: list[str] = seen) -> None:
            for node in nodes:
                if isinstance(node, Together):
                    members = [n.key for n in walk(node.body) if isinstance(n, (Slot, Action)) and n.key is not None]
                    before = frozenset(seen)
                    settles.update({key: before for key in members})
                    seen.extend(k for k in members if not _is_guard(program, k))
                elif isinstance(node, If):
                    for branch in node.branches:
                        visit(branch.body)
                elif isinstance(node, (Slot, Action)) and node.key is not None:
                    settles[node.key] = frozenset(seen)
                    if not _is_guard(program, node.key):
                        seen.append(node.key)

        visit(segment.nodes)
    return settles


def _is_guard(program: Any, key: str) -> bool:
    return key in program.guards


def confidence_note(result: Any) -> str:
    """SPEC §27: `confidence 0.72`, or for an answer that escalated `confidence 0.62, below
    min_confidence: answered by gpt-4o` (the confidence is the first model's; the answer is
    the escalation model's). Empty for a slot without confidence=."""
    confidence = getattr(result, "confidence", None)
    if confidence is None:
        return ""
    escalated = getattr(result, "escalated_to", None)
    note = f", below min_confidence: answered by {visible(escalated)}" if escalated else ""
    return f"confidence {confidence:.2f}{note}"

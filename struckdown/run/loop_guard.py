"""Repetition in a free-text answer, seen as it streams (SPEC §34): pure, no pydantic-ai.

Small models loop: the same line, phrase or paragraph again and again until the output
cap. `LoopDetector.feed(delta)` reads the answer piece by piece and returns a `Loop` as
soon as the text has repeated itself for long enough to be sure, early enough that the
request can be stopped within 256 tokens of the loop's start. Two tests, both on word
tokens (a run of letters/digits of at most 32 characters, or one punctuation mark;
whitespace is not a token, case is ignored):

* **Exact repetition.** The tail of the token sequence repeats with a period `p` (the same
  line, n-gram or paragraph running): a loop once `need(p)` tokens in a row equal the
  token `p` before them: three copies of a short unit, and at least `MIN_SPAN` tokens,
  at most `LONG_SPAN` for a long unit (one paragraph said twice). A unit without a word
  of two letters (`}`, `0,`, `| --- |`) needs `NO_WORDS_SPAN` tokens: code and tables
  repeat such pieces on purpose.
* **Near repetition.** The answer is cut into units (lines and sentences); a unit of at
  least `MIN_UNIT_WORDS` words whose word trigrams were mostly written before
  in one earlier unit (`NEAR_SHARE` of them) is a near copy of it. `NEAR_UNITS` near
  copies running, each of the unit after the one the previous copy copied (or of one the
  run copied already: the loop's next round), together at
  least `NEAR_SPAN` words, are a loop: a paragraph said again with small changes. Inside
  a fenced code block only the exact test applies.

The loop starts where the repetition does: the text before it keeps the first copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: The period the exact test looks for, in tokens (a paragraph of about 200 words).
MAX_PERIOD = 256
#: Copies of a short unit that make a loop (the same line three times running).
COPIES = 3
#: Tokens in a row equal to the token one period before: at least this many …
MIN_SPAN = 24
#: … and at most this many for a long unit (a paragraph said twice, word for word).
LONG_SPAN = 128
#: The same for a unit with no word of two letters (code's `}`, a table's `| --- |`).
NO_WORDS_SPAN = 160
#: A unit (line or sentence) of at least this many words takes part in the near test …
MIN_UNIT_WORDS = 4
#: … and is a near copy when this share of its word trigrams came before.
NEAR_SHARE = 0.6
#: How many units back a near copy's original may be.
NEAR_WINDOW = 64
#: Near copies running that make a loop, and the words they hold together at least.
NEAR_UNITS = 4
NEAR_SPAN = 48
#: A unit ends at a line break, a sentence's end, or after this many tokens.
MAX_UNIT_TOKENS = 48

_TOKEN = re.compile(r"[^\W_]+|[^\w\s]|_+")
_SENTENCE_END = frozenset(".!?")


@dataclass(frozen=True)
class Loop:
    """A repetition found: `start` is the offset in the text where it begins (the text
    before it is what the answer keeps), `kind` "exact" or "near", `unit` the repeated text
    (its first copy, at most 80 characters) and `tokens` how many tokens the loop had run."""

    start: int
    kind: str
    unit: str
    tokens: int

    def describe(self) -> str:
        unit = " ".join(self.unit.split())
        return f"{'repeated' if self.kind == 'exact' else 'repeated with small changes'}: {unit!r}"


@dataclass
class _Unit:
    start: int  # offset of its first token
    words: list[str] = field(default_factory=list)
    tokens: int = 0


class LoopDetector:
    """Reads a text as it arrives (`feed`), or whole (`find_loop`); `reset` starts over."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.text = ""
        self._scan = 0  # text[_scan:] is not tokenised yet (a word may still grow)
        self._tokens: list[str] = []
        self._starts: list[int] = []
        self._runs: dict[int, int] = {}  # period -> tokens in a row equal to the one a period back
        self._last_at: dict[str, list[int]] = {}  # token -> its indexes (the recent ones)
        self._unit = _Unit(0)
        self._units: list[set[tuple[str, str, str]]] = []  # the word trigrams of each finished unit
        self._near_source = self._near_first = -1  # the units the last near copy and the first copied
        self._fences, self._fence_scan = 0, 0  # ``` seen before _fence_scan
        self._near_units = 0
        self._near_words = 0
        self._near_start = 0
        self.loop: Loop | None = None

    def feed(self, delta: str) -> Loop | None:
        """Add a piece of the answer; the loop, once there is one (and from then on)."""
        if self.loop is not None or not delta:
            return self.loop
        self.text += delta
        return self._read(final=False)

    def finish(self) -> Loop | None:
        """The answer is complete: its last word counts too."""
        if self.loop is None:
            self._read(final=True)
        return self.loop

    def _read(self, *, final: bool) -> Loop | None:
        text = self.text
        for match in _TOKEN.finditer(text, self._scan):
            if not final and match.end() == len(text) and match.group()[0].isalnum():
                break  # the word may go on in the next piece
            loop = None
            if "\n" in text[self._scan : match.start()]:  # a line ends: so does the unit
                loop = self._end_unit(match.start())
            self._scan = match.end()
            loop = loop or self._token(match.group().lower(), match.start())
            if loop is not None:
                self.loop = loop
                return loop
        return None

    def _token(self, token: str, start: int) -> Loop | None:
        index = len(self._tokens)
        self._tokens.append(token)
        self._starts.append(start)
        runs: dict[int, int] = {}
        earlier = self._last_at.setdefault(token, [])
        for at in reversed(earlier):
            period = index - at
            if period > MAX_PERIOD:
                break
            runs[period] = self._runs.get(period, 0) + 1
        earlier.append(index)
        if len(earlier) > 64:
            del earlier[:-64]
        self._runs = runs
        for period, run in runs.items():
            if run >= MIN_SPAN and run >= self._need(period, index):
                first = index - run + 1  # the first token that repeats the one a period back
                unit_start = self._starts[first - period]
                end = self._starts[first]
                return Loop(end, "exact", self.text[unit_start:end][:80], run)
        return self._near(token, start)

    def _need(self, period: int, index: int) -> int:
        need = max(MIN_SPAN, min(period * (COPIES - 1), LONG_SPAN))
        unit = self._tokens[index - period + 1 : index + 1]
        if not any(len(t) >= 2 and t[0].isalpha() for t in unit):
            need = max(need, NO_WORDS_SPAN)
        return need

    # -- near copies: units whose trigrams were mostly written before ------------------
    def _near(self, token: str, start: int) -> Loop | None:
        unit = self._unit
        if not unit.tokens:
            unit.start = start
        unit.tokens += 1
        if token[0].isalnum():
            unit.words.append(token)
        if token in _SENTENCE_END or unit.tokens >= MAX_UNIT_TOKENS:
            return self._end_unit(self._scan)
        return None

    def _in_code(self, at: int) -> bool:
        """Whether `at` is inside a fenced code block (code repeats its lines on purpose)."""
        self._fences += self.text.count("```", self._fence_scan, at)
        self._fence_scan = max(self._fence_scan, at)
        return self._fences % 2 == 1

    def _end_unit(self, next_start: int) -> Loop | None:
        unit, self._unit = self._unit, _Unit(next_start)
        words = unit.words
        if len(words) < MIN_UNIT_WORDS or self._in_code(unit.start):
            return None  # too short to tell (or code): neither a copy nor a break in the copies
        grams = set(zip(words, words[1:], words[2:]))
        index = len(self._units)
        source, share = -1, 0.0
        for earlier in range(index - 1, max(-1, index - 1 - NEAR_WINDOW), -1):
            got = len(grams & self._units[earlier]) / len(grams)
            if got > share:
                source, share = earlier, got
        self._units.append(grams)
        # a copy follows the text it copies in order: each near copy copies the unit after the
        # one the copy before it copied, or goes back to a unit the copies copied already (the
        # next round of the loop); code reusing lines from all over is no loop
        last, first = self._near_source, self._near_first
        in_order = not self._near_units or 0 < source - last <= 2 or first <= source <= last
        self._near_source = source
        if share < NEAR_SHARE or not in_order:
            self._near_units = self._near_words = 0
            if share < NEAR_SHARE:
                return None
        if not self._near_units:
            self._near_start, self._near_first = unit.start, source
        self._near_units += 1
        self._near_words += len(words)
        if self._near_units >= NEAR_UNITS and self._near_words >= NEAR_SPAN:
            start = self._near_start
            return Loop(start, "near", self.text[start:][:80], self._near_words)
        return None


def find_loop(text: str) -> Loop | None:
    """The loop in a whole answer (a response that arrived unstreamed), or None."""
    detector = LoopDetector()
    return detector.feed(text) or detector.finish()


def kept_text(text: str, loop: Loop) -> str:
    """The answer before its loop, without the spaces that led into it."""
    return text[: loop.start].rstrip()

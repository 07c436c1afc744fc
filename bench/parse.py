"""(f) Parse throughput of the uncached parser, and a 1,000-slot template's parse time.

"Uncached" means every cache a parse would hit is cleared before each trial
(`Environment.clear_caches()`: the Program cache and the Renderer's Jinja compile and
name caches), so each trial does the whole syntax → check → plan work, including the
sandboxed Jinja checks of every text node. Built output types stay cached, as for a
real user.

Runnable alone: `python -m bench.parse [--quick]`.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Row, best, ms, print_table

TARGET_MB_S = 1.0
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

_WORDS = (
    "the customer wrote about a delayed parcel and asked whether the refund covers shipping "
    "costs our policy says returns within thirty days are free unless the item was damaged "
    "by misuse please summarise the message classify its tone and draft a short polite reply"
).split()


def _sentence(rng: random.Random, variables: bool = True) -> str:
    words = rng.sample(_WORDS, rng.randint(8, 18))
    if variables and rng.random() < 0.5:
        words.insert(rng.randrange(len(words)), "{{ " + rng.choice(["name", "order.id", "city", "items | length"]) + " }}")
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(2, 6)))


def _slot(rng: random.Random, key: str) -> str:
    kinds = [
        f"[[{key}]]",
        f"[[{key}|temperature=0.2, max_tokens=200]]",
        f"[[int:{key}|min=0, max=100]]",
        f"[[number:{key}|min=0.5]]",
        f"[[pick:{key}|refund, replace, escalate]]",
        f"[[pick:{key}|{{{{ choices }}}}]]",
        f"[[bool:{key}]]",
        f"[[!date:{key}]]",
        f"[[json:{key}]]",
        f"[[score:{key}|low, medium, high]]",
        f"[[think:{key}|max_length=500]]",
        f'[[extract:{key}|pattern="^[A-Z]+-[0-9]+$"]]',
        f"[[{key}{{3}}]]",
        f"[[int*:{key}]]",
        f"[[halt:{key}]]",
    ]
    return rng.choice(kinds)


def generated_template(size: int, seed: int = 0) -> str:
    """A realistic template of about `size` bytes: markdown paragraphs with `{{ vars }}`,
    slots of every type with options, `<system>` blocks, `{% if %}` around slots, text
    `{% for %}` loops, comments and checkpoints. Slot keys are unique."""
    rng = random.Random(seed)
    parts: list[str] = ["<system>\nYou are a careful support assistant.\n</system>\n\n"]
    total, n = len(parts[0]), 0

    def add(text: str) -> None:
        nonlocal total
        parts.append(text)
        total += len(text)

    while total < size:
        n += 1
        add(f"## Section {n}\n\n{_paragraph(rng)}\n\n")
        roll = rng.random()
        if roll < 0.08:
            add(f"<system local>\n{_sentence(rng, variables=False)}\n</system>\n\n")
        elif roll < 0.12:
            add(f"<!-- reviewer note {n}: {_sentence(rng, variables=False)} -->\n")
        elif roll < 0.16:
            add("{% for item in items %}- {{ item.name }}: {{ item.price }}\n{% endfor %}\n")
        if rng.random() < 0.2:
            add(
                f"{{% if tier == 'gold' %}}{_sentence(rng)} {_slot(rng, f'gold_{n}')}\n"
                f"{{% else %}}{_sentence(rng)} {_slot(rng, f'std_{n}')}\n{{% endif %}}\n\n"
            )
        add(f"{_sentence(rng)} {_slot(rng, f'answer_{n}')}\n\n")
        if n % 40 == 0:
            add(f"<checkpoint>Part {n // 40}</checkpoint>\n\n")
    return "".join(parts)


def many_slots_template(count: int = 1000) -> str:
    rng = random.Random(1)
    return "\n".join(f"Q{i}: {_sentence(rng)} {_slot(rng, f'k{i}')}" for i in range(count)) + "\n"


_ENV: Any = None


def uncached_parse(text: str, template_path: Path | None = None) -> float:
    """Seconds to parse, check and plan `text` with the Program and Jinja caches cleared
    first (the clearing itself is not timed). Built output types stay cached, as they
    do for a real user: they change only when types are registered. The grammar itself
    (`syntax.parser._lark`) stays loaded: building it is start-up, not parsing."""
    global _ENV
    import struckdown as sd

    if _ENV is None:
        _ENV = sd.Environment()
    _ENV.clear_caches()
    started = time.perf_counter()
    _ENV.parse(text, template_path=template_path)
    return time.perf_counter() - started


def time_best(fn: Callable[[], float], repeats: int) -> float:
    """Best of `repeats` runs of `fn`, which returns the seconds it measured."""
    return best([fn() for _ in range(repeats)])


def _throughput_row(case: str, text: str, repeats: int) -> Row:
    uncached_parse(text)  # warm-up: grammar load, imports
    seconds = time_best(lambda: uncached_parse(text), repeats)
    rate = len(text.encode()) / seconds / 1e6
    return Row(
        case=case,
        measured=f"{rate * 1000:,.0f} KB/s ({len(text.encode()) / 1000:,.0f} KB in {ms(seconds)})",
        floor=f"{TARGET_MB_S * 1000:,.0f} KB/s",
        ratio=rate / TARGET_MB_S,
        target=f">= {TARGET_MB_S:.0f} MB/s",
        passed=rate >= TARGET_MB_S,
    )


def rows(quick: bool = False) -> list[Row]:
    import struckdown

    repeats = 1 if quick else 5
    examples = sorted(EXAMPLES.glob("*.sd"))
    texts = [(p.read_text(encoding="utf-8"), p) for p in examples]

    def parse_all() -> float:
        return sum(uncached_parse(text, path) for text, path in texts)

    # The examples take milliseconds, so a slow spell of the (shared) machine can cover a
    # whole burst of trials: their trials come in three bursts, around the other cases.
    example_times: list[float] = []

    def example_burst() -> None:
        if texts:
            parse_all()  # warm-up
            example_times.append(time_best(parse_all, repeats))

    example_burst()
    big = generated_template(100_000 if quick else 1_000_000)
    big_row = _throughput_row(f"f. parse generated {len(big.encode()) / 1e6:.2f} MB template", big, repeats)
    example_burst()

    count = 300 if quick else 1000
    slots = many_slots_template(count)
    uncached_parse(slots)
    seconds = time_best(lambda: uncached_parse(slots), repeats * 3)
    budget = len(slots.encode()) / (TARGET_MB_S * 1e6)
    slots_row = Row(
        case=f"f. parse {count:,}-slot template (uncached)",
        measured=f"{ms(seconds)} ({len(slots.encode()) / 1000:,.0f} KB)",
        floor=f"{ms(budget)} at 1 MB/s",
        ratio=budget / seconds,  # = throughput in MB/s, as in the rows above
        target=f">= 1 MB/s (<= {ms(budget)})",
        passed=seconds <= budget,
    )
    example_burst()
    out: list[Row] = []
    if texts:
        size = sum(len(text.encode()) for text, _ in texts)
        rate = size / best(example_times) / 1e6
        out.append(
            Row(
                case=f"f. parse examples/*.sd ({len(examples)} files)",
                measured=f"{rate * 1000:,.0f} KB/s ({size / 1000:,.1f} KB)",
                floor=f"{TARGET_MB_S * 1000:,.0f} KB/s",
                ratio=rate / TARGET_MB_S,
                target=f">= {TARGET_MB_S:.0f} MB/s",
                passed=rate >= TARGET_MB_S,
                note=f"best of {3 * repeats} trials in 3 bursts; bursts' best: "
                + ", ".join(f"{size / t / 1e3:,.0f}" for t in example_times)
                + " KB/s",
            )
        )
    out += [big_row, slots_row]
    program = struckdown.parse(big)

    def cached_parse() -> float:
        started = time.perf_counter()
        struckdown.parse(big)
        return time.perf_counter() - started

    hit = time_best(cached_parse, 50)
    out.append(
        Row(
            case="f. struckdown.parse cache hit (big template)",
            measured=f"{hit * 1e6:,.1f} us",
            floor="-",
            ratio=None,
            target="info",
            passed=None,
            note="" if len(program.keys) else "no slots parsed",
        )
    )
    return out


async def run(quick: bool = False) -> list[Row]:
    return rows(quick)


def main() -> None:
    parser = argparse.ArgumentParser(description="struckdown parse throughput")
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    args = parser.parse_args()
    print_table(rows(args.quick), title="struckdown parse")


if __name__ == "__main__":
    main()

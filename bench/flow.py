"""(x) SPEC §33: the flow check costs nothing per row. `sd check --flow` of a 200-slot template
with labels (the lint: syntax → check → plan and its lints, every cache cleared; then the flow
walk and the refusals on the same Program) against `sd check` without; and a run's check of a
batch row once the Program has been walked (a memo lookup).

Runnable alone: `python -m bench.flow [--quick]`.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import struckdown as sd
from struckdown.environment import default_environment
from struckdown.flow import Sinks, check_flow, template_refusals
from struckdown.lint import check_source

from .common import Row, best, ms, print_table

TARGET = 1.2


def template(slots: int = 200, seed: int = 33) -> str:
    rng = random.Random(seed)
    parts = []
    for index in range(slots):
        reads = rng.sample(["name", "email", "city", "order", *(f"s{i}" for i in range(max(0, index - 3), index))], 2)
        kind = rng.choice(["", "pick:", "bool:", "int:", "think:"])
        options = "|a, b" if kind == "pick:" else ""
        parts.append(f"Given {{{{ {reads[0]} }}}} and {{{{ {reads[1]} }}}}, answer. [[{kind}s{index}{options}]]")
        if index % 25 == 24:
            parts.append("<checkpoint>")
    return "\n".join(parts)


def _time(text: str, labelled: bool, trials: int) -> float:
    """What `sd check` does for one template (the lint: parse, check, plan, its lints), and with
    `--flow --private email --untrusted order` the flow check of the same Program."""
    env, path = default_environment(), Path("bench.sd")
    times = []
    for _ in range(trials):
        env.clear_caches()
        started = time.perf_counter()
        found = check_source(text, path, None, tools_given=False)
        if labelled:
            program = env.parse(text, template_path=path)  # the lint's Program, from the cache
            refused = template_refusals(program, private=["email"], untrusted=["order"], model="test")
            assert refused == []  # the test model is local, no tools: the whole walk, no refusal
        times.append(time.perf_counter() - started)
        assert not [d for d in found if d.severity == "error"]
    return best(times)


async def run(quick: bool) -> list[Row]:
    text, trials = template(), 3 if quick else 9
    _time(text, True, 1)  # imports, built types
    pairs = [(_time(text, False, 1), _time(text, True, 1)) for _ in range(trials)]  # interleaved: the same load
    plain, labelled = best([p for p, _ in pairs]), best([f for _, f in pairs])
    env = sd.Environment()
    ratio = labelled / plain
    program = env.parse(text)
    labels = {"email": frozenset({"private"}), "order": frozenset({"untrusted"})}
    sinks = Sinks(tuple(("test", False) for _ in program.slots()), (), False)
    check_flow(program, labels, sinks)
    started = time.perf_counter()
    for _ in range(1000):  # what each row of a batch pays: its places built, the memo looked up
        check_flow(program, labels, Sinks(tuple(("test", False) for _ in program.slots()), (), False))
    per_row = (time.perf_counter() - started) / 1000
    return [
        Row("x. sd check of 200 slots with flow labels vs without", ms(labelled), ms(plain), ratio,
            f"<= {TARGET:.2f}x", ratio <= TARGET),
        Row("x. the flow check of a batch row, 200 slots (memoised)", f"{per_row * 1e6:.0f} µs", "-", None, "-", None,
            "the walk and the refusals are memoised on the Program per labels and places"),
    ]


if __name__ == "__main__":
    import asyncio

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    print_table(asyncio.run(run(parser.parse_args().quick)))

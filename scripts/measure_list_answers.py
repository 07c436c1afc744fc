"""Measure list answers on a real model (issue 40 item 23): how many have one element per item.

    .venv/bin/python scripts/measure_list_answers.py CORPUS_DIR [--runs 5] [--variant after]
        [--base-url http://127.0.0.1:8765/v1] [--json out.json]

CORPUS_DIR holds 0.x templates (`*.sd`); every file with a list slot (`{n}`, `{n,m}`, `*`)
runs `--runs` times (seeds `--first-seed`, +1, …) up to the end of the section of its last list slot
(the free-text slots after it are not lists and only cost time). Each list answer is judged:

* `ok`: as many items as the quantifier allows, and every item is one element: not empty, not
  a bare number or placeholder ("5", "...", "A", "houseplant1"), not several elements (no line break, no
  second list marker, not a copy of another item);
* otherwise the first rule it breaks (`count`, `empty`, `number`: a bare number or a
  placeholder, `schema`: the schema's own description echoed, `several`, `duplicate`), or
  `error` when the run raised.

`--variant before` sends the list schema without the description `list_description` adds (as
before issue 40 item 23); `count` with its first wording (how many items, one element each,
never the whole list in one item, never a number or placeholder); `after` is the shipped
schema, which also says the items differ from each other; `item` is `after` with each item
described as one element of the list instead of the type's own description ("The answer").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

CONTEXT = {
    "dataset_description": "Daily bike-share trips in one city for 2023: start and end station, trip length, "
    "weather and whether the rider is a member.",
    "item_type": "houseplant",
    "source": "Acme's spring catalogue, published 12 March 2024, adds the Breeze desk fan, the Glow reading lamp "
    "and the Nimbus humidifier; the Drift kettle is discontinued.",
}
ITEM_DESCRIPTION = "One element of the list: a single short item, not the whole list"
_LIST_SLOT = re.compile(r"\[\[[^\]|]*?(\{\d+(?:,\d*)?\}|\*|\+)\s*:\s*(\w+)")
_SECTION = re.compile(r"^(¡OBLIVIATE|<checkpoint>)", re.M)
_MARKER = re.compile(r"(?:^|\s)(?:\d+[.)]|[-*•])\s+\S")
# a bare number, an ellipsis, one letter, a word numbered in turn ("houseplant1", "item 3"), n/a
_PLACEHOLDER = re.compile(r"^(?:\d+|\.\.\.|…|[a-z]|[a-z]+\s*\d+|items?|n/?a|none|null)$", re.I)


def list_slots(source: str) -> list[str]:
    return [m.group(2) for m in _LIST_SLOT.finditer(source)]


def cut(source: str) -> str:
    """The template up to the end of the section of its last list slot."""
    last = list(_LIST_SLOT.finditer(source))[-1]
    after = _SECTION.search(source, last.end())
    return source if after is None else source[: after.start()]


def bounds(source: str, name: str) -> tuple[int, int | None]:
    match = re.search(r"(\{(\d+)(?:,(\d*))?\}|\*|\+)\s*:\s*" + re.escape(name) + r"\b", source)
    assert match
    if match.group(1) == "*":
        return 0, None
    if match.group(1) == "+":
        return 1, None
    low = int(match.group(2))
    if match.group(3) is None:
        return low, low
    return low, int(match.group(3)) if match.group(3) else None


def judge(answer: Any, low: int, high: int | None) -> str:
    if not isinstance(answer, list):
        return "count"
    items = [str(i).strip() for i in answer]
    if len(items) < max(low, 1) or (high is not None and len(items) > high):
        return "count"
    if any(not i for i in items):
        return "empty"
    if any(_PLACEHOLDER.match(i) for i in items):
        return "number"
    if any(i.lower().startswith("a json array") for i in items):  # the schema's description, echoed
        return "schema"
    if any("\n" in i or len(_MARKER.findall(i)) > 1 for i in items):
        return "several"
    if len({i.lower() for i in items}) < len(items):
        return "duplicate"
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--variant", choices=("before", "count", "after", "item"), default="after")
    parser.add_argument("--base-url", default="http://127.0.0.1:8765/v1")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import struckdown as sd
    from struckdown.models import openai_compatible
    from struckdown.types import build

    if args.variant == "before":
        build.list_description = lambda low, high: None  # type: ignore[assignment,return-value]
    elif args.variant == "count":  # the first wording (count and one element; repeats not named)
        shipped = build.list_description

        def count_only(low: int, high: int | None) -> str:
            return shipped(low, high).replace(" different from the others;", "")

        build.list_description = count_only  # type: ignore[assignment]
    elif args.variant == "item":  # a candidate: each item says it is one element, not "The answer"
        import dataclasses

        assemble = build._assemble

        def one_element(name: str, plan: Any, quantifier: Any, *rest: Any) -> Any:
            if quantifier is not None and plan.description is not None:
                plan = dataclasses.replace(plan, description=ITEM_DESCRIPTION)
            return assemble(name, plan, quantifier, *rest)

        build._assemble = one_element  # type: ignore[assignment]
    model = openai_compatible("qwen2.5-coder-0.5b-instruct", args.base_url, None)
    verdicts: Counter[str] = Counter()
    records: list[dict[str, Any]] = []
    files = sorted(p for p in args.corpus.glob("*.sd") if list_slots(p.read_text(encoding="utf-8")))
    for path in files:
        source = path.read_text(encoding="utf-8")
        template = cut(source)
        for seed in range(args.first_seed, args.first_seed + args.runs):
            started = time.perf_counter()
            try:
                result = sd.complete(template, CONTEXT, model=model, settings={"seed": seed, "max_tokens": 400},
                                     cache=False)
                answers = {name: result[name] for name in list_slots(template)}
                error = None
            except Exception as exc:  # noqa: BLE001 - a failed run is a verdict of its own
                answers, error = {name: None for name in list_slots(template)}, f"{type(exc).__name__}: {exc}"
            for name, answer in answers.items():
                verdict = "error" if error else judge(answer, *bounds(source, name))
                verdicts[verdict] += 1
                records.append({"file": path.name, "slot": name, "seed": seed, "verdict": verdict, "answer": answer,
                                "error": error})
                print(f"{path.name} {name} seed={seed} {verdict}: {json.dumps(answer)[:160]}"
                      f"{' ' + error[:160] if error else ''}", flush=True)
            print(f"  ({time.perf_counter() - started:.1f} s)", file=sys.stderr, flush=True)
            if args.json:  # after every run: a long measurement can be read while it goes on
                args.json.write_text(json.dumps({"variant": args.variant, "verdicts": verdicts, "records": records},
                                                indent=1, default=str), encoding="utf-8")
    total = sum(verdicts.values())
    print(f"{args.variant}: {verdicts['ok']}/{total} list answers with one element per item; "
          + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()) if k != "ok"))


if __name__ == "__main__":
    main()

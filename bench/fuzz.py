"""Parser fuzzing at large N: `python -m bench.fuzz --cases 100000 [--seed S]`.

Runs the generators and the oracle of tests/test_fuzz_parser.py (grammar-aware
templates, mutated realistic templates, and fuzzed files behind an `<include>`)
on a seeded `random.Random`, so any failure is reproducible from its case number:
`python -m bench.fuzz --seed S --only N` replays case N and prints its input.

Prints how many cases parsed, were rejected with a well-positioned
TemplateSyntaxError, and failed (another exception, a bad position, or ≥ 1 s of CPU);
exits 1 when any failed.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests" / "parse"
SUPPORT = TESTS.parent / "support"  # the fuzz module's helpers (depth.py)
KINDS = ("grammar", "mutation", "include")


def _fuzz_module() -> Any:
    for folder in (TESTS, SUPPORT):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    import test_fuzz_parser

    return test_fuzz_parser


def case_input(fz: Any, seed: int, index: int) -> tuple[str, str]:
    """(kind, text) of case `index`; the same seed and index give the same case."""
    rnd = random.Random(f"{seed}:{index}")
    kind = KINDS[0] if index % 10 < 5 else KINDS[1] if index % 10 < 9 else KINDS[2]
    text = fz.generate(rnd) if kind == "grammar" or (kind == "include" and rnd.random() < 0.5) else fz.mutant(rnd)
    return kind, text


def run_case(fz: Any, kind: str, text: str, root: Path) -> str:
    main = root / "main.sd"
    if kind != "include":
        return str(fz.check_template(text, template_path=main))
    (root / "fuzzed.sd").write_bytes(text.encode("utf-8", "surrogatepass"))
    return str(fz.check_template('Intro [[intro]]\n<include src="fuzzed.sd"/>\nOutro', template_path=main))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--only", type=int, default=None, help="replay one case and print its input")
    parser.add_argument("--show", type=int, default=10, help="failures to print in full")
    args = parser.parse_args(argv)

    fz = _fuzz_module()
    counts: collections.Counter[str] = collections.Counter()
    by_kind: dict[str, collections.Counter[str]] = {k: collections.Counter() for k in KINDS}
    failures: list[tuple[int, str, str, str]] = []
    slowest = (0.0, -1)  # wall time, for information (the oracle bounds CPU time)
    slowest_cpu = (0.0, -1)
    indices = [args.only] if args.only is not None else range(args.cases)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        fz.make_include_root(root)
        fz.check_template("warm up [[a]]", template_path=root / "main.sd")
        for n, index in enumerate(indices, 1):
            kind, text = case_input(fz, args.seed, index)
            if args.only is not None:
                print(f"case {index} ({kind}): {text!r}")
            case_started, cpu_started = time.perf_counter(), time.thread_time()
            try:
                outcome = run_case(fz, kind, text, root)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - every escape is a finding
                outcome = "failures"
                failures.append((index, kind, text, f"{type(exc).__name__}: {exc}"))
            slowest = max(slowest, (time.perf_counter() - case_started, index))
            slowest_cpu = max(slowest_cpu, (time.thread_time() - cpu_started, index))
            counts[outcome] += 1
            by_kind[kind][outcome] += 1
            if n % 10_000 == 0:
                rate = n / (time.perf_counter() - started)
                print(f"  {n} cases, {rate:.0f}/s: {dict(counts)}", file=sys.stderr, flush=True)
    total = time.perf_counter() - started
    print(f"seed {args.seed}: {sum(counts.values())} cases in {total:.1f} s")
    print(f"  parsed:   {counts['parsed']}")
    print(f"  rejected: {counts['rejected']}")
    print(f"  failures: {counts['failures']}")
    for kind, kind_counts in by_kind.items():
        if kind_counts:
            print(f"  {kind:9} " + ", ".join(f"{k} {v}" for k, v in sorted(kind_counts.items())))
    print(f"  slowest case: {slowest_cpu[0] * 1000:.1f} ms CPU (case {slowest_cpu[1]}), "
          f"{slowest[0] * 1000:.1f} ms wall (case {slowest[1]})")
    for index, kind, text, error in failures[: args.show]:
        print(f"\nFAILURE case {index} ({kind}): {error[:500]}\n  input: {text[:400]!r}")
    if failures:
        print(f"\nreplay one with: python -m bench.fuzz --seed {args.seed} --only N")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

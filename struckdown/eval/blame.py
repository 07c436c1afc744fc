"""`--blame` (SPEC §23): which slot's wrong answer breaks the slots after it.

For each failing run of a case with gold answers for more than one slot, each gold slot
whose own answer failed is given its gold answer in turn, and the slots it reaches run
again: the later slots of its conversation (they read it in their history) and, in turn,
the segments that read any of those answers. Every other slot, and every slot before it,
comes back from the run's own answers through the engine's resume machinery (the finished
slots of a paused run), so no request is paid twice and the cost of blame is only the
reached slots' requests. A later slot that then passes was broken by the substituted slot
("causes"); one that passed before and now fails only passed on the wrong answer
("only passes on").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import StruckdownError
from .cases import EvalCase, EvalSuite
from .expect import MISSING, check_answer
from .report import RUN_ASSERTIONS, EvalReport


@dataclass
class BlameReport:
    """Per substituted slot S and later slot L: `wrong[S][L]` failures of L seen in runs
    where S was wrong, `causes[S][L]` of them fixed by S's gold answer, `only_passes[S][L]`
    passes of L that failed with S's gold answer. `reruns`: the blame runs, `cost` theirs."""

    causes: dict[str, dict[str, int]] = field(default_factory=dict)
    only_passes: dict[str, dict[str, int]] = field(default_factory=dict)
    wrong: dict[str, dict[str, int]] = field(default_factory=dict)
    reruns: int = 0
    skipped: int = 0  # re-runs not started: the budget was spent
    failed: int = 0  # re-runs that raised (a model error, the budget crossed mid-run)
    requests: int = 0
    cost: float = 0.0

    def lines(self) -> list[str]:
        out: list[str] = []
        for slot in self.wrong:
            causes = sum(self.causes.get(slot, {}).values())
            passes = sum(self.only_passes.get(slot, {}).values())
            out.append(f"{slot}: causes {causes} failure{'s' * (causes != 1)} / only passes {passes} on")
            for later, seen in self.wrong[slot].items():
                if seen:
                    fixed = self.causes.get(slot, {}).get(later, 0)
                    out.append(f"  fixing `{slot}` fixes {fixed * 100 / seen:.0f} % of wrong `{later}` ({fixed}/{seen})")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "slots": {
                slot: {
                    "causes": sum(self.causes.get(slot, {}).values()),
                    "only_passes": sum(self.only_passes.get(slot, {}).values()),
                    "later": {
                        later: {"wrong": seen, "fixed": self.causes.get(slot, {}).get(later, 0),
                                "broken": self.only_passes.get(slot, {}).get(later, 0)}
                        for later, seen in self.wrong[slot].items()
                    },
                }
                for slot in self.wrong
            },
            "reruns": self.reruns, "skipped": self.skipped, "failed": self.failed, "requests": self.requests,
            "cost": round(self.cost, 8),
        }


def reached(program: Any, key: str) -> set[str]:
    """The answers that change when `key`'s does: the later slots of its segment, and the
    segments that read any changed answer (transitively)."""
    segment = program.segments[program.segment_of(key)]
    out = set(segment.keys[segment.keys.index(key) + 1:])
    changed = out | {key}
    grew = True
    while grew:
        grew = False
        for other in program.segments:
            if set(other.keys) <= changed:
                continue
            if (set(other.reads) | set(other.waits_for)) & changed:
                out |= set(other.keys) - {key}
                changed |= set(other.keys)
                grew = True
    return out


async def blame_failures(
    env: Any, program: Any, suite: EvalSuite, report: EvalReport, results: Mapping[tuple[str, str, int], Any],
    matrix: Sequence[Any], options: Mapping[str, Any], concurrency: int, budget: float | None = None,
) -> BlameReport:
    """Blame over every failing run; with `budget` (what is left of max_cost) no re-run starts
    once the re-runs have spent it (those not run are counted in `skipped`)."""
    import anyio

    blame = BlameReport()
    cases = {case.name: case for case in suite.cases}
    models = {target.label: target.model for target in matrix}
    order = {k: i for i, k in enumerate(program.keys)}
    work: list[tuple[EvalCase, str, Any, str]] = []
    for outcome in report.outcomes:
        case = cases[outcome.case]
        gold = {k: v for k, v in case.gold().items() if k in order}
        if outcome.passed or outcome.error is not None or len(gold) < 2:
            continue
        result = results[(outcome.case, outcome.model, outcome.repeat)]
        for slot in sorted(gold, key=order.__getitem__):
            later = [k for k in reached(program, slot) if k in case.expect and k not in RUN_ASSERTIONS]
            if outcome.assertions.get(slot) is None or not later:
                continue  # blame only a wrong answer, and only one that something checked reads
            for key in later:
                if outcome.assertions.get(key) is not None:
                    row = blame.wrong.setdefault(slot, {})
                    row[key] = row.get(key, 0) + 1
                else:
                    blame.wrong.setdefault(slot, {}).setdefault(key, 0)
            work.append((case, outcome.model, result, slot))
    limiter = anyio.CapacityLimiter(concurrency)

    async def rerun(case: EvalCase, model: str, result: Any, slot: str) -> None:
        async with limiter:
            left = None if budget is None else budget - blame.cost
            if left is not None and left <= 0:
                blame.skipped += 1
                return
            try:
                fresh = await _substituted(env, program, case, models[model], result, slot, options, left)
            except StruckdownError as exc:  # a budget, a model error: this re-run tells nothing
                partial = getattr(exc, "results", None)
                usage = getattr(partial, "usage", None)
                blame.requests += int(getattr(usage, "requests", 0) or 0)
                blame.cost += float(getattr(usage, "cost", 0.0) or 0.0)
                blame.failed += 1
                return
        blame.reruns += 1
        blame.requests += fresh.usage.requests
        blame.cost += float(fresh.usage.cost or 0.0)
        for key in reached(program, slot):
            if key not in case.expect or key in RUN_ASSERTIONS:
                continue
            before = check_answer(case.expect[key], result[key] if key in result.results else MISSING)
            after = check_answer(case.expect[key], fresh[key] if key in fresh.results else MISSING)
            if before is not None and after is None:
                row = blame.causes.setdefault(slot, {})
                row[key] = row.get(key, 0) + 1
            elif before is None and after is not None:
                row = blame.only_passes.setdefault(slot, {})
                row[key] = row.get(key, 0) + 1

    async with anyio.create_task_group() as tg:
        for item in work:
            tg.start_soon(rerun, *item)
    return blame


async def _substituted(
    env: Any, program: Any, case: EvalCase, model: Any, result: Any, slot: str, options: Mapping[str, Any],
    budget: float | None = None,
) -> Any:
    """The run again with `slot`'s gold answer in place: untouched slots restored, reached ones re-run."""
    from ..approval.state import ResumePoint, _slot_to_json
    from ..run import run_to_result

    changed = reached(program, slot)
    finished: dict[str, dict[str, Any]] = {}
    for key, slot_result in result.results.items():
        if key != slot and key not in changed:
            stored = _slot_to_json(slot_result)
            stored["usage"] = {}  # paid in the first run: not counted again
            finished[key] = stored
    original = result.results.get(slot)
    finished[slot] = {
        "key": slot, "type": original.type if original is not None else "", "output": case.gold()[slot], "usage": {},
    }
    point = ResumePoint(
        template=program.template.source if hasattr(program.template, "source") else "",
        template_path=options.get("template_path"), context=dict(case.context), finished=finished,
        actions={}, paused={}, decisions={},
    )
    run_options = {k: v for k, v in options.items() if k != "max_cost"}
    run_options["model"] = model
    if budget is not None:
        run_options["max_cost"] = budget
    async with env._mcp_sessions(program, run_options) as sessions:
        settings = env.run_settings(run_options, stream=False, mcp=sessions, resume=point)
        return await run_to_result(program, dict(case.context), settings)

"""(a) Per-slot overhead: 10 slots through struckdown vs the same conversation driven
by 10 sequential bare `pydantic_ai.Agent` runs, with an instant scripted model.

Both sides send the same requests: each slot's request holds earlier questions as user
turns and earlier answers as assistant turns, then this slot's question. The case
checks that, then times both, interleaved.

With an instant model the work is pure CPU, so the ratio is taken on the median
process CPU time per trial: unlike wall time it does not move when other processes
take the cores (on our shared 2-core machines wall times swing by 2x). The best wall
times are in the note.
"""

from __future__ import annotations

from typing import Any

from .common import Row, best, interleaved, median, ms, ratio_of, scripted_model, target_row, transcript

TARGET = 1.05  # SPEC §28 (issue 38): a slot <= 1.05x bare pydantic-ai
SLOTS = 10


def questions(kind: str) -> list[str]:
    if kind == "int":
        return [f"Question {i}: how many items are in box {i}?" for i in range(SLOTS)]
    return [f"Question {i}: describe item {i} in one word." for i in range(SLOTS)]


def template(kind: str) -> str:
    slot = "[[int:n{i}]]" if kind == "int" else "[[a{i}]]"
    return "\n".join(f"{q} {slot.format(i=i)}" for i, q in enumerate(questions(kind)))


def _spy(model: Any) -> tuple[Any, list[list[Any]]]:
    """Wrap the scripted model's function to keep the messages of every request."""
    seen: list[list[Any]] = []
    inner = model.function

    async def function(messages: list[Any], info: Any) -> Any:
        seen.append(list(messages))
        return await inner(messages, info)

    model.function = function
    return model, seen


async def bare_conversation(agent: Any, prompts: list[str], output_type: Any) -> list[Any]:
    """What a user of bare pydantic-ai writes to get the same conversation.
    `output_type=None` uses the agent's own output type (built once, with the agent)."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    history: list[Any] = []
    outputs = []
    for prompt in prompts:
        run = await agent.run(prompt, message_history=history or None, output_type=output_type)
        history.append(ModelRequest(parts=[UserPromptPart(prompt)]))
        history.append(ModelResponse(parts=[TextPart(str(run.output))]))
        outputs.append(run.output)
    return outputs


async def _check_same_conversation(kind: str, output_type: Any) -> str:
    from pydantic_ai import Agent

    import struckdown

    sd_model, sd_seen = _spy(scripted_model())
    bare_model, bare_seen = _spy(scripted_model())
    result = await struckdown.complete_async(template(kind), {}, model=sd_model)
    outputs = await bare_conversation(Agent(bare_model), questions(kind), output_type)
    if list(result.values()) != outputs:
        return f"outputs differ: struckdown {list(result.values())} vs bare {outputs}"
    if [transcript(m) for m in sd_seen] != [transcript(m) for m in bare_seen]:
        return "struckdown sent a different conversation than the bare pydantic-ai runs"
    return ""


async def measure(kind: str, repeats: int) -> list[Row]:
    from pydantic_ai import Agent

    import struckdown

    output_type: Any = int if kind == "int" else str
    problem = await _check_same_conversation(kind, output_type)
    program = struckdown.parse(template(kind))
    sd_model = scripted_model()
    agent = Agent(scripted_model())
    fixed_agent = Agent(scripted_model(), output_type=output_type)
    prompts = questions(kind)

    async def run_struckdown() -> None:
        await struckdown.complete_async(program, {}, model=sd_model)

    async def run_bare() -> None:
        await bare_conversation(agent, prompts, output_type)

    async def run_fixed() -> None:
        await bare_conversation(fixed_agent, prompts, None)

    cpu: dict[str, list[float]] = {}
    wall = await interleaved(
        {"struckdown": run_struckdown, "bare": run_bare, "fixed": run_fixed}, repeats=repeats, warmup=3, cpu=cpu
    )
    sd, bare, fixed = median(cpu["struckdown"]), median(cpu["bare"]), median(cpu["fixed"])
    ratio = ratio_of(sd, bare)
    label = "typed int" if kind == "int" else "free-text"
    name = "int" if kind == "int" else "str"
    medians = (
        f"CPU medians of {repeats}; best wall {ms(best(wall['struckdown']))} vs {ms(best(wall['bare']))} "
        f"({best(wall['struckdown']) / best(wall['bare']):.2f}x)"
    )
    return [
        target_row(
            f"a. per-slot overhead, {SLOTS} {label} slots",
            f"{ms(sd)} CPU ({sd / SLOTS * 1000:.2f} ms/slot)",
            f"{ms(bare)} bare pydantic-ai",
            ratio,
            TARGET,
            problem=problem,
            note=medians,
        ),
        Row(
            case=f"a. same, vs Agent(output_type={name}) built once",
            measured=f"{ms(sd)} CPU",
            floor=f"{ms(fixed)} bare, no per-run output_type",
            ratio=ratio_of(sd, fixed),
            target="info (tighter floor)",
            passed=None,
        ),
    ]


async def run(quick: bool = False) -> list[Row]:
    repeats = 6 if quick else 40
    return [*await measure("text", repeats), *await measure("int", repeats)]

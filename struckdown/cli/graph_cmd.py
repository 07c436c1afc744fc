"""`sd graph`: the segments of a template and what each waits for, as a Mermaid flowchart.

Read from the plan (`Program.segments`: each segment's answers and the earlier
answers it `waits_for`), so the picture is what the engine does: segments joined by
no arrow run at the same time, and an arrow is labelled with the answers it carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .errors import EXIT_OK, reporting_errors
from .options import IncludeOpt, TemplateArg


def _label(text: str) -> str:
    """Text safe inside a Mermaid `["…"]` label."""
    return text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def mermaid(program: Any) -> str:
    """The flowchart: one node per segment (its name, its slots and actions, its guards),
    one arrow per segment that waits for answers of another."""
    slots = {slot.key: slot for slot in program.slots()}
    lines = ["flowchart TD"]
    for segment in program.segments:
        title = f"segment {segment.index}" + (f": {segment.name}" if segment.name else "")
        parts = []
        for key in segment.keys:
            slot = slots.get(key)
            if slot is None:
                parts.append(f"@{key}")
            elif slot.is_guard:
                parts.append(f"halt:{key}")
            else:
                parts.append(key if slot.type_name == "respond" else f"{slot.type_name}:{key}")
        body = "<br/>".join(_label(p) for p in parts) or "(no answers)"
        lines.append(f'    s{segment.index}["<b>{_label(title)}</b><br/>{body}"]')
    arrows: dict[tuple[int, int], list[str]] = {}
    for segment in program.segments:
        for key in segment.waits_for:
            arrows.setdefault((program.segment_of(key), segment.index), []).append(key)
    for (source, target), keys in sorted(arrows.items()):
        lines.append(f'    s{source} -->|"{_label(", ".join(keys))}"| s{target}')
    return "\n".join(lines) + "\n"


def graph_command(template: Path, output: Path | None, include_paths: Sequence[Path]) -> int:
    from .io import write_output
    from .loading import load_program

    text = mermaid(load_program(template, include_paths))
    write_output(output, text)
    return EXIT_OK


def command(
    template: TemplateArg,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Write the Mermaid text here (default: stdout).",
                                     show_default=False)
    ] = None,
    include_path: IncludeOpt = None,
) -> None:
    """Print a Mermaid flowchart of the template's segments and the answers they wait for."""
    with reporting_errors():
        code = graph_command(template, output, include_path or ())
    raise typer.Exit(code)

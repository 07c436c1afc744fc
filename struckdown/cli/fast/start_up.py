"""The cyclic garbage collector waits while `sd run` starts up (SPEC §28).

Starting `sd run` imports some 900 modules (pydantic-ai's among them) and builds their
classes, schemas and tables: objects that live as long as the process. The collector,
counting allocations, walks them again and again while they are made and finds almost
nothing to free: a tenth of the command's CPU (`python -c "import pydantic_ai"` spends
as much of its own on it). So `sd run` pauses it (`pause`) until the run's first event
(`settle`, from run_cmd.py): by then the engine, the model and the parsed template
exist. The first event of a slot that streams comes as its request starts; without
streaming, with its first answer or tool call; actions before the first slot run inside
the pause. (Settling before the run starts, once the engine is imported, costs 0.05×
more: building the model, the agent and the slot's output schema then run with the
collector on.) `settle` moves everything made so far out of the collector's view for good
(`gc.freeze`, as `sd batch` and Dask workers do; the few cycles of garbage start-up left
stay in memory until the process ends) and turns it on again, so the run's own garbage is
collected as usual, and every later collection skips the start-up heap. `end` turns it
on again whatever happened (an error before the first event, a command line left to
typer).
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Pause the collector (if it is on) until `settle` or `end`."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def settle() -> None:
    """Start-up is over: freeze what it made and collect again."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def end() -> None:
    """Collect again, if `pause` stopped it and `settle` did not start it."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()

"""The cyclic collector and the start-up heap, in one place (SPEC §28).

Starting a command imports some 900 modules (pydantic-ai's among them) and builds their
classes, schemas and tables: objects that live as long as the process. The collector,
counting allocations, walks them again and again while they are made and finds almost
nothing to free. Three moments use that, all through this module (standard library only):

- `sd run` pauses the collector while it starts (`pause`, from the CLI's entry point)
  until the run's first event (`settle`): the engine, the model and the parsed template
  exist by then. `settle` freezes what start-up made (`gc.freeze`: the few cycles of garbage
  it left stay until the process ends) and collects again, so the run's own garbage is
  collected as usual and every later collection skips the start-up heap. `end` turns the
  collector on again whatever happened (an error before the first event, a command line
  left to typer).
- `sd batch` freezes its start-up before the rows (`freeze_for_rows`) and raises the young
  collections' threshold while they run (`ROWS_THRESHOLD`), until `thaw`, and collects
  fully every `COLLECT_EVERY_ROWS` finished rows (`row_finished`).
- A private Dask cluster's worker freezes its heap once, before its first rows
  (`freeze_once`): it lives for the batch.
"""

from __future__ import annotations

import gc
import threading

#: The collector's first threshold while a batch's rows run (Python's default is 700). A row
#: makes thousands of objects that live as long as it does (its frames, tasks, messages):
#: with 64 rows in flight a threshold of 700 started a young collection every few rows,
#: each walking the objects of every row in flight, about a tenth of a row's CPU (0.2 to
#: 0.7 ms a row of an instant model). Raised, the young collections come every few dozen
#: rows; the garbage of finished rows stays bounded by that and by `COLLECT_EVERY_ROWS`.
ROWS_THRESHOLD = 10_000

#: A full collection after every this many finished rows of a batch (`row_finished`). After
#: the start-up heap is frozen it walks only the rows in flight and the garbage of finished
#: ones (a few milliseconds), and it keeps that garbage from growing with the batch.
COLLECT_EVERY_ROWS = 500

_paused = False
_held: list[tuple[int, int, int]] = []  # the thresholds to restore, while rows run
_frozen_once = False
_lock = threading.Lock()


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


def freeze_for_rows() -> None:
    """Before a batch's rows: what start-up made (modules, schemas, agents: most of the heap)
    lives to the end: freeze it, so that collections never walk it again, and collect once
    after, so the collector measures "many objects survived" against the rows' objects
    alone. The first threshold is `ROWS_THRESHOLD` until `thaw`."""
    gc.collect()
    gc.freeze()
    gc.collect()
    if not _held:
        _held.append(gc.get_threshold())
        first, *rest = _held[0]
        gc.set_threshold(max(first, ROWS_THRESHOLD), *rest)


def row_finished(rows: int) -> None:
    """A batch has finished `rows` rows: a full collection every `COLLECT_EVERY_ROWS`."""
    if rows % COLLECT_EVERY_ROWS == 0:
        gc.collect()


def thaw() -> None:
    """After the rows: the heap unfrozen, the collector's thresholds as they were."""
    gc.unfreeze()
    if _held:
        gc.set_threshold(*_held.pop())


def freeze_once() -> bool:
    """Freeze this process's heap once (a long-lived worker, before its first rows); True
    when this call froze it."""
    global _frozen_once
    with _lock:
        if _frozen_once:
            return False
        gc.collect()
        gc.freeze()
        _frozen_once = True
    return True

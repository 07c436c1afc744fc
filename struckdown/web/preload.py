"""Imported once by the workers' fork server: every worker forked from it starts warm.

Besides the imports, one run of a small template with pydantic-ai's TestModel fills
the caches a first run would (answer types, schemas, the agent machinery), so a
worker's first job costs what its later ones do.
"""

import gc

from .worker import _warm_up


def _first_run() -> None:
    try:
        from pydantic_ai.models.test import TestModel

        from ..api import complete

        complete("Warm up.\n[[text]]\n[[bool:flag]]\n[[int:number]]", model=TestModel())
    except Exception:  # noqa: BLE001 - only a speed-up; a worker works without it
        pass


_warm_up()
_first_run()

# Every worker is forked from here and shares this warm heap: frozen, the workers' garbage
# collections skip it. Otherwise a full collection in a worker, whenever the objects a job
# makes happen to cross its threshold, walks the whole heap (0.4-0.5 s of a 1 s job
# budget on a busy machine) and copies its pages.
gc.collect()
gc.freeze()

"""Imported once by the workers' fork server: every worker forked from it starts warm.

Besides the imports, one run of a small template with pydantic-ai's TestModel fills
the caches a first run would (answer types, schemas, the agent machinery), so a
worker's first job costs what its later ones do.
"""

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

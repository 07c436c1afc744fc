"""How many cases the randomized tests draw.

The README's test command draws a quarter of them, so the unit suite stays well under a
minute; `.ci/run` runs the same tests again with every case (`STRUCKDOWN_DEEP_TESTS=1`,
its "deep" stage). Seeds and examples are fixed either way: a run replays its cases.
"""

from __future__ import annotations

import os

DEEP = os.environ.get("STRUCKDOWN_DEEP_TESTS") == "1"


def cases(full: int) -> int:
    """`full` in the deep stage, a quarter of it (at least one) otherwise."""
    return full if DEEP else max(1, full // 4)

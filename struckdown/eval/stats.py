"""The two statistics an eval reports, written out (short closed forms; no scipy needed).

- `wilson`: the Wilson score interval of a pass rate (95 %), which stays inside [0, 1] and
  is honest for the small repeat counts evals use (3 of 3 passes is not "100 % ± 0").
- `mcnemar`: the exact (binomial) McNemar test of paired pass/fail outcomes of the same
  cases before and after a change: only the cases that changed carry information.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # the two-sided 95 % quantile of the standard normal


def wilson(passed: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `passed` successes in `runs` trials ((0, 1) without runs)."""
    if runs <= 0:
        return 0.0, 1.0
    p = passed / runs
    z2 = z * z
    denominator = 1 + z2 / runs
    center = (p + z2 / (2 * runs)) / denominator
    half = z * math.sqrt(p * (1 - p) / runs + z2 / (4 * runs * runs)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def mcnemar(regressed: int, fixed: int) -> float:
    """The exact two-sided McNemar p-value of `regressed` (pass → fail) against `fixed`
    (fail → pass) discordant pairs: twice the binomial tail at 1/2, capped at 1."""
    n = regressed + fixed
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, i) for i in range(min(regressed, fixed) + 1)) / 2**n
    return min(1.0, 2 * tail)

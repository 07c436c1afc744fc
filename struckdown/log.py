"""struckdown's logger, with the `NullHandler` a library adds (so a program that configures
no logging sees no "last resort" output from us).

Installed by the first module that logs, not by `import struckdown`: `logging` costs
about as much as the whole of `sd --help` (SPEC §28).
"""

from __future__ import annotations

import logging

logger = logging.getLogger("struckdown")
if not any(isinstance(handler, logging.NullHandler) for handler in logger.handlers):
    logger.addHandler(logging.NullHandler())

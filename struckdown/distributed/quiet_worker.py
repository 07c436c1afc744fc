"""A Dask worker preload for the private cluster (`LocalCluster(preload=[…])`, issue 39 N13).

A Ctrl-C at the terminal goes to every process of the foreground group, the workers
too: each printed a KeyboardInterrupt traceback under `sd batch`'s one-line message. So
the workers ignore SIGINT; the process that started the cluster handles Ctrl-C and
stops them in order.

While it does, a worker's heartbeat may find the scheduler gone first and log a
CommClosedError traceback. The private cluster's scheduler lives in that same `sd`
process and goes away only when `sd` stops, so that message says nothing the user
does not know: it is dropped. Every other worker log line stays.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

_SCHEDULER_GONE = "Failed to communicate with scheduler during heartbeat"


def _not_scheduler_gone(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(_SCHEDULER_GONE)


def dask_setup(worker: Any) -> None:
    """Runs in each worker process as it starts (on its main thread, where signals are set)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(_not_scheduler_gone)

"""Exit codes and turning any exception into one `error: …` line.

Every command runs inside `reporting_errors`, so a user never sees a bare
traceback: the message goes to stderr and the exception picks the exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_OK = 0
EXIT_ERROR = 1  # model or runtime error (also: `sd check` found errors, a batch row failed)
EXIT_TEMPLATE = 2  # the template, a context/input/tools file or the command line is wrong
EXIT_HALTED = 3  # a guard stopped the run
EXIT_PAUSED = 4  # tool calls await approval (`--pause-to FILE` wrote the run's state)
EXIT_INTERRUPTED = 130  # Ctrl-C


class CliError(Exception):
    """A problem with what the user gave us (files, flags); `code` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_TEMPLATE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def unwrap(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups from task groups."""
    from ..errors import first_error

    return first_error(exc)


def describe(exc: BaseException) -> str:
    """The one-line (or, for a syntax error, positioned multi-line) message for `exc`."""
    exc = unwrap(exc)
    if isinstance(exc, CliError):
        return exc.message
    from ..errors import StruckdownError

    if isinstance(exc, StruckdownError):
        message = str(exc)
    else:
        text = str(exc).strip()
        message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    from ..errors import error_slot

    slot = error_slot(exc)  # the slot it came from
    if slot and repr(slot) not in message:
        message = f"slot {slot!r}: {message}"
    return message


def exit_code(exc: BaseException) -> int:
    exc = unwrap(exc)
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    from ..errors import Halted, TemplateSyntaxError

    if isinstance(exc, TemplateSyntaxError):
        return EXIT_TEMPLATE
    if isinstance(exc, Halted):
        return EXIT_HALTED
    from ..errors import Paused

    if isinstance(exc, Paused):
        return EXIT_PAUSED
    return EXIT_ERROR


def print_error(message: str) -> None:
    from .text import visible

    sys.stderr.write(f"error: {visible(message)}\n")
    sys.stderr.flush()


@contextmanager
def reporting_errors() -> Iterator[None]:
    """Run a command body; on failure print `error: <message>` and exit with its code."""
    import typer

    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        if isinstance(unwrap(exc), BrokenPipeError) and _stdout_closed():
            print_error("stdout was closed before everything was written (broken pipe)")
            raise typer.Exit(EXIT_ERROR) from None
        print_error(describe(exc))
        raise typer.Exit(exit_code(exc)) from None


def _stdout_closed() -> bool:
    """Whether stdout's reader went away; if so, stdout now points at /dev/null, so the
    interpreter's own flush at exit does not print a second broken-pipe message."""
    import os
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        closed = any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False  # not a real file (captured, or already closed): not ours to judge
    if closed:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except OSError:
            pass
    return closed

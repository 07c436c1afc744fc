"""Exit codes and turning any exception into one `error: …` line.

Every command runs inside `reporting_errors`, so a user never sees a bare
traceback: the message goes to stderr and the exception picks the exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..errors import InputError

EXIT_OK = 0
EXIT_ERROR = 1  # model or runtime error (also: `sd check` found errors, a batch row failed)
EXIT_TEMPLATE = 2  # the template, a context/input/tools file or the command line is wrong
EXIT_HALTED = 3  # a guard stopped the run
EXIT_PAUSED = 4  # tool calls await approval (`--pause-to FILE` wrote the run's state)
EXIT_UNKNOWN = 5  # sd batch: rows wait for a decision about a call whose outcome is unknown (SPEC §29)
EXIT_INTERRUPTED = 130  # Ctrl-C


class CliError(InputError):
    """A problem with what the user gave us (files, flags); `code` is the exit code.
    The library's own `InputError` (exit 2) and `OutputError` (exit 1) map the same way."""

    def __init__(self, message: str, code: int = EXIT_TEMPLATE) -> None:
        super().__init__(message)
        self.code = code


def unwrap(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups from task groups."""
    from ..errors import first_error

    return first_error(exc)


def describe(exc: BaseException) -> str:
    """The one-line (or, for a syntax error, positioned multi-line) message for `exc`, in
    the CLI's words (`--max-cost 0.5`, not `max_cost=0.5 USD`)."""
    from ..errors import describe_error

    return cli_words(describe_error(exc))


def cli_words(message: str) -> str:
    """A library message as the CLI says it: the run option the user set with a flag is
    named by that flag (`max_cost=0.5 USD` → `--max-cost 0.5`)."""
    if "max_cost" not in message:
        return message
    import re

    message = re.sub(r"\bmax_cost=([0-9.eE+-]+) USD\b", r"--max-cost \1", message)
    return re.sub(r"(?<![-\w])max_cost\b(?!=)", "--max-cost", message)


def exit_code(exc: BaseException) -> int:
    exc = unwrap(exc)
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    from ..errors import FlowError, Halted, InputError, OutputError, TemplateSyntaxError, UndefinedVariableError

    if isinstance(exc, (TemplateSyntaxError, UndefinedVariableError, InputError)):
        return EXIT_TEMPLATE
    if isinstance(exc, FlowError) and exc.line is not None:  # refused by the plan, before any call (SPEC §33)
        return EXIT_TEMPLATE
    if isinstance(exc, OutputError):
        return EXIT_ERROR
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
def interrupts_end_the_process(
    note: Callable[[], str] = lambda: "interrupted", before_exit: Callable[[], None] | None = None
) -> Iterator[None]:
    """Inside a running event loop: the first Ctrl-C ends the process at once (exit 130,
    the note on stderr, no traceback). A cancelled run would otherwise wait for a blocking
    sync tool's thread, so a second Ctrl-C was needed and the tool's side effect happened
    after the user was told the run stopped. Everything a run keeps is crash-safe (the
    batch journal is append-only, its lock a kernel flock), so ending at once loses
    nothing a crash would not.

    The handler goes through the loop (`add_signal_handler`): the signal may be delivered
    to a tool's thread, and only the loop's wake-up pipe then wakes the main thread.
    Outside the main thread, or with SIGINT ignored (a background job), it does nothing.

    SIGTERM ends it the same way. `before_exit` runs first, within that first Ctrl-C (`sd run
    -o` writes what the run has so far, marked interrupted); its failure never keeps the
    process alive."""
    import asyncio
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signals}
    for signum in signals:
        loop.add_signal_handler(signum, _end_now, note, before_exit)  # wakes an idle loop (the wake-up pipe)
        # ... and a plain handler over it, so a loop busy rendering a heavy template ends too
        # (the wake-up pipe stays set: an idle loop still wakes, then this handler runs)
        signal.signal(signum, lambda number, frame: _end_now(note, before_exit))
    try:
        yield
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
            signal.signal(signum, previous[signum])


def _end_now(note: Callable[[], str], before_exit: Callable[[], None] | None = None) -> None:
    import os

    try:
        if before_exit is not None:
            try:
                before_exit()
            except BaseException as exc:  # noqa: BLE001 - the process ends whatever happens
                sys.stderr.write(f"error: {exc}\n")
        if sys.stdout.isatty():
            sys.stdout.write("\x1b[?25h\n")  # a live display hid the cursor: give it back
        sys.stdout.flush()
        sys.stderr.write(f"{note()}\n")
        sys.stderr.flush()
    finally:
        os._exit(EXIT_INTERRUPTED)


@contextmanager
def reporting_errors() -> Iterator[None]:
    """Run a command body; on failure print `error: <message>` and exit with its code."""
    import typer

    from ..errors import FRONT_END

    token = FRONT_END.set("cli")  # messages that name an option name sd's flag
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        raise typer.Exit(report(exc)) from None
    finally:
        FRONT_END.reset(token)


def reported(body: Callable[[], int]) -> int:
    """`reporting_errors` without typer, for the fast paths (cli/fast/run.py,
    cli/fast/check.py): run `body`; on failure print the `error:` line; return the exit code."""
    from ..errors import FRONT_END

    token = FRONT_END.set("cli")  # messages that name an option name sd's flag
    try:
        return body()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        return report(exc)
    finally:
        FRONT_END.reset(token)


def report(exc: Exception) -> int:
    """Print the one `error:` line of a failed command; return its exit code (typer-free:
    the fast paths of cli/fast/run.py and cli/fast/check.py use it too)."""
    if isinstance(unwrap(exc), BrokenPipeError) and _stdout_closed():
        print_error("stdout was closed before everything was written (broken pipe)")
        return EXIT_ERROR
    print_error(describe(exc))
    return exit_code(exc)


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

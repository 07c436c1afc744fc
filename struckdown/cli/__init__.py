"""The `sd` command line: run, chat, check, explain, batch (SPEC §8).

`main` is the console-script entry point; the typer app lives in `app.py` and
every command imports its heavy parts (pydantic-ai, rich.live) only when it runs.
"""


def main() -> None:
    import sys

    from .fast.help import stored_page

    page = stored_page(sys.argv[1:])  # `sd --help`: the stored page, no typer (fast/help.py)
    if page is not None:
        sys.stdout.write(page)
        return
    if sys.argv[1:2] == ["check"]:  # `sd check`: its flags read without typer (fast/check.py)
        from .fast.check import parse_check_args, run_check

        args = parse_check_args(sys.argv[2:])
        if args is not None:
            sys.exit(run_check(args))
    if sys.argv[1:2] == ["run"]:  # `sd run`: its flags read without typer (fast/run.py)
        from .fast import start_up
        from .fast.run import parse_run_args, run_fast

        start_up.pause()  # no cyclic collections until the run's first event (fast/start_up.py)
        try:
            values = parse_run_args(sys.argv[2:])
            if values is not None:
                sys.exit(run_fast(values))
        finally:
            start_up.end()
    from .app import app

    app()

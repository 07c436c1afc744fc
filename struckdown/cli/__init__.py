"""The `sd` command line: run, chat, check, explain, batch (SPEC §8).

`main` is the console-script entry point; the typer app lives in `app.py` and
every command imports its heavy parts (pydantic-ai, rich.live) only when it runs.
"""


def main() -> None:
    import sys

    from .fast_help import stored_page

    page = stored_page(sys.argv[1:])  # `sd --help`: the stored page, no typer (fast_help.py)
    if page is not None:
        sys.stdout.write(page)
        return
    if sys.argv[1:2] == ["check"]:  # `sd check`: its flags read without typer (fast_check.py)
        from .fast_check import parse_check_args, run_check

        args = parse_check_args(sys.argv[2:])
        if args is not None:
            sys.exit(run_check(args))
    from .app import app

    app()

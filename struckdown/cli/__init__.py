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
    from .app import app

    app()

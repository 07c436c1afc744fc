"""The `sd` command line: run, chat, check, explain, batch (SPEC §8).

`main` is the console-script entry point; the typer app lives in `app.py` and
every command imports its heavy parts (pydantic-ai, rich.live) only when it runs.
"""


def main() -> None:
    from .app import app

    app()

"""The `sd` command line (placeholder until the CLI lands)."""


def main() -> None:
    from .app import app

    app()

"""`sd`'s start-up paths: `sd --help` from stored pages (`help`), `sd run` and `sd check`
with their flags read without typer (`run`, `check`, from the generated `run_params`), and
the collector paused while `sd run` starts (`start_up`). What runs at start-up imports only
the standard library (tests/parse/test_layering.py)."""

"""`sd`'s start-up paths: `sd --help` from stored pages (`help`), `sd run` and `sd check`
with their flags read without typer by one parser (`run.parse_args`, from the generated
`run_params`); the collector paused while `sd run` starts is `struckdown/heap.py`'s. What
runs at start-up imports only the standard library (tests/parse/test_layering.py)."""

# struckdown — developer entry points. `make demo` is the README's main job.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LLM := scripts/local-llm.sh
BASE_URL := http://127.0.0.1:$${STRUCKDOWN_LLM_PORT:-8765}/v1

.PHONY: install demo test e2e bench fuzz typecheck llm-start llm-stop clean

$(BIN)/sd: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $@

install: $(BIN)/sd

# Install, prepare and start the local model, run the quickstart with live
# streaming, and stop the server again (also on failure or Ctrl-C). The shell that
# starts the server holds it (scripts/local-llm.sh counts its holders) and its trap
# releases it: a server another demo or e2e run still holds keeps running.
demo: install
	@trap 'bash $(LLM) stop' EXIT INT TERM; \
	bash $(LLM) start && \
	LLM_API_BASE=$(BASE_URL) $(BIN)/sd run examples/quickstart.sd --context examples/quickstart.json --no-cache

test: install
	$(BIN)/python -m pytest -q

e2e: install
	@trap 'bash $(LLM) stop' EXIT INT TERM; \
	bash $(LLM) start && \
	LLM_API_BASE=$(BASE_URL) $(BIN)/python -m pytest -q --dist loadfile -m "e2e and not alone" tests/e2e && \
	LLM_API_BASE=$(BASE_URL) $(BIN)/python -m pytest -q -n 0 -m "e2e and alone" tests/e2e

bench: install
	$(BIN)/python -m bench

fuzz: install
	$(BIN)/python -m bench.fuzz --cases 100000

typecheck: install
	$(BIN)/python -m mypy struckdown

# held by name until `make llm-stop` (the shell of a make recipe ends at once)
llm-start:
	STRUCKDOWN_LLM_HOLDER=make-llm-start bash $(LLM) start

llm-stop:
	STRUCKDOWN_LLM_HOLDER=make-llm-start bash $(LLM) stop

clean:
	rm -rf $(VENV) .pytest_cache

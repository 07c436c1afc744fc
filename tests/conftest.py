import ast
import functools
import gc
import pathlib
import sys

import pytest

# Docker's Python images set PYTHONDONTWRITEBYTECODE=1: no bytecode cache is ever written, so
# each run (each xdist worker, each `sd` subprocess) compiled struckdown, the test modules and
# hypothesis again, about 5 s of a worker's start. The test run writes the caches
# (`__pycache__/`, ignored by git); subprocesses read them.
sys.dont_write_bytecode = False

# Shared test helpers (scripted models, CLI runners, payload lists) live in tests/support.
sys.path.insert(0, str(pathlib.Path(__file__).parent / "support"))

TESTS = pathlib.Path(__file__).parent
# Folders whose conftest marks every test in them (tests/e2e/conftest.py adds `e2e`).
FOLDER_MARKS = {TESTS / "e2e": frozenset({"e2e"})}


def pytest_ignore_collect(collection_path: pathlib.Path, config: pytest.Config) -> bool | None:
    """Skip the import of a test file (or folder) none of whose tests the `-m` expression can
    select: the marker-only files (Dask, MCP servers, sd processes, the editor, the browser, the
    local model) cost the README run their imports while all their tests are deselected. The
    marker stages of .ci/run (`-m cluster`, …) collect them as before; a path named on the
    command line is always collected (its tests are then listed as deselected)."""
    markexpr = config.option.markexpr
    if not markexpr or collection_path in _initial_paths(config):
        return None
    if collection_path.is_dir():
        marks = FOLDER_MARKS.get(collection_path)
    elif collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        marks = _module_marks(collection_path)
    else:
        return None
    if not marks or _can_select(markexpr, marks):
        return None
    return True


def _initial_paths(config: pytest.Config) -> frozenset[pathlib.Path]:
    here = config.invocation_params.dir
    return frozenset((here / arg.split("::")[0]).resolve() for arg in config.args)


@functools.cache
def _module_marks(path: pathlib.Path) -> frozenset[str]:
    """The marks of a module-level `pytestmark = pytest.mark.X` (or a list of them): every
    test of the file carries them. Found without importing the file."""
    source = path.read_text(encoding="utf-8")
    if "pytestmark" not in source:
        return frozenset()
    marks: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            values = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            for value in values:
                if isinstance(value, ast.Call):  # pytest.mark.X(...)
                    value = value.func
                if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Attribute) and value.value.attr == "mark":
                    marks.add(value.attr)
    return frozenset(marks)


@functools.cache
def _can_select(markexpr: str, marks: frozenset[str]) -> bool:
    """Whether some test carrying `marks` (and any other marks) matches `markexpr`: tried
    with every other mark the expression names present or absent. When in doubt, yes."""
    try:
        from _pytest.mark.expression import Expression

        expression = Expression.compile(markexpr)
        others = sorted(expression.idents() - marks)
    except Exception:
        return True
    if len(others) > 10:
        return True
    for bits in range(2 ** len(others)):
        present = marks | {name for i, name in enumerate(others) if bits >> i & 1}

        def matcher(name: str, /, **kwargs: object) -> bool:
            if kwargs:
                raise LookupError(name)  # a mark's arguments: not known without the import
            return name in present

        try:
            if expression.evaluate(matcher):
                return True
        except Exception:
            return True
    return False


class FrozenHeap:
    """The test process's heap (pytest, every test module, struckdown, hypothesis: some 300,000
    objects) is frozen once collection ends, so the collector does not walk it again.

    Each `sd batch` collects twice around freezing its start-up (`heap.freeze_for_rows`) and
    unfreezes everything at its end: in a test process each of those full collections walked
    the whole heap (~0.1 s; 140 batches through CliRunner, some 15 s of CPU in the README run).
    Here an unfreeze is followed by a freeze, so the heap stays frozen; the batch's own code
    runs unchanged. Cyclic garbage frozen with it (a test's response caches hold files open)
    is freed by a full collection every COLLECT_EVERY unfreezes, and at the session's end,
    when the heap is thawed and collected: it is finalized (and warns) then."""

    COLLECT_EVERY = 10  # about 14 full collections in the README run instead of 280

    def __init__(self) -> None:
        self.real_unfreeze = gc.unfreeze
        self.thaws = 0

    def unfreeze(self) -> None:
        self.real_unfreeze()
        self.thaws += 1
        if self.thaws % self.COLLECT_EVERY == 0:
            gc.collect()
        gc.freeze()

    def start(self) -> None:
        gc.collect()
        gc.freeze()
        gc.unfreeze = self.unfreeze

    def stop(self) -> None:
        gc.unfreeze = self.real_unfreeze
        gc.unfreeze()
        gc.collect()


FROZEN_HEAP = FrozenHeap()


def pytest_collection_finish(session: pytest.Session) -> None:
    FROZEN_HEAP.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    FROZEN_HEAP.stop()


@pytest.fixture(autouse=True)
def fresh_default_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with a new default Environment, so a type or action one test
    registers through `sd.register_*` is not there for the next."""
    import struckdown.environment as environment

    monkeypatch.setattr(environment, "_default", None)


@pytest.fixture(autouse=True)
def instant_retry_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries of transient provider failures (SPEC §14) wait with backoff; in tests they
    wait no time (the delays are still computed and reported in `SlotRetry`)."""
    from struckdown.run.wrappers import retries

    async def no_wait(seconds: float) -> None:
        return None

    monkeypatch.setattr(retries, "sleep", no_wait)


@pytest.fixture(scope="session", autouse=True)
def _state_key_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Paused states are signed with a per-user key file (struckdown.approval.signing): the
    tests' is a temporary one, never the user's ~/.config/struckdown/state.key. Set in
    os.environ, so `sd` processes the tests start use it too."""
    import os

    os.environ["STRUCKDOWN_STATE_KEY_FILE"] = str(tmp_path_factory.mktemp("state-key") / "state.key")

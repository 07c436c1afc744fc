import pathlib
import sys

import pytest

# Shared test helpers (scripted models, CLI runners, payload lists) live in tests/support.
sys.path.insert(0, str(pathlib.Path(__file__).parent / "support"))


@pytest.fixture(autouse=True)
def fresh_default_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with a new default Environment, so a type or action one test
    registers through `sd.register_*` is not there for the next."""
    import struckdown.environment as environment

    monkeypatch.setattr(environment, "_default", None)

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


@pytest.fixture(autouse=True)
def instant_retry_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries of transient provider failures (SPEC §14) wait with backoff; in tests they
    wait no time (the delays are still computed and reported in `SlotRetry`)."""
    from struckdown.run import resilience

    async def no_wait(seconds: float) -> None:
        return None

    monkeypatch.setattr(resilience.CLOCK, "sleep", no_wait)

"""Issue 55 (SPEC §37): 0.x calling code that still broke — `LLMError.is_retryable`,
`from struckdown import LLM`, `@evidence` reading `context["evidence_folder"]`."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import struckdown as sd
from scripted import Script


# -- LLMError.is_retryable ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (sd.RateLimitError("m", status=429), True),
        (sd.ModelConnectionError("m"), True),
        (sd.LLMError("m", status=503), True),
        (sd.AuthenticationError("m", status=401), False),
        (sd.ContextWindowError("m", status=400), False),
        (sd.ContentFilterError("m", status=400), False),
        (sd.BadRequestError("m", status=400), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_llm_error_says_whether_it_is_retryable(error: sd.LLMError, retryable: bool) -> None:
    assert error.is_retryable is retryable


def test_a_failed_run_raises_an_llm_error_that_says_it_is_not_retryable() -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    def refuse(call: object) -> str:
        raise ModelHTTPError(401, "m", {"error": "bad key"})

    with pytest.raises(sd.LLMError) as caught:
        sd.complete("Hi [[x]]", model=Script(refuse).model(), retries=0)
    assert caught.value.is_retryable is False


# -- from struckdown import LLM ----------------------------------------------------------------


def test_llm_imports_with_a_deprecation_warning_and_is_a_model_string(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("STRUCKDOWN_MODEL", "DEFAULT_LLM"):
        monkeypatch.delenv(var, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from struckdown import LLM
    assert [(w.category, w.filename) for w in caught] == [(DeprecationWarning, __file__)]
    assert "model=" in str(caught[0].message)
    llm = LLM("openai:gpt-4o")
    assert llm == "openai:gpt-4o" and llm.model_name == "openai:gpt-4o" and repr(llm) == "LLM(model_name='openai:gpt-4o')"
    assert LLM() == "gpt-4.1-mini"  # 0.x's default
    monkeypatch.setenv("DEFAULT_LLM", "test")
    assert LLM(model_type="llm") == "test"
    result = sd.complete("Hi [[x]]", model=LLM())  # pydantic-ai's TestModel, by its model string
    assert isinstance(result["x"], str)


# -- @evidence ---------------------------------------------------------------------------------


def test_evidence_reads_the_folder_named_in_the_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "sleep.md").write_text("Sleep hygiene helps insomnia.\n\nCoffee keeps you awake.\n")
    script = Script(lambda c: "ok")
    result = sd.complete("[[@evidence:found|query]] Q [[a]]", {"query": "insomnia", "evidence_folder": "notes"},
                         model=script.model())
    assert result["found"] == "[notes/sleep.md] Sleep hygiene helps insomnia."
    assert script.calls[0].turns == [("user", "[notes/sleep.md] Sleep hygiene helps insomnia."), ("user", "Q")]


def test_evidence_fails_clearly_on_a_missing_or_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = Script(lambda c: "ok")
    with pytest.raises(sd.TemplateRuntimeError, match="no evidence folder 'notes'"):
        sd.complete("[[@evidence:found|topic]] Q [[a]]", {"evidence_folder": "notes"}, model=script.model())
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "scan.pdf").write_bytes(b"%PDF")
    with pytest.raises(sd.TemplateRuntimeError, match="evidence folder 'notes' holds no text files"):
        sd.complete("[[@evidence:found|topic]] Q [[a]]", {"evidence_folder": "notes"}, model=script.model())
    assert script.calls == []

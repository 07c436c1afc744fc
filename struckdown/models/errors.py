"""Provider failures as struckdown errors that say which model failed and what to do.

pydantic-ai already classifies provider errors (`ModelRateLimitError`,
`ModelAuthenticationError`, …, each usually also a `ModelHTTPError`); this module
turns them into one small hierarchy under `StruckdownError`, so the CLI can
print one line with a hint and exit 1, and library users can catch
`ModelError` without importing pydantic-ai.

Retrying is not done here: struckdown's retry layer (`run/wrappers/retries.py`, SPEC §14)
asks `is_transient` which mapped errors are worth another attempt, and only a
failure that remains after its retries reaches the caller.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..errors import StruckdownError

_CONTEXT_WORDS = (
    "context length", "context_length", "context size", "context window", "maximum context",
    "exceed_context_size", "too many tokens", "prompt is too long", "input is too long",
    "reduce the length", "token limit",
)  # fmt: skip
_FILTER_WORDS = (
    "content_filter", "content filter", "content management policy", "content_policy",
    "content policy", "responsibleaipolicyviolation", "safety system", "flagged",
)  # fmt: skip
_DETAIL_LIMIT = 300


class ModelError(StruckdownError):
    """A model provider failed; `.model` names it, `.status` is the HTTP status if any.

    The message ends with a hint (also on `.hint`) saying what the user can do.
    """

    default_hint = "try again later; if it persists, check the provider's status page"
    what = "the provider failed"

    def __init__(
        self, model: str, detail: str = "", status: int | None = None, hint: str | None = None,
        what: str | None = None,
    ) -> None:  # fmt: skip
        super().__init__(model, detail, status, hint, what)  # all its data: default pickling rebuilds it
        self.model = model
        self.status = status
        self.detail = detail
        self.hint = hint or self.default_hint
        if what is not None:
            self.what = what

    @property
    def is_retryable(self) -> bool:
        """0.x's flag: whether another attempt may succeed (rate limits, connection
        errors, timeouts, 5xx), as the retry layer decides (`is_transient`)."""
        return is_transient(self)

    def __str__(self) -> str:
        where = f" (HTTP {self.status})" if self.status is not None else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"model {self.model}: {self.what}{where}{detail}. Hint: {self.hint}"


class RateLimitError(ModelError):
    what = "rate limited"
    default_hint = (
        "wait and run again, lower the concurrency (sd batch -j N), "
        "or raise retries= (--retries, STRUCKDOWN_MAX_RETRIES) so more retries with backoff are made"
    )


class AuthenticationError(ModelError):
    what = "authentication failed"
    default_hint = (
        "check the API key (OPENAI_API_KEY, ANTHROPIC_API_KEY, … or LLM_API_KEY for LLM_API_BASE) "
        "and that it has access to this model"
    )


class ContextWindowError(ModelError):
    what = "the prompt is longer than the model's context window"
    default_hint = (
        "shorten the template or its context, split long inputs, or use a model with a larger context "
        "(for llama.cpp raise the server's --ctx-size)"
    )


class ContentFilterError(ModelError):
    what = "the provider's content filter blocked the request or the answer"
    default_hint = "rephrase the input, or use a model or deployment with a different content policy"


class ModelConnectionError(ModelError):
    what = "could not reach the model endpoint"
    default_hint = (
        "check that the server is running and the base URL is right (LLM_API_BASE; for a local model "
        "run scripts/local-llm.sh start), or raise STRUCKDOWN_TIMEOUT for slow models"
    )


class BadRequestError(ModelError):
    what = "the provider rejected the request"
    default_hint = "check the model name and the slot's settings (temperature=, max_tokens=, …)"


class UnsupportedRequestError(BadRequestError):
    """The endpoint says it cannot serve this request at all (the model takes no images, an
    input or setting it does not support, an invalid request), whatever the HTTP status:
    llama.cpp answers "image input is not supported" with HTTP 500. Never retried."""

    what = "the model cannot serve this request"
    default_hint = (
        "retrying will not help: check the slot's inputs and settings (temperature=, max_tokens=, …) "
        "or use another model (model=, --model, fallback=)"
    )


_IMAGE_WORDS = (
    "image input", "image_url", "images are not supported", "does not support image", "not support images",
    "vision", "multimodal", "mmproj", "image content", "image is not supported",
)  # fmt: skip
_UNSUPPORTED_WORDS = ("not supported", "unsupported", "invalid request", "does not support")
_IMAGE_HINT = (
    "the model cannot take images: give the slot a model with vision (model=…, --model, fallback=) or leave "
    "the images out; a llama.cpp server needs the model's --mmproj file for images"
)


def _unsupported(text: str, status: int | None, label: str, *, images_only: bool = False) -> ModelError | None:
    """The permanent error for a body that says the request cannot be served (any status;
    `images_only`: a 4xx, whose other refusals `_rejected` tells apart)."""
    lowered = text.lower()
    if any(word in lowered for word in (*_CONTEXT_WORDS, *_FILTER_WORDS)):
        return None  # the context window and the content filter have their own errors
    if any(word in lowered for word in _IMAGE_WORDS) and any(w in lowered for w in _UNSUPPORTED_WORDS):
        return UnsupportedRequestError(label, _short(text), status=status, hint=_IMAGE_HINT,
                                       what="the model cannot take images")  # fmt: skip
    if not images_only and any(word in lowered for word in _UNSUPPORTED_WORDS):
        return UnsupportedRequestError(label, _short(text), status=status)
    return None


_QUOTA_HINT = "the account's quota or credits are exhausted: check billing or use another API key"


class TruncatedError(ModelError):
    """An answer was cut off at the output token limit (`finish_reason == "length"`) and
    cannot be used: a typed answer or a tool call cut short, or any cut answer of a slot
    with `on_truncate="error"` (SPEC §14). Raised after the slot's fallback models, if any,
    were tried."""

    what = "the answer was cut off at the output token limit"
    default_hint = (
        "raise the slot's max_tokens= (or settings={'max_tokens': N}, sd run --max-tokens N), "
        "ask for a shorter answer, or set a fallback= model"
    )


def is_transient(error: ModelError) -> bool:
    """Whether a provider failure may go away on its own, so another attempt is worth it
    (SPEC §14): connection errors, timeouts, HTTP 408/409/429/5xx and overloaded servers.
    An exhausted quota, a refused key, a bad request, the context window, the content
    filter and a cut answer are permanent."""
    if isinstance(error, ContentFilterError | ContextWindowError | AuthenticationError | TruncatedError):
        return False
    if isinstance(error, UnsupportedRequestError):  # said so by the server, whatever the status
        return False
    if isinstance(error, RateLimitError):
        return error.hint != _QUOTA_HINT
    if error.status is not None:
        return error.status in (408, 409, 429) or error.status >= 500
    return not isinstance(error, BadRequestError)  # no status: a dropped connection, an in-stream failure
_NOT_FOUND_HINT = "check the model name and the base URL (an OpenAI-compatible base URL usually ends in /v1)"
_SERVER_HINT = (
    "the provider kept failing after retries; try again later, raise retries= (--retries, STRUCKDOWN_MAX_RETRIES) "
    "or set a fallback= model"
)


def map_model_error(exc: BaseException, model_label: str) -> ModelError | None:
    """The struckdown error for a provider failure, or None when `exc` is not one.

    Looks through exception groups and `__cause__` chains, since task groups and
    wrappers may hide the provider error; None tells the caller to re-raise `exc`.
    """
    seen: set[int] = set()
    for candidate in _candidates(exc, seen):
        mapped = _map_one(candidate, model_label)
        if mapped is not None:
            return mapped
    return None


def _candidates(exc: BaseException, seen: set[int]) -> Any:
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            for inner in current.exceptions:
                yield from _candidates(inner, seen)
        current = current.__cause__


_SURROGATE_HINT = (
    "a context value, answer or tool result holds a lone surrogate such as '\\ud800', which is not "
    "valid Unicode; clean untrusted text first, e.g. text.encode('utf-8', 'replace').decode('utf-8') "
    "(see docs/security.md)"
)


_EMPTY_HINT = (
    "the endpoint answered without any choice (an empty `choices` list), which a proxy or server does "
    "when it drops or silently refuses a request: run again, and check the server's logs"
)


def _raised_by_model_adapter(exc: BaseException) -> bool:
    """Whether `exc` was raised inside pydantic-ai's provider adapters (its `models` package)."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and f"pydantic_ai{os.sep}models{os.sep}" in last


def _is_empty_response(exc: BaseException) -> bool:
    """Whether `exc` is pydantic-ai's way of saying the endpoint answered with no choice at all.

    Before 2.78 its adapters read `response.choices[0]` and raised IndexError; 2.78 raises
    `ModelEmptyResponseError` (an `UnexpectedModelBehavior` and a `ModelAPIError`); some
    adapters raise a plain `ModelAPIError` whose message says "no choices".
    """
    if isinstance(exc, IndexError):
        return _raised_by_model_adapter(exc)
    if type(exc).__module__ != "pydantic_ai.exceptions":
        return False
    from pydantic_ai import exceptions as pe

    empty = getattr(pe, "ModelEmptyResponseError", None)
    if empty is not None and isinstance(exc, empty):
        return True
    return isinstance(exc, pe.ModelAPIError) and "no choices" in str(getattr(exc, "message", ""))


def _map_one(exc: BaseException, label: str) -> ModelError | None:
    if isinstance(exc, ModelError):
        return exc
    if "surrogates not allowed" in str(exc) and (
        isinstance(exc, UnicodeEncodeError) or type(exc).__name__ == "PydanticSerializationError"
    ):  # the request cannot be encoded as UTF-8 JSON: nothing was sent
        return BadRequestError(
            label, "the request holds text that cannot be encoded as UTF-8",
            hint=_SURROGATE_HINT, what="the request could not be sent",
        )
    from pydantic_ai import exceptions as pe

    if isinstance(exc, pe.ContentFilterError):
        return ContentFilterError(label, _short(exc.message))
    if isinstance(exc, pe.UnexpectedModelBehavior) and not isinstance(exc, StruckdownError):
        sent = _not_a_completion(exc, label)
        if sent is not None:
            return sent
    if _is_empty_response(exc):
        return ModelError(label, "the response holds no choices", what="the provider sent no answer", hint=_EMPTY_HINT)
    if isinstance(exc, pe.ModelHTTPError):
        return _from_status(exc.status_code, exc, _body_text(exc.body) or exc.message, label)
    if isinstance(exc, pe.ModelRequestTimeout | pe.ModelConnectionError):
        return _connection_error(exc, label, exc.message)
    if isinstance(exc, pe.ModelAPIError):
        # No HTTP status: an error reported inside a stream, or an unclassified failure.
        detail = _short(exc.message)
        mapped = _from_category(exc, detail, None, label)
        if mapped is not None:
            return mapped
        if isinstance(exc, pe.ModelRequestRejectedError):
            return _rejected(exc.message, None, label)
        unsupported = _unsupported(exc.message, None, label)  # an in-stream error that says so
        if unsupported is not None:
            return unsupported
        return ModelConnectionError(label, detail, what="the request to the model endpoint failed")
    return _map_transport(exc, label)


def _from_status(status: int, exc: Any, text: str, label: str) -> ModelError:
    mapped = _from_category(exc, _short(text), status, label)
    if mapped is not None and not (isinstance(mapped, BadRequestError) or mapped.hint == _SERVER_HINT):
        return mapped  # rate limits, quota, auth, context window: pydantic-ai knows them best
    if status not in (408, 409, 429):  # a body that says it cannot be served is permanent (4xx and 5xx)
        unsupported = _unsupported(text, status, label, images_only=status < 500)
        if unsupported is not None:
            return unsupported
    if mapped is not None:
        return mapped
    if status == 429:
        return RateLimitError(label, _short(text), status=status)
    if 400 <= status < 500:
        return _rejected(text, status, label)
    return ModelError(label, _short(text), status=status, hint=_SERVER_HINT if status >= 500 else None)


def _rejected(text: str, status: int | None, label: str) -> ModelError:
    """A refused request, told apart by its wording where the status is too coarse (llama.cpp, vLLM, Azure)."""
    detail, lowered = _short(text), text.lower()
    if any(word in lowered for word in _CONTEXT_WORDS):
        return ContextWindowError(label, detail, status=status)
    if any(word in lowered for word in _FILTER_WORDS):
        return ContentFilterError(label, detail, status=status)
    if status in (401, 403):
        return AuthenticationError(label, detail, status=status)
    return BadRequestError(label, detail, status=status, hint=_NOT_FOUND_HINT if status == 404 else None)


def _from_category(exc: Any, detail: str, status: int | None, label: str) -> ModelError | None:
    """Use pydantic-ai's own classification where it is more precise than the status."""
    from pydantic_ai import exceptions as pe

    if isinstance(exc, pe.ModelQuotaExceededError):
        return RateLimitError(label, detail, status=status, hint=_QUOTA_HINT)
    if isinstance(exc, pe.ModelRateLimitError):
        return RateLimitError(label, detail, status=status)
    if isinstance(exc, pe.ModelContextWindowExceededError):
        return ContextWindowError(label, detail, status=status)
    if isinstance(exc, pe.ModelAuthenticationError):
        return AuthenticationError(label, detail, status=status)
    if isinstance(exc, pe.ModelNotFoundError):
        return BadRequestError(label, detail, status=status, hint=_NOT_FOUND_HINT)
    if isinstance(exc, pe.ModelUnavailableError | pe.ModelServerError):
        return ModelError(label, detail, status=status, hint=_SERVER_HINT)
    return None


def _map_transport(exc: BaseException, label: str) -> ModelError | None:
    """Errors raised below pydantic-ai: the openai SDK, httpx2, or the OS."""
    module = type(exc).__module__.partition(".")[0]
    if module == "openai":
        status = getattr(exc, "status_code", None)
        if isinstance(status, int):
            return _from_status(status, exc, _body_text(getattr(exc, "body", None)) or str(exc), label)
        if "Connection" in type(exc).__name__ or "Timeout" in type(exc).__name__:
            return _connection_error(exc, label, str(exc))
        return None
    if module in ("httpx2", "httpx", "httpcore", "httpcore2"):
        name = type(exc).__name__
        if "Timeout" in name or "Connect" in name or "Network" in name or "Protocol" in name:
            return _connection_error(exc, label, str(exc) or name)
        return None
    if isinstance(exc, TimeoutError | ConnectionError):
        return _connection_error(exc, label, str(exc) or type(exc).__name__)
    return None


def _connection_error(exc: BaseException, label: str, detail: str) -> ModelConnectionError:
    text = f"{type(exc).__name__} {exc}".lower()
    if "timeout" in text or "timed out" in text:
        return ModelConnectionError(
            label,
            _short(detail),
            what="the request timed out",
            hint="a long answer on a slow model: cap it with max_tokens= (--max-tokens N) or end it on time with "
            "max_seconds= (--max-seconds S, the text so far is kept); or raise STRUCKDOWN_TIMEOUT (seconds per "
            "attempt, default 120), or use a smaller or faster model",
        )
    return ModelConnectionError(label, _short(detail))


_NOT_A_COMPLETION = ("Streamed response ended without content", "expected JSON data")
_WRONG_BODY_HINT = (
    "check the base URL (an OpenAI-compatible one usually ends in /v1) and that no proxy, gateway or "
    "login page answers in the model server's place; the server's logs say more"
)


def _not_a_completion(exc: BaseException, label: str) -> ModelError | None:
    """What the server sent when it was not a completion at all (an HTML page, an empty
    body), read off the HTTP response the adapter held when it gave up (pydantic-ai's
    message alone says only that no content came)."""
    message = str(getattr(exc, "message", exc))
    if not any(marker in message for marker in _NOT_A_COMPLETION):
        return None
    tb = exc.__traceback__
    while tb is not None:
        held = tb.tb_frame.f_locals.get("response")
        if isinstance(held, str):  # a non-streamed body the SDK could not read as JSON
            kind = "an HTML page" if held.lstrip()[:1] == "<" else "text"
            sample = _short(held) if held.strip() else "(nothing)"
            return ModelError(  # the SDK hands back text only for a 2xx answer
                label, f"{kind}, not JSON: {sample}", status=200, what="the endpoint sent no completion",
                hint=_WRONG_BODY_HINT,
            )
        http = getattr(held, "response", None)
        if http is not None and hasattr(http, "status_code") and hasattr(http, "headers"):
            return ModelError(
                label, _streamed_body(http), status=http.status_code, what="the endpoint sent no completion",
                hint=_WRONG_BODY_HINT,
            )
        tb = tb.tb_next
    return None


def _streamed_body(http: Any) -> str:
    media_type = str(http.headers.get("content-type") or "no content type").split(";")[0].strip()
    size = getattr(http, "num_bytes_downloaded", None)
    bytes_note = f", {size:,} bytes" if isinstance(size, int) else ""
    described = f"{media_type}{bytes_note}"
    if size == 0:
        return f"an empty body ({described}) where a stream of completion events was expected"
    if "html" in media_type:
        return f"an HTML page ({described}) where a stream of completion events was expected"
    return f"no completion events in the stream ({described})"


def _body_text(body: object) -> str:
    """The provider's own message from an error body, falling back to the body as text."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = error.get("message")
            code = error.get("code") or error.get("type")
            if message and code and str(code) not in str(message):
                return f"{message} [{code}]"
            if message or code:
                return str(message or code)
        elif isinstance(error, str):
            return error
    if body is None:
        return ""
    return str(body)


def _short(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip().rstrip(".")
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"

"""`sd serve --api DIR` in-process (SPEC §36): one endpoint a template, its body checked
against the input schema, its answer against `/openapi.json`, the playground's keys and
allow-list, and the streams (struckdown's events, AG-UI)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_support import ANSWERS, BODY, check_against, refs, sse_data, template_folder, vercel_chunks
from pydantic import TypeAdapter
from starlette.testclient import TestClient
from web_support import use_scripted_model

from struckdown.web import WebConfig, create_app
from struckdown.web.pool import PoolLimits

KEY = "team-key"


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One server for the module (its worker pool starts once); each test its own requests."""
    tmp_path = tmp_path_factory.mktemp("api")
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_scripted_model(monkeypatch)
        folder = template_folder(tmp_path)
        config = WebConfig(mode="serve", tokens=(KEY,), api_root=folder, tools_file=tmp_path / "tools.py",
                           limits=PoolLimits(workers=1, time_limit_s=30.0))
        with TestClient(create_app(config), headers={"Authorization": f"Bearer {KEY}"}) as client:
            yield client


def test_openapi_lists_each_template_with_its_body_and_answer(http: TestClient) -> None:
    document = http.get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    names = ("approve", "greet", "reply", "rule")
    assert sorted(document["paths"]) == sorted(f"/v1/templates/{n}{end}" for n in names for end in ("", "/approval"))
    schemas = document["components"]["schemas"]
    assert schemas["ReplyInput"]["properties"] == {"customer": {"type": "string"}, "message": {"type": "string"}}
    assert schemas["ReplyInput"]["required"] == ["customer", "message"]
    assert list(schemas["ReplyOutput"]["properties"]["answers"]["properties"]) == ["complaint", "count", "reply"]
    assert list(schemas["GreetInput"]["properties"]) == ["name"]
    # a type with definitions of its own: lifted into components, and every $ref resolves there
    when = schemas["RuleOutput"]["properties"]["answers"]["properties"]["when"]
    assert "#/components/schemas/Rule__when__DateRule" in refs(when)
    assert schemas["Rule__when__DateRule"]["type"] == "object"
    found = refs(document)
    assert found and all(ref.removeprefix("#/components/schemas/") in schemas for ref in found), found


def test_a_run_answers_with_the_answers_usage_and_cost(http: TestClient) -> None:
    document = http.get("/openapi.json").json()
    answer = http.post("/v1/templates/reply", json=BODY)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    check_against(document, "/v1/templates/reply", 200, body)
    assert body["answers"] == ANSWERS
    assert body["usage"]["requests"] == 3 and body["halted"] is None
    assert body["cost"] == body["usage"]["cost"]


@pytest.mark.parametrize(
    ("body", "field", "error"),
    [
        ({"customer": "Ada"}, "message", "'message' is required"),
        ({"customer": 5, "message": "late"}, "customer", "customer: 5 is not of type 'string'"),
        ({**BODY, "colour": "red"}, "colour", "'colour' is not an input of reply (its inputs: customer, message)"),
    ],
)
def test_a_bad_body_is_422_naming_its_field(http: TestClient, body: dict[str, object], field: str, error: str) -> None:
    document = http.get("/openapi.json").json()
    answer = http.post("/v1/templates/reply", json=body)
    assert answer.status_code == 422
    assert answer.json() == {"field": field, "error": error}
    check_against(document, "/v1/templates/reply", 422, answer.json())


def test_keys_allow_list_and_unknown_templates(http: TestClient) -> None:
    document = http.get("/openapi.json").json()
    assert http.post("/v1/templates/reply", json=BODY, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert http.get("/openapi.json", headers={"Authorization": "Bearer nope"}).status_code == 401
    refused = http.post("/v1/templates/reply?model=test", json=BODY)
    assert refused.status_code == 403
    assert "test" in refused.json()["error"] and "allowed" in refused.json()["error"]
    check_against(document, "/v1/templates/reply", 403, refused.json())
    missing = http.post("/v1/templates/nope", json=BODY)
    assert missing.status_code == 404
    assert missing.json() == {"error": "no template 'nope' (see /openapi.json)"}


def test_the_event_stream_is_the_playgrounds(http: TestClient) -> None:
    answer = http.post("/v1/templates/reply", json=BODY, headers={"Accept": "text/event-stream"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    events = sse_data(answer.text)
    assert events[0] == {"type": "run_started", "slots": ["complaint", "count", "reply"]}
    assert "".join(e["delta"] for e in events if e["type"] == "token_delta") == "A short poem for Ada."
    assert events[-1]["type"] == "processing_complete" and events[-1]["result"] == ANSWERS


def test_ag_ui_events_validate_with_the_protocols_models(http: TestClient) -> None:
    from ag_ui.core import Event, EventType

    answer = http.post("/v1/templates/greet?protocol=ag-ui", json={"name": "Ada"})
    assert answer.status_code == 200, answer.text
    adapter: TypeAdapter[object] = TypeAdapter(Event)
    events = [adapter.validate_python(raw) for raw in sse_data(answer.text)]
    kinds = [e.type for e in events]  # type: ignore[attr-defined]
    assert kinds[:2] == [EventType.RUN_STARTED, EventType.STATE_SNAPSHOT]
    assert kinds[2:6] == [EventType.TOOL_CALL_START, EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END,
                          EventType.TOOL_CALL_RESULT]
    start, args, _end, result = events[2:6]
    assert start.tool_call_name == "lookup" and args.delta == '{"word": "Ada"}'  # type: ignore[attr-defined]
    assert result.content == '"Ada wrote the first program"'  # type: ignore[attr-defined]
    text = "".join(e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT)  # type: ignore[attr-defined]
    assert text == "Hello Ada, Ada wrote the first program!"
    delta = next(e for e in events if e.type == EventType.STATE_DELTA)
    assert [op.model_dump() for op in delta.delta] == [  # type: ignore[attr-defined]
        {"op": "add", "path": "/answers/greeting", "value": "Hello Ada, Ada wrote the first program!"}
    ]
    assert kinds[-1] == EventType.RUN_FINISHED
    assert events[-1].result["answers"] == {"greeting": "Hello Ada, Ada wrote the first program!"}  # type: ignore[attr-defined]


def test_an_unknown_protocol_is_refused(http: TestClient) -> None:
    answer = http.post("/v1/templates/greet?protocol=grpc", json={"name": "Ada"})
    assert (answer.status_code, answer.json()) == (400, {"error": "protocol is ag-ui or vercel-ai, not 'grpc'"})
    check_against(http.get("/openapi.json").json(), "/v1/templates/greet", 400, answer.json())


def test_the_docs_page_is_local(http: TestClient) -> None:
    page = http.get("/docs")
    assert page.status_code == 200 and "openapi.json" in page.text
    assert "<script src" not in page.text and "https://" not in page.text.replace("https://json-schema.org", "")


def test_sd_serve_api_refuses_a_folder_it_cannot_serve_before_listening(tmp_path: Path) -> None:
    from cli_support import sd

    missing = sd("serve", "--api", tmp_path / "nope", "--port", "0")
    assert (missing.exit_code, missing.output) == (2, f"error: --api {tmp_path / 'nope'}: not a folder\n")
    empty = sd("serve", "--api", tmp_path, "--port", "0")
    assert (empty.exit_code, empty.output) == (2, f"error: --api {tmp_path}: no .sd templates in it\n")
    (tmp_path / "bad.sd").write_text("Hi [[nope:x]]\n")
    bad = sd("serve", "--api", tmp_path, "--port", "0")
    assert bad.exit_code == 2
    assert bad.output.startswith(f"error: {tmp_path / 'bad.sd'}:1:6: unknown type 'nope'\n")


def test_the_vercel_ai_stream_parses_with_its_chunk_types(http: TestClient) -> None:
    answer = http.post("/v1/templates/greet?protocol=vercel-ai", json={"name": "Ada"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-vercel-ai-ui-message-stream"] == "v1"
    chunks = vercel_chunks(answer.text)
    kinds = [c.type if c is not None else "[DONE]" for c in chunks]
    assert kinds[:3] == ["start", "tool-input-start", "tool-input-available"]
    assert chunks[2].tool_name == "lookup" and chunks[2].input == {"word": "Ada"}
    output = next(c for c in chunks if c is not None and c.type == "tool-output-available")
    assert output.tool_call_id == chunks[1].tool_call_id and output.output == "Ada wrote the first program"
    text = "".join(c.delta for c in chunks if c is not None and c.type == "text-delta")
    assert text == "Hello Ada, Ada wrote the first program!"
    answer_part = next(c for c in chunks if c is not None and c.type == "data-answer")
    assert (answer_part.id, answer_part.data) == (
        "greeting", {"slot": "greeting", "value": "Hello Ada, Ada wrote the first program!", "final": True}
    )
    assert kinds[-3:] == ["data-result", "finish", "[DONE]"]
    assert chunks[-3].data["answers"] == {"greeting": "Hello Ada, Ada wrote the first program!"}


def test_the_vercel_ai_stream_carries_tool_approval_requests(http: TestClient) -> None:
    answer = http.post("/v1/templates/approve?protocol=vercel-ai", json={"name": "Ada"})
    chunks = vercel_chunks(answer.text)
    approval = next(c for c in chunks if c is not None and c.type == "tool-approval-request")
    assert (approval.approval_id, approval.tool_call_id) == ("greeting.1", "greeting.1")
    asked = next(c for c in chunks if c is not None and c.type == "tool-input-available")
    assert (asked.tool_call_id, asked.tool_name, asked.input) == ("greeting.1", "lookup", {"word": "Ada"})
    result = chunks[-3].data
    assert result["answers"] == {} and "signature" in result["state"]


def test_a_run_that_pauses_for_approval_is_409_with_its_requests_and_state(http: TestClient) -> None:
    document = http.get("/openapi.json").json()
    answer = http.post("/v1/templates/approve", json={"name": "Ada"})
    assert answer.status_code == 409
    body = answer.json()
    check_against(document, "/v1/templates/approve", 409, body)
    assert body["requests"] == [{"id": "greeting.1", "slot": "greeting", "tool_name": "lookup", "arguments": {"word": "Ada"}}]
    assert body["error"] == "the run paused for a tool approval: post {state, decisions} to /v1/templates/approve/approval"
    assert "signature" in body["state"]
    approved = http.post("/v1/templates/approve/approval", json={"state": body["state"], "decisions": {"greeting.1": True}})
    assert approved.status_code == 200, approved.text
    check_against(document, "/v1/templates/approve/approval", 200, approved.json())
    assert approved.json()["answers"] == {"greeting": "Hello Ada, Ada wrote the first program!"}
    # a state edited by the client is refused before anything runs
    edited = {**body["state"], "options": {"model": "openai:gpt-4o"}}
    refused = http.post("/v1/templates/approve/approval", json={"state": edited, "decisions": {"greeting.1": True}})
    assert refused.status_code == 403 and refused.json()["error"].startswith("this paused run cannot be resumed here")
    bad = http.post("/v1/templates/approve/approval", json={"state": body["state"]})
    assert bad.status_code == 400
    check_against(document, "/v1/templates/approve/approval", 400, bad.json())


def test_ag_ui_run_finished_of_a_paused_run_carries_its_requests_and_state(http: TestClient) -> None:
    from ag_ui.core import Event, RunFinishedEvent

    answer = http.post("/v1/templates/approve?protocol=ag-ui", json={"name": "Ada"})
    last = TypeAdapter(Event).validate_python(sse_data(answer.text)[-1])
    assert isinstance(last, RunFinishedEvent)
    assert last.result["requests"] == [
        {"id": "greeting.1", "slot": "greeting", "tool_name": "lookup", "arguments": {"word": "Ada"}}
    ]
    assert "signature" in last.result["state"]

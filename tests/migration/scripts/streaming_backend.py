"""A struckdown 0.x streaming backend: the run's events become server-sent events.

As 0.x's docs showed it, a handler table keyed by the event's type decides what each
event does, and every event goes to the browser as `data: <model_dump_json()>`.
"""

import asyncio
import json

from struckdown import LLM, LLMCredentials, complete_incremental_async

TEMPLATE = """<system>You are a friendly support agent for Acme Broadband.</system>
Customer message: {{ message }}

Is the customer angry? [[bool:angry]]

<checkpoint>Draft</checkpoint>

Write a short reply (the customer {% if angry %}is angry{% else %}is calm{% endif %}) to: {{ message }} [[reply]]"""

transcript = []


def on_start(event):
    transcript.append(f"start {event.slot_key} (segment {event.segment_index})")


def on_token(event):
    pass  # the browser appends event.delta


def on_slot(event):
    transcript.append(f"done {event.slot_key} = {event.result.output!r} (segment {event.segment_index})")


def on_checkpoint(event):
    transcript.append(f"checkpoint {event.segment_index}")


def on_complete(event):
    transcript.append(f"complete early={event.early_termination}")


def on_error(event):
    transcript.append(f"error {event.error_message}")


HANDLERS = {
    "stream_start": on_start,
    "token_delta": on_token,
    "slot_completed": on_slot,
    "checkpoint": on_checkpoint,
    "complete": on_complete,
    "error": on_error,
}


async def sse_stream(message):
    """What the web framework's StreamingResponse iterates over."""
    async for event in complete_incremental_async(
        TEMPLATE,
        model=LLM(model_name="gpt-4.1-mini"),
        credentials=LLMCredentials.from_env(),
        context={"message": message},
    ):
        handler = HANDLERS.get(event.type)
        if handler:
            handler(event)
        yield f"data: {event.model_dump_json()}\n\n"


async def main():
    sent = [line async for line in sse_stream("My internet has been down for three days!")]
    kinds = [json.loads(line[len("data: "):])["type"] for line in sent]
    for line in transcript:
        print(line)
    print("sent", len(sent), "events;", "types", sorted(set(kinds)))


if __name__ == "__main__":
    asyncio.run(main())

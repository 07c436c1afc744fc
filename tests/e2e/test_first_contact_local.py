"""Issue 40 against the real local model (scripts/local-llm.sh): naive times, one element per
list item, a deadline that ends a runaway, a model without vision told at once."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import struckdown as sd

SETTINGS = {"temperature": 0, "seed": 7}


def test_a_time_answer_keeps_no_offset_nobody_wrote(model: Any) -> None:
    """Item 20: llama.cpp's grammar for `format: time` required an offset (20:30:00+00:00)."""
    result = sd.complete("The meeting is at 3:30 PM. What time is the meeting? [[time:when]]", model=model,
                         settings=SETTINGS)  # fmt: skip
    assert isinstance(result["when"], dt.time)
    assert result["when"].tzinfo is None, result["when"]
    moment = sd.complete("The launch is on 2024-05-01 at 09:15. When is the launch? [[datetime:at]]", model=model,
                         settings=SETTINGS)["at"]  # fmt: skip
    # the schema no longer forces an offset (the time answer above shows it), but a model may still
    # write one of its own for a date-time: the moment itself must be the one the text names
    assert isinstance(moment, dt.datetime) and moment.replace(tzinfo=None) == dt.datetime(2024, 5, 1, 9, 15), moment


def test_a_list_answer_has_one_element_per_item(model: Any) -> None:
    """Item 23: `[[default{5}:ideas]]` came back as the whole list in one item, padded with "5"."""
    ideas = sd.complete("Give five names for a pet cat. [[default{5}:ideas]]", model=model, settings=SETTINGS)["ideas"]
    assert len(ideas) == 5
    assert all(isinstance(i, str) and i.strip() and not i.strip().isdigit() for i in ideas), ideas
    assert all("\n" not in i and "," not in i for i in ideas), ideas


@pytest.mark.alone  # with another test's request queued on the server's one slot, 3 s pass before a token
def test_max_seconds_ends_a_runaway_poem(model: Any) -> None:
    """Item 17: a long free-text answer at temperature 1.5 is cut at its deadline, kept, flagged."""
    result = sd.complete(  # the loop guard off: a poem it cut as a loop would end before its deadline
        "Write a very long poem about the sea. [[poem|temperature=1.5, max_tokens=4096, loop_guard=false]]",
        model=model, max_seconds=3,
    )
    slot = result.results["poem"]
    assert slot.truncated and slot.output  # the text so far
    assert slot.elapsed_ms < 30_000


def test_an_image_to_a_model_without_vision_is_one_request_and_a_clear_error(model: Any) -> None:
    """Items 8/19: llama.cpp answers HTTP 500 "image input is not supported": not retried."""
    from pathlib import Path

    receipt = Path(__file__).resolve().parents[2] / "examples" / "receipt.png"
    with pytest.raises(sd.BadRequestError) as info:
        sd.complete("What is the total? {{ receipt }} [[number:total]]", {"receipt": sd.Image(receipt)}, model=model)
    assert info.value.what == "the model cannot take images"
    assert info.value.hint.startswith("the model cannot take images")

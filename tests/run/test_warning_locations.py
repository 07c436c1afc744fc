"""Issue 40 item 14: struckdown's warnings name the caller's line (the `sd.complete(...)`
in the user's code), not a line of the engine; where the caller is not on the stack (the
sync iterator runs the loop in a thread of its own), the template's line."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

from pydantic_ai.usage import UsageLimits
from scripted import Script

import struckdown as sd

THIS_FILE = str(Path(__file__))


def test_run_warnings_point_at_the_line_that_started_the_run() -> None:
    script = Script(lambda call: "hi")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        sd.complete("Hi {{ nme }}\n[[a|max_iter=9, max_seconds=50]]", model=script.model(),
                    limits=UsageLimits(request_limit=3), max_seconds=5)  # fmt: skip
    assert [(w.filename, w.lineno, str(w.message)) for w in caught] == [
        (THIS_FILE, line, "undefined variable 'nme' (line 1): not in the context and not answered before"),
        (THIS_FILE, line, "template asked for max_iter=9 but the caller's ceiling is 3; using 3"),
        (THIS_FILE, line, "template asked for max_seconds=50 but the caller's ceiling is 5; using 5"),
    ]


def test_without_the_caller_on_the_stack_a_warning_names_the_templates_line(tmp_path: Path) -> None:
    template = tmp_path / "greet.sd"
    template.write_text("Hello.\n\nHi {{ nme }} [[a]]\n")
    program = sd.parse(template.read_text(), template_path=template)
    script = Script(lambda call: "hi")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = list(sd.complete_incremental(program, model=script.model()))  # the run is in a thread of its own
    assert events[-1].type == "processing_complete"
    assert [(w.filename, w.lineno) for w in caught if "undefined variable" in str(w.message)] == [(str(template), 3)]


def test_a_warning_is_shown_once_per_calling_line() -> None:
    script = Script(lambda call: "hi")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            sd.complete("Hi {{ who }} [[a]]", model=script.model())
    assert [str(w.message) for w in caught] == [
        "undefined variable 'who' (line 1): not in the context and not answered before"
    ]

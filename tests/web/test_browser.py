"""The playground in a real headless Chromium (Debian's build) driven by Playwright.

Run with `pytest -m browser`. `sd edit` runs as its own process on 127.0.0.1 with a
scripted model (tests/support/web_models.py). A failing test leaves a screenshot in
`SD_BROWSER_ARTIFACTS` (default: .browser-artifacts/ at the repository root).
SD_SCREENSHOT=docs/playground.png writes the page after the run there (the docs'
screenshot comes from this test).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from process_gates import Release
from web_support import scripted_model_env

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("SD_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("SD_BROWSER_ARTIFACTS", REPO / ".browser-artifacts"))
TOOLS = 'def lookup(word: str) -> str:\n    """Look a word up."""\n    return f"{word} wrote the first program"\n'
START = "Greet {{ name }} warmly.\n\n[[greeting|use_tools=true]]\n\nNow a poem.\n[[poem]]\n\nWas that friendly?\n"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "templates"
    root.mkdir()
    (root / "hello.sd").write_text(START)
    (root / "tools.py").write_text(TOOLS)
    (root / "ada.json").write_text('{"name": "Ada"}\n')
    return root


@pytest.fixture
def playground(folder: Path, tmp_path: Path) -> Iterator[tuple[str, Release]]:
    """`sd edit FOLDER` on a free port; yields its URL and the gate that lets the
    scripted model finish its answer (`gate.release()`)."""
    gate = Release(tmp_path / "gate")
    with editing(folder, tmp_path, scripted_model_env(), {"SD_TEST_GATE": str(gate.path)}) as url:
        try:
            yield url, gate
        finally:
            gate.release()


@contextmanager
def editing(folder: Path, tmp_path: Path, model_env: dict[str, str], gates: dict[str, str]) -> Iterator[str]:
    """`sd edit FOLDER` as its own process on a free port, with the scripted model
    `model_env` names; yields the page's URL."""
    env = {**os.environ, **model_env, **gates, "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [sys.executable, "-m", "struckdown.cli", "edit", str(folder), "--no-browser", "--port", "0",
         "--tools", str(folder / "tools.py")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"on (http://127\.0\.0\.1:\d+/\?token=\S+)", line)
        assert match, f"sd edit printed {line!r}"
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def page(request: pytest.FixtureRequest) -> Iterator[object]:
    from playwright.sync_api import expect, sync_playwright

    # `expect` waits for what the page shows (5 s by default, apart from the page's own
    # timeout): a run on a loaded 2-core host took longer than that to report "Done.".
    expect.set_options(timeout=60_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1400, "height": 860})
        page = context.new_page()
        page.set_default_timeout(15_000)
        try:
            yield page
        finally:
            if getattr(request.node, "failed_call", False):
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
            browser.close()


def test_edit_check_fix_run_and_read_the_result(playground: tuple[str, Release], page: object, folder: Path) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    url, gate = playground
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(url)
    expect(page.locator("#filename")).to_have_text("hello.sd")
    expect(page.locator("#template-list li")).to_have_text(["hello.sd"])
    expect(page.locator("#diagnostics li")).to_have_text(re.compile(r"^3:1: warning: slot 'greeting' sets use_tools=true"))
    page.select_option("#tools-select", "tools.py")  # the warning was right: pick the tools
    expect(page.locator("#diagnostics li")).to_have_count(0)
    page.locator("#context-list li", has_text="ada.json").click()
    expect(page.locator("#context")).to_have_value('{"name": "Ada"}\n')

    # a broken slot on line 9: the diagnostic shows at that line, in the gutter and the list
    source = page.locator("#source")
    source.click()
    page.keyboard.press("Control+End")
    source.press_sequentially("[[bool:friendly|]]")
    broken_line = page.locator("#gutter div[data-line='9']")
    expect(broken_line).to_have_class("error")
    expect(page.locator("#diagnostics li")).to_have_count(1)
    expect(page.locator("#diagnostics li")).to_have_attribute("data-line", "9")
    expect(page.locator("#diagnostics li")).to_contain_text(re.compile(r"^9:\d+: error: "))
    expect(page.locator("#filename")).to_have_text("hello.sd •")

    # fixed: the diagnostic goes away
    for _ in range(3):
        page.keyboard.press("Backspace")
    source.press_sequentially("]]")
    expect(page.locator("#diagnostics li")).to_have_count(0)
    expect(broken_line).not_to_have_class("error")

    # saved inside the folder
    page.keyboard.press("Control+s")
    expect(page.locator("#status")).to_have_text("Saved hello.sd.")
    assert (folder / "hello.sd").read_text() == START + "[[bool:friendly]]"

    # run
    page.locator("#model-input").fill("")  # the environment's model: the scripted one
    page.click("#run")

    tool = page.locator(".tool-card[data-tool='lookup']")
    expect(tool.locator(".head")).to_have_text('greeting → lookup(word="Ada")')
    expect(tool.locator(".output")).to_contain_text("= Ada wrote the first program")

    greeting = page.locator(".slot-card[data-slot='greeting'] .text")
    expect(greeting).to_have_text("Hello Ada, Ada wrote the first program!")

    # the poem's first word has streamed; the model waits for the gate, so the run is still going
    poem = page.locator(".slot-card[data-slot='poem'] .text")
    expect(poem).to_have_text("A ")
    expect(page.locator("#status")).to_have_text("Running…")
    expect(page.locator("#results tbody tr")).to_have_count(0)
    gate.release()

    expect(poem).to_have_text("A short poem for Ada.")
    expect(page.locator("#status")).to_have_text("Done.")
    rows = page.locator("#results tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0).locator("td")).to_have_text(["greeting", "respond", "Hello Ada, Ada wrote the first program!"])
    expect(rows.nth(1).locator("td")).to_have_text(["poem", "respond", "A short poem for Ada."])
    expect(rows.nth(2).locator("td")).to_have_text(["friendly", "bool", "true"])
    expect(page.locator("#usage")).to_have_text(re.compile(r"^4 requests · 1 tool call · \d+ in \+ \d+ out = \d+ tokens$"))
    expect(page.locator("#events li[data-type='token_delta']")).to_have_count(12)

    # the plan
    page.click(".tabs button[data-tab='plan-panel']")
    expect(page.locator("#plan")).to_contain_text("slot friendly: bool, one answer")
    page.click(".tabs button[data-tab='run-panel']")
    origin = url.split("/?")[0] + "/"
    assert requested and all(r.startswith(origin) for r in requested), requested  # no CDN, no network
    shot = os.environ.get("SD_SCREENSHOT")
    if shot:
        page.screenshot(path=shot)


def test_a_batch_from_an_uploaded_file_shows_progress_and_a_download(
    playground: tuple[str, Release], page: object, tmp_path: Path
) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    url, gate = playground
    gate.release()
    page.goto(url)
    expect(page.locator("#filename")).to_have_text("hello.sd")
    page.locator("#source").fill("Greet {{ name }}. Friendly?\n[[bool:friendly]]\n")
    rows = tmp_path / "people.csv"
    rows.write_text("name\nAda\nGrace\n")
    page.click(".tabs button[data-tab='batch-panel']")
    page.set_input_files("#batch-file", str(rows))
    page.click("#batch-run")
    expect(page.locator("#batch-status")).to_have_text("Done: 2 rows, 0 failed.")
    expect(page.locator("#batch-progress")).to_have_attribute("max", "2")
    with page.expect_download() as download_info:
        page.click("#batch-downloads a:has-text('Download CSV')")
    downloaded = Path(download_info.value.path())
    assert downloaded.read_text().splitlines() == ["name,friendly", "Ada,true", "Grace,true"]


def test_serve_runs_a_typed_template_with_the_allowed_model(page: object, tmp_path: Path) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    env = {**os.environ, "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("STRUCKDOWN_API_KEY", None)
    command = [sys.executable, "-m", "struckdown.cli", "serve", "--port", "0", "--api-key", "team", "--models", "test"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"on (http://127\.0\.0\.1:\d+/)$", line.strip())
        assert match, f"sd serve printed {line!r}"
        page.goto(match.group(1) + "?token=team")
        expect(page.locator("#mode")).to_have_text("serve")
        expect(page.locator("#files")).to_be_hidden()
        expect(page.locator("#model-select option")).to_have_text(["test"])
        page.locator("#source").fill("Is water wet?\n[[bool:wet]]\n[[int:n]]\n")
        expect(page.locator("#diagnostics li")).to_have_count(0)
        page.click("#run")
        expect(page.locator("#status")).to_have_text("Done.")
        rows = page.locator("#results tbody tr")
        expect(rows.nth(0).locator("td")).to_have_text(["wet", "bool", "false"])
        expect(rows.nth(1).locator("td")).to_have_text(["n", "int", "0"])
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_approve_a_call(playground: tuple[str, Release], page: object) -> None:
    """SPEC §12 on the page (issue 20): a call that needs approval shows Allow / Deny; Allow
    continues the paused run, the tool runs and the typed result arrives."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    url, gate = playground
    gate.release()
    page.goto(url)
    expect(page.locator("#filename")).to_have_text("hello.sd")
    page.select_option("#tools-select", "tools.py")
    page.locator("#context-list li", has_text="ada.json").click()
    page.locator("#source").fill("Greet {{ name }} warmly.\n\n[[greeting|use_tools=true, approve=lookup]]\n\nFriendly?\n"
                                 "[[bool:friendly]]\n")
    expect(page.locator("#diagnostics li")).to_have_count(0)
    page.locator("#model-input").fill("")
    page.click("#run")

    card = page.locator(".approval-card[data-request='greeting.1']")
    expect(card.locator(".head")).to_have_text('greeting: allow lookup(word="Ada")?')
    expect(page.locator("#status")).to_have_text("Waiting for approval: 1 call(s).")
    expect(page.locator(".tool-card")).to_have_count(0)  # nothing ran before the decision
    card.locator("button[data-decision='allow']").click()

    tool = page.locator(".tool-card[data-tool='lookup']")
    expect(tool.locator(".output")).to_contain_text("= Ada wrote the first program")
    expect(card).to_have_class(re.compile(r"\ballowed\b"))
    expect(page.locator("#status")).to_have_text("Done.")
    rows = page.locator("#results tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td")).to_have_text(["greeting", "respond", "Hello Ada, Ada wrote the first program!"])
    expect(rows.nth(1).locator("td")).to_have_text(["friendly", "bool", "true"])
    expect(page.locator("#usage")).to_have_text(re.compile(r"^3 requests · 1 tool call · "))


def test_a_record_fills_in_on_its_card(folder: Path, tmp_path: Path, page: object) -> None:
    """SPEC §26 on the page (issue 36): a typed record's card shows each partial value as the
    model writes it, then the final answer. The model's pieces after the first each wait for a
    gate the test opens once the page shows the value so far (web_models.record_steps)."""
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    gates = [Release(tmp_path / f"piece-{number}") for number in (1, 2)]
    piece_gates = {"SD_TEST_PIECE_GATES": str(tmp_path / "piece-")}
    with editing(folder, tmp_path, scripted_model_env("web_models:record_steps"), piece_gates) as url:
        try:
            page.goto(url)
            expect(page.locator("#filename")).to_have_text("hello.sd")
            page.locator("#source").fill("Who was she?\n[[record:who]]\n")
            expect(page.locator("#diagnostics li")).to_have_count(0)
            page.locator("#model-input").fill("")  # the environment's model: the scripted one
            page.click("#run")

            card = page.locator(".slot-card[data-slot='who']")
            text = card.locator(".text")
            # the first piece: a name cut short (the worker may take a while to start on a busy machine)
            expect(text).to_have_text(shown({"name": "Ad"}), timeout=30_000)
            expect(card).to_have_attribute("data-complete", "")
            expect(page.locator("#status")).to_have_text("Running…")
            gates[0].release()

            expect(text).to_have_text(shown({"name": "Ada", "born": 18}))  # the name is done, the year grows
            expect(card).to_have_attribute("data-complete", "name")
            expect(page.locator("#status")).to_have_text("Running…")
            expect(page.locator("#results tbody tr")).to_have_count(0)
            gates[1].release()

            expect(page.locator("#status")).to_have_text("Done.")
            expect(text).to_have_text(shown({"name": "Ada", "born": 1815}))
            expect(card).to_have_attribute("data-complete", "name,born")
            expect(card.locator(".head")).to_have_text("who: record")
            row = page.locator("#results tbody tr")
            expect(row).to_have_count(1)
            expect(row.locator("td")).to_have_text(["who", "record", shown({"name": "Ada", "born": 1815})])
            partials = page.locator("#events li[data-type='slot_partial']")
            expect(partials).to_have_count(3)  # one per piece: none coalesced, none repeated
            expect(page.locator("#events li[data-type='slot_retracted']")).to_have_count(0)
        finally:
            for gate in gates:
                gate.release()


def shown(value: object) -> str:
    """A value as the page writes it (`JSON.stringify(value, null, 2)`)."""
    return json.dumps(value, indent=2)

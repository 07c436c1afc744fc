"""Actions: @fetch is opt-in, side-effecting actions join guards, failures are clear."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from typing import Any

import pytest
from http_support import http_serving
from scripted import Call, Script, answered_last

import struckdown as sd


@pytest.fixture()
def page_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            body = b"<html><body><h1>Title</h1><p>Hello <b>there</b></p><script>x()</script></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with http_serving(Handler) as base:
        yield f"{base}/"


def test_fetch_is_off_unless_allowed(page_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STRUCKDOWN_ALLOW_FETCH", raising=False)
    with pytest.raises(sd.TemplateRuntimeError, match="STRUCKDOWN_ALLOW_FETCH=1"):
        sd.complete(f'[[@fetch:page|url="{page_server}"]]')


def test_fetch_returns_text(page_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_ALLOW_FETCH", "1")
    script = Script(lambda c: c.last_user)
    result = sd.complete(f'[[@fetch:page|url="{page_server}"]]Read: {{{{ page }}}} [[a]]', model=script.model())
    assert result["page"] == "# Title\n\nHello **there**"  # markdown that keeps emphasis (issue 32)
    assert script.calls[0].last_user == "Read: # Title\n\nHello **there**"


def test_side_effecting_action_waits_for_the_guard() -> None:
    fired: list[str] = []
    sd.register_action("notify_test", lambda msg: fired.append(msg) or "sent", side_effects=True)

    def answer(call: Call) -> Any:
        return {"triggered": True, "reason": "no"} if call.schema else "x"

    script = Script(answer, gate=answered_last(lambda call: bool(call.schema)))  # the verdict comes last
    with pytest.raises(sd.Halted):
        sd.complete("Judge [[halt:g]][[@notify_test:n|hello]]", model=script.model())
    assert fired == []


def test_a_failing_action_names_itself() -> None:
    def broken() -> None:
        raise OSError("disk full")

    sd.register_action("broken_test", broken)
    with pytest.raises(sd.TemplateRuntimeError, match="action @broken_test failed: OSError: disk full"):
        sd.complete("[[@broken_test:x]]")


def test_fetch_limits_are_the_hosts_not_the_templates() -> None:
    with pytest.raises(sd.TemplateSyntaxError, match="unknown option 'max_bytes'.*caps are the host's"):
        sd.Environment().parse('[[@fetch:page|url="https://example.org", max_bytes=999999999]]')
    # 0.18's timeout= is accepted, and only lowers the host's cap (test_second_pass_forms.py)
    sd.Environment().parse('[[@fetch:page|url="https://example.org", timeout=3600]]')


def test_the_html_cleaner_is_linear_in_the_page() -> None:
    """Issue 24 item 7: 20,000 unclosed <script tags made the regex cleaner quadratic (it
    rescanned the rest of the page from each one: minutes for this page); the one-pass
    parser reads it once."""
    from struckdown.actions import html_to_text

    assert html_to_text("<h1>T</h1><p>a &amp; b</p><script>x()</script><ul><li>one</li></ul>") == "# T\na & b\n- one"
    small, large = "<script " * 2_000 + "<p>end</p>", "<script " * 20_000 + "<p>end</p>"
    assert html_to_text(small) == html_to_text(large)  # a hostile page still gives an answer
    assert html_to_text("<p>" + "word " * 100_000 + "</p>").count("word") == 100_000


ORDINARY_PAGE = (
    "<!doctype html><html><head><title>T</title><style>p{}</style></head><body>"
    "<h2>Title</h2><p>a &amp; b &lt;c&gt;</p><!-- note --><ul><li>one</li><li>two<br/>lines</li></ul>"
    "<script>if (a < b) { x() }</script><div>caf&eacute; &#65;&#x42;</div></body></html>"
)


@pytest.fixture(params=["lxml", "scanner"])
def html_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways html_to_text reads a page: lxml (the search extra) and the scanner without it."""
    import struckdown.actions.html_text as html_text

    if request.param == "scanner":
        monkeypatch.setattr(html_text, "lxml_etree", lambda: None)
    else:
        assert html_text.lxml_etree() is not None
    return str(request.param)


def test_html_to_text_reads_an_ordinary_page_the_same_with_and_without_lxml(html_path: str) -> None:
    from struckdown.actions import html_to_text

    assert html_to_text(ORDINARY_PAGE) == "T\n## Title\na & b <c>\n- one\n- two\nlines\ncafé AB"


def test_a_long_numeric_character_reference_does_not_fail_the_action(html_path: str) -> None:
    """Issue 39 N12: `&#` and 5,000 digits made Python's unescape raise ValueError (int
    conversion limit), which failed the @markdownify action."""
    page = "<p>before &#" + "9" * 5000 + "; &#x" + "F" * 5000 + "; &#1114112; &#0000065; after</p>"
    assert sd.complete("[[@markdownify:md|page]]", {"page": page})["md"] == "before \ufffd \ufffd \ufffd A after"


def test_html_past_the_cap_is_cut_with_a_note(html_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import struckdown.actions.html_text as html_text

    monkeypatch.setattr(html_text, "HTML_MAX_CHARS", 100)
    page = "<p>" + "word " * 100 + "</p>"
    text = sd.complete("[[@markdownify:md|page]]", {"page": page})["md"]
    assert text == "word " * 19 + "wo\n\n[truncated: the HTML had 507 characters; the first 100 were read]"


def test_pythons_quadratic_html_parser_never_reads_a_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39 N12: on this interpreter `html.parser` took 10 s for 80 KB of `<a<a<a…`
    and 150 s for `<a <a <a …` (rescanning the unfinished tag from each `<`; see
    bench/html_text.py). Neither html_to_text path hands a page to it."""
    import html.parser

    import struckdown.actions.html_text as html_text

    fed: list[int] = []
    monkeypatch.setattr(html.parser.HTMLParser, "feed", lambda self, data: fed.append(len(data)))
    for hostile in ("<a" * 40_000, "<a " * 27_000, "<!--" * 20_000):
        sd.complete("[[@markdownify:md|page]] end", {"page": "<p>x</p>" + hostile})  # markdown through lxml
        assert html_text.html_to_text("<p>x</p>" + hostile) == "x"
        assert html_text._with_scanner("<p>x</p>" + hostile) == "x\n"
    assert fed == []

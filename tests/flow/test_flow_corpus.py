"""SPEC §33: a corpus of seeded leaking templates, each refused by `sd check --flow` at the
sink's line:column (the `[[` of the slot named in `sink`), with the chain that led there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_support import plain_environment, sd  # noqa: F401 - the autouse fixture

HERE = Path(__file__).parent
WRITE = ("--tools", str(HERE / "flow_tools.py"))
CLAIM = ("--tools", str(HERE / "claim_tools.py"))
SEARCH = ("--tools", str(HERE / "search_tools.py"))
REMOTE = ("--model", "openai:gpt-4o-mini")
LOCAL = ("--model", "test")


@dataclass(frozen=True)
class Leak:
    id: str
    template: str
    args: tuple[str, ...]
    sink: str  # the text at the sink: its first occurrence is where the error points
    says: str  # what the one line says (the refusal and its chain)


def _pos(template: str, sink: str) -> tuple[int, int]:
    index = template.index(sink)
    before = template[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


CORPUS = [
    # (1) a private value in a request to a remote model
    Leak("direct", "Customer email: {{ email }}\nWrite a reply. [[reply]]\n", ("--private", "email", *REMOTE),
         "[[reply]]", "private value 'email' reaches remote model 'gpt-4o-mini' in the request of slot 'reply': email → reply"),
    Leak("column", "Reply to {{ name }} now: [[reply]]", ("--private", "name", *REMOTE),
         "[[reply]]", "private value 'name' reaches remote model"),
    Leak("typed", "Is {{ ssn }} valid? [[bool:valid]]", ("--private", "ssn", *REMOTE),
         "[[bool:valid]]", "private value 'ssn'"),
    Leak("condition", "{% if vip %}Be kind.{% endif %}\n\n[[reply]]", ("--private", "vip", *REMOTE),
         "[[reply]]", "private value 'vip'"),
    Leak("loop", "Orders:\n{% for o in orders %}- {{ o }}\n{% endfor %}\nSummarise. [[summary]]",
         ("--private", "orders", *REMOTE), "[[summary]]", "orders → summary"),
    Leak("system", "<system>The customer is {{ name }}.</system>\nGreet them. [[greeting]]",
         ("--private", "name", *REMOTE), "[[greeting]]", "private value 'name'"),
    Leak("carried", "<system global>Customer: {{ name }}</system>\nHi [[a|model=test]]\n<checkpoint>\nNext [[b]]",
         ("--private", "name", *REMOTE), "[[b]]", "private value 'name' reaches remote model 'gpt-4o-mini' in the request of slot 'b'"),
    Leak("chain", "{{ email }}\nNotes: [[think:notes|model=test]]\n<checkpoint>\n{{ notes }}\nReply: [[reply]]",
         ("--private", "email", *REMOTE), "[[reply]]", "email → notes → reply"),
    Leak("chain-two", "{{ email }} [[think:a|model=test]]\n<checkpoint>\n{{ a }} [[think:b|model=test]]\n"
         "<checkpoint>\n{{ b }} [[c]]", ("--private", "email", *REMOTE), "[[c]]", "email → a → b → c"),
    Leak("same-conversation", "{{ email }}\n[[think:a|model=test]]\nNow answer. [[reply]]",
         ("--private", "email", *REMOTE), "[[reply]]", "in the request of slot 'reply'"),
    Leak("slot-model", "{{ ssn }}\nLocal: [[think:t]]\nRemote: [[reply|model=openai:gpt-4o]]",
         ("--private", "ssn", *LOCAL), "[[reply|", "remote model 'gpt-4o'"),
    Leak("closed-still-private", "{{ ssn }} [[pick:kind|a,b,model=test]]\n<checkpoint>\n{{ kind }} [[reply]]",
         ("--private", "ssn", *REMOTE), "[[reply]]", "ssn → kind → reply"),
    Leak("second-of-two", "Hello [[a]]\n{{ email }}\n[[b]]", ("--private", "email", *REMOTE),
         "[[b]]", "in the request of slot 'b'"),
    Leak("jinja-model", "{{ email }} [[reply|model={{ m }}]]", ("--private", "email", *LOCAL),
         "[[reply|", "remote model '{{ m }}'"),
    Leak("list-of-names", "{{ a }} {{ b }} [[reply]]", ("--private", "b,a", *REMOTE), "[[reply]]", "private value 'a'"),
    # (2) untrusted free text in the request of a slot that can call an external tool
    Leak("untrusted-direct", "Page: {{ page }}\nAct on it. [[act|use_tools=true]]",
         ("--untrusted", "page", *LOCAL, *WRITE), "[[act|", "untrusted text 'page' reaches slot 'act', which can call "
         "the external tool 'send_email': page → act"),
    Leak("untrusted-chain", "{{ page }} [[summary]]\n<checkpoint>\nSummary: {{ summary }}\n[[act|use_tools=true]]",
         ("--untrusted", "page", *LOCAL, *WRITE), "[[act|", "page → summary → act"),
    Leak("untrusted-condition", "{% if page %}x{% endif %}\n[[act|use_tools=true]]",
         ("--untrusted", "page", *LOCAL, *WRITE), "[[act|", "untrusted text 'page'"),
    Leak("tool-results", "Find the news and post it. [[act|use_tools=true]]",
         ("--private", "unused", *LOCAL, *SEARCH), "[[act|", "untrusted text \"act's tool results\" reaches slot 'act', "
         "which can call the external tool 'post'"),
    Leak("untrusted-respond-chain", "{{ mail }}\n[[respond:gist|model=test]]\n<checkpoint>\n{{ gist }}\n"
         "Do it. [[act|use_tools=true]]", ("--untrusted", "mail", *LOCAL, *CLAIM), "[[act|", "mail → gist → act"),
    # (3) a private value in an external tool's arguments
    Leak("tool-args", "Customer email: {{ email }}\n[[act|use_tools=true]]", ("--private", "email", *LOCAL, *CLAIM),
         "[[act|", "private value 'email' can reach the arguments of the external tool 'file_claim' from slot 'act'"),
    Leak("tool-args-not-all", "{{ ssn }} {{ email }}\n[[act|use_tools=true]]",
         ("--private", "ssn,email", *LOCAL, *CLAIM), "[[act|", "private value 'email'"),
    Leak("tool-args-chain", "{{ email }} [[think:n]]\n<checkpoint>\n{{ n }}\n[[act|use_tools=true]]",
         ("--private", "email", *LOCAL, *CLAIM), "[[act|", "email → n → act → file_claim"),
    Leak("tool-args-other-tool", "{{ ssn }}\n[[act|use_tools=true]]", ("--private", "ssn", *LOCAL, *WRITE),
         "[[act|", "external tool 'send_email'"),
]


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 20 and len({leak.id for leak in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("leak", CORPUS, ids=lambda leak: leak.id)
def test_every_leak_is_refused_at_its_sink(leak: Leak, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-used")  # the model is built to be classed, never called
    path = tmp_path / "leak.sd"
    path.write_text(leak.template)
    result = sd("check", path, "--flow", *leak.args)
    line, column = _pos(leak.template, leak.sink)
    errors = [row for row in result.output.splitlines() if ": error: " in row]
    assert result.exit_code == 1, result.output
    assert errors[0].startswith(f"{path}:{line}:{column}: error: "), result.output
    assert leak.says in errors[0], result.output


@pytest.mark.parametrize("leak", CORPUS, ids=lambda leak: leak.id)
def test_without_labels_nothing_is_refused(leak: Leak, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-used")
    path = tmp_path / "leak.sd"
    path.write_text(leak.template)
    args = [a for i, a in enumerate(leak.args)
            if a not in ("--private", "--untrusted") and leak.args[i - 1] not in ("--private", "--untrusted")]
    result = sd("check", path, "--flow", *args)
    assert result.exit_code == 0, result.output
    assert ": error: " not in result.output

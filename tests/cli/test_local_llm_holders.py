"""Issue 48 item 10: one local model server (scripts/local-llm.sh) serves every caller on
its port; a caller that stops it no longer stops it under another. `start` adds the caller
to the server's holders, `stop` removes it and stops the server only when nobody holds it.

The server is a fake `llama-server` (a small HTTP server answering /health, writing each
start and stop to a log) in a temporary cache, so no model is built or started. The
holders are `cat` processes the test ends when it likes (STRUCKDOWN_LLM_HOLDER names
them); one run relies on the default holder, the calling shell. The Makefile check runs
in the README run; the script's runs are `process` tests."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local-llm.sh"

FAKE_SERVER = """\
import http.server, os, signal, sys

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
log = os.environ["FAKE_LLM_LOG"]


def note(word):
    with open(log, "a") as f:
        f.write(word + "\\n")


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", port), Health)
signal.signal(signal.SIGTERM, lambda *a: (note("stop"), os._exit(0)))
note("start")
server.serve_forever()
"""


def test_every_make_recipe_that_starts_the_server_stops_it_from_the_same_shell() -> None:
    """The holder is the shell that runs `start`: a recipe whose `start` and trap'd `stop` are
    separate recipe lines (separate shells) would hold the server for a shell that is gone,
    and the e2e recipe's last line ran after its trap had stopped the server."""
    recipes = re.findall(r"^([\w-]+):[^\n]*\n((?:\t[^\n]*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    starting = {name: body for name, body in recipes if "$(LLM) start" in body}
    assert sorted(starting) == ["demo", "e2e", "llm-start"]
    for name in ("demo", "e2e"):
        lines = re.split(r"(?<!\\)\n", starting[name].strip("\n"))  # recipe lines (a \ continues one)
        assert len(lines) == 1, (name, lines)  # one shell: start, the run, and the trap that stops
        assert lines[0].lstrip("\t@").startswith("trap 'bash $(LLM) stop' EXIT INT TERM;"), name


@pytest.fixture
def llm(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The script's environment: a temporary cache, the fake server and a free port."""
    server = tmp_path / "bin" / "llama-server"  # the script knows its server by that name
    server.parent.mkdir()
    server.write_text(f"#!{sys.executable}\n" + FAKE_SERVER)
    server.chmod(0o755)
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "STRUCKDOWN_LLM_CACHE": str(tmp_path / "cache"),
        "STRUCKDOWN_LLM_SERVER": str(server), "STRUCKDOWN_LLM_MODEL": str(tmp_path / "model.gguf"),
        "STRUCKDOWN_LLM_PORT": str(port), "FAKE_LLM_LOG": str(tmp_path / "server.log"),
        "PIP_NO_INDEX": "1",  # nothing is built or fetched: a script that tried would fail at once
    }  # fmt: skip
    yield env
    subprocess.run(["bash", str(SCRIPT), "stop", "--force"], env=env, capture_output=True, check=False)


def llm_sh(env: dict[str, str], *args: str, holder: object = None) -> subprocess.CompletedProcess[str]:
    extra = {} if holder is None else {"STRUCKDOWN_LLM_HOLDER": str(holder)}
    return subprocess.run(["bash", str(SCRIPT), *args], env={**env, **extra}, capture_output=True, text=True, check=False)


def server_log(env: dict[str, str]) -> list[str]:
    path = Path(env["FAKE_LLM_LOG"])
    return path.read_text().split() if path.exists() else []


def running(env: dict[str, str]) -> bool:
    return llm_sh(env, "status").returncode == 0


class Holder:
    """A process that holds the server until the test ends it."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.pid = self.process.pid

    def end(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


@pytest.mark.process
def test_the_first_caller_to_stop_leaves_the_server_to_the_other(llm: dict[str, str]) -> None:
    demo, e2e = Holder(), Holder()
    try:
        url = f"http://127.0.0.1:{llm['STRUCKDOWN_LLM_PORT']}/v1\n"
        assert llm_sh(llm, "start", holder=demo.pid).stdout == url
        assert llm_sh(llm, "start", holder=e2e.pid).stdout == url
        assert server_log(llm) == ["start"]  # one server for both
        stopped = llm_sh(llm, "stop", holder=demo.pid)
        assert stopped.returncode == 0
        assert f"still used by {e2e.pid}: left running" in stopped.stderr
        assert running(llm) and server_log(llm) == ["start"]
        assert llm_sh(llm, "stop", holder=e2e.pid).returncode == 0
        assert not running(llm) and server_log(llm) == ["start", "stop"]
    finally:
        demo.end(), e2e.end()


@pytest.mark.process
def test_a_holder_that_ended_without_stopping_holds_nothing(llm: dict[str, str]) -> None:
    killed, other = Holder(), Holder()
    try:
        llm_sh(llm, "start", holder=killed.pid), llm_sh(llm, "start", holder=other.pid)
        killed.end()  # a demo killed before its trap ran
        assert llm_sh(llm, "stop", holder=other.pid).returncode == 0
        assert not running(llm) and server_log(llm) == ["start", "stop"]
    finally:
        other.end()


@pytest.mark.process
def test_the_calling_shell_is_the_default_holder_and_a_name_holds_until_released(llm: dict[str, str]) -> None:
    # as the Makefile's recipes do: the shell that starts the server releases it in its trap
    script = f"trap 'bash {SCRIPT} stop' EXIT; bash {SCRIPT} start >/dev/null && bash {SCRIPT} status >/dev/null"
    shell = subprocess.run(["bash", "-c", script], env=llm, capture_output=True, text=True, check=False)
    assert shell.returncode == 0, shell.stderr
    assert not running(llm) and server_log(llm) == ["start", "stop"]  # its own start and stop: nobody left

    assert llm_sh(llm, "start", holder="make-llm-start").returncode == 0  # `make llm-start`
    shell = subprocess.run(["bash", "-c", script], env=llm, capture_output=True, text=True, check=False)
    assert "still used by make-llm-start: left running" in shell.stderr
    assert running(llm)
    assert llm_sh(llm, "stop", holder="make-llm-start").returncode == 0  # `make llm-stop`
    assert not running(llm) and server_log(llm) == ["start", "stop", "start", "stop"]
    llm_sh(llm, "start", holder="make-llm-start")
    assert llm_sh(llm, "stop", "--force").returncode == 0
    assert not running(llm)

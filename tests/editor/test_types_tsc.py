"""`sd types --typescript` output type-checks with `tsc` (from npm, in tests/editor/node)
against a sample client: the fetch example of docs/serve-api.md (SPEC §36). A client that
sends the wrong type, or reads an answer the template does not give, does not compile.

Needs `npm ci` in tests/editor/node (`.ci/run` does it); marker `editor`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_support import sd
from editor_spans import ROOT

pytestmark = pytest.mark.editor

TSC = ROOT / "tests" / "editor" / "node" / "node_modules" / "typescript" / "bin" / "tsc"
TEMPLATE = (
    "Customer {{ customer }} wrote: {{ message }}\n"
    "Is it a complaint? [[bool:complaint]]\n"
    "How many items? [[int:count]]\n"
    "Which? [[pick:kind|refund,repair]]\n"
    "When does it repeat? [[date_rule:when]]\n"
    "Answer them. [[reply]]\n"
)
CLIENT = """\
import type { ReplyInput, ReplyOutput } from "./reply";

export async function reply(input: ReplyInput, key: string): Promise<ReplyOutput> {
  const response = await fetch("http://127.0.0.1:8700/v1/templates/reply", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
    body: JSON.stringify(input),
  });
  if (!response.ok) {
    const { error, field } = (await response.json()) as { error: string; field?: string };
    throw new Error(field ? `${field}: ${error}` : error);
  }
  return (await response.json()) as ReplyOutput;
}

export async function main(key: string): Promise<string> {
  const out = await reply({ customer: "Ada", message: "The parcel came late." }, key);
  const kind: "refund" | "repair" | null | undefined = out.answers.kind;
  const count: number = (out.answers.count ?? 0) + out.usage.total_tokens;
  return `${out.answers.reply ?? ""} ${out.answers.complaint} ${kind} ${count} ${out.cost ?? 0} ${out.answers.when}`;
}
"""


def tsc(folder: Path, client: str) -> subprocess.CompletedProcess[str]:
    assert TSC.is_file(), "run `npm ci` in tests/editor/node"
    result = sd("types", folder / "reply.sd", "--typescript", "-o", folder / "reply.ts")
    assert result.exit_code == 0, result.output
    (folder / "client.ts").write_text(client)
    return subprocess.run(
        ["node", str(TSC), "--noEmit", "--strict", "--target", "es2022", "--module", "es2022",
         "--moduleResolution", "bundler", "--lib", "es2022,dom", str(folder / "client.ts")],
        capture_output=True, text=True, timeout=120,
    )


def test_the_generated_types_compile_with_the_sample_client(tmp_path: Path) -> None:
    (tmp_path / "reply.sd").write_text(TEMPLATE)
    done = tsc(tmp_path, CLIENT)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (('customer: "Ada"', "customer: 7"), "error TS2322: Type 'number' is not assignable to type 'string'."),
        (("out.answers.reply ??", "out.answers.answer ??"), "error TS2339: Property 'answer' does not exist"),
        (('message: "The parcel came late." ', ""),
         "Property 'message' is missing in type '{ customer: string; }' but required in type 'ReplyInput'."),
    ],
)
def test_a_client_that_misuses_them_does_not_compile(tmp_path: Path, change: tuple[str, str], error: str) -> None:
    (tmp_path / "reply.sd").write_text(TEMPLATE)
    assert change[0] in CLIENT
    done = tsc(tmp_path, CLIENT.replace(*change))
    assert done.returncode != 0 and error in done.stdout, done.stdout

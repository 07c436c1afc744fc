// Tokenizes documents with VS Code's own TextMate engine (vscode-textmate on
// vscode-oniguruma), line by line as the editor does, carrying the rule stack
// from one line to the next.
//
// stdin:  {"grammars": {scopeName: path}, "injections": {scopeName: [injectionScope]},
//          "documents": [{"scope": scopeName, "text": "..."}]}
// stdout: [[[line, startIndex, endIndex, [scopes...]], ...] per document]
"use strict";

const fs = require("fs");
const path = require("path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

async function main() {
  const request = JSON.parse(fs.readFileSync(0, "utf8"));
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve("vscode-oniguruma")), "onig.wasm"));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (text) => new oniguruma.OnigString(text),
    }),
    loadGrammar: async (scopeName) => {
      const file = request.grammars[scopeName];
      if (!file) return null;
      return vsctm.parseRawGrammar(fs.readFileSync(file, "utf8"), file);
    },
    getInjections: (scopeName) => (request.injections || {})[scopeName] || [],
  });
  const out = [];
  for (const doc of request.documents) {
    const grammar = await registry.loadGrammar(doc.scope);
    if (!grammar) throw new Error(`no grammar for ${doc.scope}`);
    let stack = vsctm.INITIAL;
    const tokens = [];
    doc.text.split("\n").forEach((line, number) => {
      const result = grammar.tokenizeLine(line, stack);
      for (const t of result.tokens) tokens.push([number, t.startIndex, t.endIndex, t.scopes]);
      stack = result.ruleStack;
    });
    out.push(tokens);
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(1);
});

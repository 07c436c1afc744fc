// Starts `sd lsp` (the struckdown language server, on stdio) for .sd files.
// Highlighting needs no server: it comes from the grammars in syntaxes/.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("struckdown");
  const server = {
    command: config.get("server.command", "sd"),
    args: config.get("server.args", ["lsp"]),
    transport: TransportKind.stdio,
  };
  const options = {
    documentSelector: [{ scheme: "file", language: "struckdown" }],
    initializationOptions: {
      toolsFile: config.get("toolsFile") || null,
      diagnosticsDelay: config.get("diagnosticsDelay"),
    },
  };
  client = new LanguageClient("struckdown", "struckdown language server", server, options);
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };

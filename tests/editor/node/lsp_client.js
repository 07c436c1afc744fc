// Drive `sd lsp` with vscode-jsonrpc, the JSON-RPC layer under VS Code's language
// client: a bad frame written straight into the server's stdin between the client's
// own messages, a request with invalid params, then a valid request. Prints one JSON
// object: what the client received and what it logged.
// Usage: node lsp_client.js SD_EXECUTABLE FILE_URI TEXT
"use strict";
const { spawn } = require("child_process");
const rpc = require("vscode-jsonrpc/node");

const [sd, uri, text] = process.argv.slice(2);
const child = spawn(sd, ["lsp"], { stdio: ["pipe", "pipe", "pipe"] });
let stderr = "";
child.stderr.on("data", (chunk) => { stderr += chunk; });
const logged = [];
const logger = {
  error: (m) => logged.push(["error", m]),
  warn: (m) => logged.push(["warn", m]),
  info: (m) => logged.push(["info", m]),
  log: (m) => logged.push(["log", m]),
};
const connection = rpc.createMessageConnection(
  new rpc.StreamMessageReader(child.stdout), new rpc.StreamMessageWriter(child.stdin), logger,
);
const notifications = [];
connection.onNotification((method, params) => notifications.push([method, params]));
connection.listen();

async function main() {
  const out = {};
  await connection.sendRequest("initialize", { processId: null, rootUri: null, capabilities: {} });
  await connection.sendNotification("initialized", {});
  await connection.sendNotification("textDocument/didOpen", {
    textDocument: { uri, languageId: "struckdown", version: 1, text },
  });
  await new Promise((resolve) => child.stdin.write("Content-Length: abc\r\n\r\n{}", resolve));
  try {
    await connection.sendRequest("textDocument/hover", { textDocument: { uri }, position: { line: "x", character: 0 } });
    out.invalid = "answered";
  } catch (error) {
    out.invalid = { code: error.code, message: error.message };
  }
  const hover = await connection.sendRequest("textDocument/hover", { textDocument: { uri }, position: { line: 1, character: 4 } });
  out.hover = hover && hover.contents.value.split("\n")[0];
  await connection.sendRequest("shutdown");
  await connection.sendNotification("exit");
  out.code = await new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  out.logged = logged;
  out.notifications = notifications.map(([method]) => method);
  out.stderr = stderr;
  connection.dispose();
  console.log(JSON.stringify(out));
}

main().catch((error) => { console.error(error); process.exit(1); });

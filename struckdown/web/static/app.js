// The struckdown playground page: plain JavaScript, no build step, no network but its own server.
"use strict";

const $ = (id) => document.getElementById(id);
const token = new URLSearchParams(location.search).get("token") || "";
const state = { config: null, path: null, saved: "", running: null, checkTimer: null, checkSeq: 0,
                slots: {}, tools: [], lastDiagnostics: [], pause: null, decisions: {} };

function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (token) headers["Authorization"] = "Bearer " + token;
  if (options.body && typeof options.body === "string") headers["Content-Type"] = "application/json";
  return fetch(path, Object.assign({}, options, { headers }));
}

async function json(path, options) {
  const response = await api(path, options);
  const data = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

// -- editor: highlighting and the line gutter ------------------------------------------
const TOKENS = /(\[\[[\s\S]*?\]\])|(\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\})|(\{#[\s\S]*?#\})|(<\/?[A-Za-z][\w-]*(?:\s[^<>]*)?\/?>)/g;

function escapeHtml(text) {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function highlightSlot(slot) {
  const inner = escapeHtml(slot.slice(2, -2));
  const typed = inner.replace(/^(\s*[!@]?[A-Za-z_][\w.]*)(:)/, '<span class="tok-type">$1</span>$2');
  return '<span class="tok-slot">[[' + typed + "]]</span>";
}

function highlight(text) {
  let out = "";
  let last = 0;
  for (const match of text.matchAll(TOKENS)) {
    out += escapeHtml(text.slice(last, match.index));
    if (match[1]) out += highlightSlot(match[1]);
    else if (match[2]) out += '<span class="tok-jinja">' + escapeHtml(match[2]) + "</span>";
    else if (match[3]) out += '<span class="tok-comment">' + escapeHtml(match[3]) + "</span>";
    else out += '<span class="tok-tag">' + escapeHtml(match[4]) + "</span>";
    last = match.index + match[0].length;
  }
  return out + escapeHtml(text.slice(last)) + "\n";
}

function renderEditor() {
  const source = $("source");
  $("highlight").innerHTML = highlight(source.value);
  const lines = source.value.split("\n").length;
  const marks = {};
  for (const d of state.lastDiagnostics) {
    if (marks[d.line] !== "error") marks[d.line] = d.severity;
  }
  const gutter = $("gutter");
  gutter.replaceChildren();
  for (let i = 1; i <= lines; i++) {
    const attrs = { "data-line": String(i), text: String(i) };
    if (marks[i]) attrs.class = marks[i];
    gutter.append(el("div", attrs));
  }
  source.style.height = "auto";
  source.style.width = "auto";
  source.style.height = Math.max(source.scrollHeight, $("editor").clientHeight) + "px";
  source.style.width = Math.max(source.scrollWidth, $("editor").clientWidth - gutter.offsetWidth) + "px";
  $("filename").textContent = (state.path || "untitled") + (source.value !== state.saved ? " •" : "");
}

function placeCursor(line, column) {
  const source = $("source");
  const lines = source.value.split("\n");
  let offset = 0;
  for (let i = 0; i < line - 1 && i < lines.length; i++) offset += lines[i].length + 1;
  source.focus();
  source.setSelectionRange(offset + column - 1, offset + column - 1);
}

// -- check and plan ----------------------------------------------------------------------
function request(extra = {}) {
  const body = {
    template: $("source").value,
    context: $("context").value,
    context_kind: $("context-kind").value,
  };
  if (state.config && state.config.mode === "edit") {
    if (state.path) body.path = state.path;
    if ($("tools-select").value) body.tools = $("tools-select").value;
  }
  return Object.assign(body, extra);
}

function scheduleCheck() {
  clearTimeout(state.checkTimer);
  state.checkTimer = setTimeout(check, 250);
}

async function check() {
  const seq = ++state.checkSeq;
  let data;
  try {
    data = await json("/api/check", { method: "POST", body: JSON.stringify(request()) });
  } catch (error) {
    if (seq === state.checkSeq) showDiagnostics([{ line: 1, column: 1, severity: "error", message: error.message }]);
    return;
  }
  if (seq !== state.checkSeq) return; // a newer check is on its way
  showDiagnostics(data.diagnostics || []);
  $("context-error").textContent = data.context_error || "";
  if ($("plan-panel").classList.contains("active")) explain();
}

function showDiagnostics(diagnostics) {
  state.lastDiagnostics = diagnostics;
  const list = $("diagnostics");
  list.replaceChildren();
  for (const d of diagnostics) {
    const item = el("li", { class: d.severity, "data-line": String(d.line), "data-column": String(d.column) },
      `${d.line}:${d.column}: ${d.severity}: ${d.message}`);
    if (d.hint) item.append(el("span", { class: "hint", text: "hint: " + d.hint }));
    item.addEventListener("click", () => placeCursor(d.line, d.column));
    list.append(item);
  }
  renderEditor();
}

async function explain() {
  try {
    const data = await json("/api/explain", { method: "POST", body: JSON.stringify(request()) });
    $("plan").textContent = data.plan !== undefined ? data.plan
      : "The template does not parse:\n" + data.diagnostics.map((d) => `${d.line}:${d.column}: ${d.message}`).join("\n");
  } catch (error) {
    $("plan").textContent = error.message;
  }
}

// -- files ---------------------------------------------------------------------------------
async function loadFiles() {
  const data = await json("/api/files");
  const fill = (list, names, open) => {
    list.replaceChildren();
    for (const name of names) {
      const item = el("li", { title: name, "data-path": name, text: name });
      item.addEventListener("click", () => open(name));
      list.append(item);
    }
  };
  fill($("template-list"), data.templates, openTemplate);
  fill($("context-list"), data.contexts, openContext);
  const tools = $("tools-select");
  for (const name of data.tools) tools.append(el("option", { value: name, text: name }));
  const wanted = new URLSearchParams(location.search).get("file");
  const first = data.templates.includes(wanted) ? wanted : data.templates[0];
  if (first && !state.path) await openTemplate(first);
}

async function openTemplate(path) {
  const data = await json("/api/file?path=" + encodeURIComponent(path));
  state.path = path;
  state.saved = data.text;
  $("source").value = data.text;
  for (const item of $("template-list").children) item.classList.toggle("current", item.dataset.path === path);
  renderEditor();
  check();
}

async function openContext(path) {
  const data = await json("/api/file?path=" + encodeURIComponent(path));
  $("context").value = data.text;
  $("context-kind").value = /\.ya?ml$/i.test(path) ? "yaml" : "json";
  scheduleCheck();
}

async function save() {
  if (!state.config || state.config.mode !== "edit") return;
  let path = state.path;
  if (!path) {
    path = prompt("Save as (inside the folder):", "new.sd");
    if (!path) return;
  }
  const text = $("source").value;
  try {
    await json("/api/file", { method: "PUT", body: JSON.stringify({ path, text }) });
  } catch (error) {
    setStatus("Not saved: " + error.message, true);
    return;
  }
  const isNew = state.path !== path;
  state.path = path;
  state.saved = text;
  setStatus("Saved " + path + ".");
  renderEditor();
  if (isNew) loadFiles();
}

// -- runs: the event stream -----------------------------------------------------------------
function setStatus(text, isError = false) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}

function modelChoice() {
  const select = $("model-select");
  if (!select.hidden) return select.value || null;
  return $("model-input").value.trim() || null;
}

function slotCard(slot) {
  if (!state.slots[slot]) {
    const card = el("div", { class: "slot-card", "data-slot": slot },
      el("div", { class: "head", text: slot }), el("div", { class: "text" }));
    $("timeline").append(card);
    state.slots[slot] = { card, text: "" };
  }
  return state.slots[slot];
}

function note(text, isError = false) {
  $("timeline").append(el("div", { class: "note-card" + (isError ? " error" : ""), text }));
}

// One function per event type (SPEC §6); types this page does not know yet are still
// listed in the Events tab.
const handlers = {
  run_started() { setStatus("Running…"); },
  slot_stream_start(e) { slotCard(e.slot); },
  token_delta(e) {
    const slot = slotCard(e.slot);
    slot.text += e.delta;
    slot.card.querySelector(".text").textContent = slot.text;
  },
  slot_partial(e) {  // SPEC §26: a typed answer so far, redrawn as it grows
    const slot = slotCard(e.slot);
    slot.card.classList.remove("retracted");
    slot.card.dataset.complete = (e.complete_fields || []).join(",");
    slot.card.querySelector(".text").textContent = pretty(e.value);
  },
  thinking_delta(e) { slotCard(e.slot).card.querySelector(".head").title = "thinking…"; },
  tool_started(e) {
    const card = el("div", { class: "tool-card running", "data-tool": e.tool_name },
      el("div", { class: "head", text: `${e.slot} → ${e.tool_name}(${formatArguments(e.arguments)})` }),
      el("pre", { class: "arguments", text: pretty(e.arguments) }));
    $("timeline").append(card);
    state.tools.push({ event: e, card });
  },
  tool_completed(e) {
    const open = state.tools.find((t) => t.card.classList.contains("running") && t.event.tool_name === e.tool_name
      && JSON.stringify(t.event.arguments) === JSON.stringify(e.arguments));
    const card = open ? open.card : el("div", { class: "tool-card", "data-tool": e.tool_name },
      el("div", { class: "head", text: `${e.slot} → ${e.tool_name}(${formatArguments(e.arguments)})` }));
    if (!open) $("timeline").append(card);
    card.classList.remove("running");
    card.classList.toggle("failed", !e.ok);
    const tail = e.ok ? pretty(e.output) : e.error;
    // SPEC §29: a call that did not run says how it was answered ("replayed from the journal", …)
    const how = e.source ? e.source : `${Math.round(e.elapsed_ms)} ms${e.was_cached ? ", cached" : ""}`;
    card.append(el("pre", { class: "output", text: `= ${tail}  (${how})` }));
  },
  slot_completed(e) {
    const result = e.result || {};
    if (result.type === "halt") {
      const verdict = result.output || {};
      $("timeline").append(el("div", { class: "guard-card" + (verdict.triggered ? " tripped" : "") },
        el("div", { class: "head", text: `guard ${e.slot}: ${verdict.triggered ? "tripped" : "passed"}` + (verdict.reason ? ` — ${verdict.reason}` : "") })));
      return;
    }
    const slot = slotCard(e.slot);
    if (!slot.text) slot.card.querySelector(".text").textContent = pretty(result.output);
    slot.card.classList.add("done");
    slot.card.querySelector(".head").textContent = `${e.slot}: ${result.type}` + (e.was_cached ? " (cached)" : "");
  },
  slot_retracted(e) {
    const slot = slotCard(e.slot);
    slot.card.classList.add("retracted");
    note(`${e.slot} retracted: ${e.reason}`);
  },
  checkpoint_reached(e) { if (e.name) note(`checkpoint ${e.name}`); },
  approval_requested(e) { approvalRequested(e); },
  approval_decided(e) {
    const card = document.querySelector(`.approval-card[data-request="${CSS.escape(e.request_id)}"]`);
    if (card) card.classList.add(e.approved ? "allowed" : "denied");
    note(`${e.request_id} ${e.approved ? "allowed" : "denied"}${e.message ? ": " + e.message : ""}`);
  },
  processing_complete(e) {
    showResults(e);
    if (e.paused) {  // SPEC §12: the run waits for the buttons; the state goes back with the decisions
      state.pause = { state: e.state, ids: (e.requests || []).map((r) => r.id) };
      setStatus(`Waiting for approval: ${state.pause.ids.length} call(s).`);
      resumeWhenDecided();
      return;
    }
    const halted = e.halted ? ` Halted by ${e.halted.slot}: ${e.halted.reason}` : "";
    setStatus((e.early_termination ? "Stopped early." : "Done.") + halted, Boolean(e.halted));
  },
  processing_error(e) {
    note((e.slot ? e.slot + ": " : "") + e.error, true);
    setStatus("Error: " + e.error, true);
  },
  refused(e) { setStatus("Refused: " + e.error, true); },
  diagnostics(e) {
    showDiagnostics(e.diagnostics);
    setStatus("The template has errors; see the diagnostics.", true);
  },
};

// Approval (SPEC §12): a run with nobody to ask pauses; each request gets a card with
// Allow / Deny (and a reason the model reads when denied). Once every request of the pause
// is decided, the decisions and the paused state go to /api/approval and the run goes on.
function approvalRequested(e) {
  const reason = el("input", { class: "reason", placeholder: "reason (optional)" });
  const card = el("div", { class: "approval-card", "data-request": e.request_id },
    el("div", { class: "head", text: `${e.slot}: allow ${e.tool_name}(${formatArguments(e.arguments)})?` }));
  const buttons = [];
  for (const [label, approved] of [["Allow", true], ["Deny", false]]) {
    const button = el("button", { text: label, "data-decision": label.toLowerCase() });
    button.disabled = !(state.config && state.config.approvals);
    button.addEventListener("click", () => {
      state.decisions[e.request_id] = approved ? true : (reason.value.trim() || false);
      for (const b of buttons) b.disabled = true;
      reason.disabled = true;
      card.classList.add("decided");
      resumeWhenDecided();
    });
    buttons.push(button);
    card.append(button);
  }
  card.append(reason);
  $("approvals").append(card);
}

function resumeWhenDecided() {
  const pause = state.pause;
  if (!pause || state.running || !pause.ids.every((id) => id in state.decisions)) return;
  const decisions = {};
  for (const id of pause.ids) decisions[id] = state.decisions[id];
  state.pause = null;
  stream("/api/approval", request({ model: modelChoice(), cache: false, state: pause.state, decisions }));
}

function formatArguments(args) {
  return Object.entries(args || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
}

function showResults(e) {
  const body = $("results").querySelector("tbody");
  body.replaceChildren();
  for (const [key, slot] of Object.entries(e.slots || {})) {
    const row = el("tr", { "data-key": key },
      el("td", { class: "key", text: key }), el("td", { class: "type", text: slot.type }),
      el("td", { class: "value", text: pretty(slot.output) }));  // text as text, as `sd run` prints it
    body.append(row);
  }
  const u = e.usage || {};
  const cached = Object.values(e.slots || {}).filter((slot) => slot.cached).length;
  let text = (cached ? `${counted(cached, "answer")} cached · ` : "") +
    `${counted(u.requests || 0, "request")} · ${counted(u.tool_calls || 0, "tool call")} · ` +
    `${u.input_tokens || 0} in + ${u.output_tokens || 0} out = ${counted(u.total_tokens || 0, "token")}`;
  if (e.cost !== undefined && e.cost !== null) text += ` · cost ${e.cost}`;
  $("usage").textContent = text;
}

// "1 request", "2 requests": the CLI's counted() (struckdown/wording.py), on the page
function counted(n, word) {
  return `${n} ${n === 1 ? word : word + "s"}`;
}

function logEvent(e) {
  $("events").append(el("li", { "data-type": e.type, text: JSON.stringify(e) }));
}

async function run() {
  if (state.running) return;
  $("timeline").replaceChildren();
  $("approvals").replaceChildren();
  $("results").querySelector("tbody").replaceChildren();
  $("usage").textContent = "";
  $("events").replaceChildren();
  state.slots = {};
  state.tools = [];
  state.pause = null;
  state.decisions = {};
  selectTab("run-panel");
  await stream("/api/run", request({ model: modelChoice(), cache: false }));
}

// One run's events (a new run, or a paused one going on with its decisions).
async function stream(path, body) {
  if (state.running) return;
  const controller = new AbortController();
  state.running = controller;
  $("run").disabled = true;
  $("stop").disabled = false;
  setStatus("Starting…");
  try {
    const response = await api(path, { method: "POST", signal: controller.signal, body: JSON.stringify(body) });
    if (!response.ok) {
      const data = await response.json().catch(() => ({ error: response.statusText }));
      setStatus(`Refused (${response.status}): ${data.error}`, true);
      return;
    }
    for await (const e of events(response)) {
      logEvent(e);
      (handlers[e.type] || (() => {}))(e);
    }
  } catch (error) {
    setStatus(error.name === "AbortError" ? "Stopped." : "Error: " + error.message, error.name !== "AbortError");
  } finally {
    state.running = null;
    $("run").disabled = false;
    $("stop").disabled = true;
  }
  resumeWhenDecided();  // decided while the paused run was still ending
}

// -- batch -------------------------------------------------------------------------------------
async function runBatch() {
  const file = $("batch-file").files[0];
  if (!file) { $("batch-status").textContent = "Choose a file first."; return; }
  const content = await file.text();
  $("batch-downloads").replaceChildren();
  $("batch-failures").replaceChildren();
  $("batch-progress").value = 0;
  $("batch-status").textContent = "Starting…";
  const body = request({ model: modelChoice(), filename: file.name, content, jobs: Number($("batch-jobs").value) || 4 });
  const response = await api("/api/batch", { method: "POST", body: JSON.stringify(body) });
  if (!response.ok) {
    const data = await response.json().catch(() => ({ error: response.statusText }));
    $("batch-status").textContent = `Refused (${response.status}): ${data.error}`;
    return;
  }
  for await (const e of events(response)) {
    if (e.type === "batch_started") {
      $("batch-progress").max = Math.max(e.total, 1);
      $("batch-status").textContent = `0 of ${counted(e.total, "row")}`;
    } else if (e.type === "batch_row") {
      $("batch-progress").value = e.done;
      $("batch-status").textContent = `${e.done} of ${counted(e.total, "row")}` + (e.failed ? `, ${e.failed} failed` : "");
      if (!e.ok) $("batch-failures").append(el("li", { text: `row ${e.index + 1}: ${e.error}` }));
    } else if (e.type === "batch_complete") {
      $("batch-status").textContent = `Done: ${counted(e.total, "row")}, ${e.failed} failed` +
        (e.cached ? `, ${counted(e.cached, "answer")} cached.` : ".");
      for (const [fmt, url] of Object.entries(e.downloads || {})) {
        const link = el("a", { href: url + (token ? "?token=" + encodeURIComponent(token) : ""), download: "", text: "Download " + fmt.toUpperCase() });
        $("batch-downloads").append(link, " ");
      }
    } else if (e.type === "processing_error" || e.type === "refused") {
      $("batch-status").textContent = "Error: " + e.error;
    } else if (e.type === "diagnostics") {
      showDiagnostics(e.diagnostics);
      $("batch-status").textContent = "The template has errors; see the diagnostics.";
    }
  }
}

// -- wiring ------------------------------------------------------------------------------------
function selectTab(id) {
  for (const button of document.querySelectorAll(".tabs button")) button.classList.toggle("active", button.dataset.tab === id);
  for (const panel of document.querySelectorAll(".panel")) panel.classList.toggle("active", panel.id === id);
  if (id === "plan-panel") explain();
}

async function start() {
  const config = await json("/api/config");
  state.config = config;
  $("mode").textContent = config.mode === "edit" ? "edit · " + config.root.split(/[\\/]/).filter(Boolean).pop() : "serve";
  $("mode").title = config.root || "";
  const select = $("model-select");
  if (config.models.length) {
    for (const name of config.models) select.append(el("option", { value: name, text: name }));
    $("model-input").hidden = true;
  } else if (config.free_model) {
    select.hidden = true;
    for (const name of ["test"]) $("model-list").append(el("option", { value: name }));
  } else {
    select.append(el("option", { value: "", text: "server default" }));
    $("model-input").hidden = true;
  }
  if (config.mode === "edit") {
    await loadFiles();
  } else {
    $("files").hidden = true;
    $("save").hidden = true;
    $("tools-label").hidden = true;
    document.querySelector("main").style.gridTemplateColumns = "minmax(380px, 1fr) minmax(380px, 1fr)";
    $("operator-tools").textContent = config.tools.length ? "tools: " + config.tools.map((t) => t.name).join(", ") : "";
  }
  renderEditor();
}

$("source").addEventListener("input", () => { renderEditor(); scheduleCheck(); });
$("source").addEventListener("keydown", (event) => {
  if (event.key === "Tab") {
    event.preventDefault();
    document.execCommand("insertText", false, "    ");
  }
});
$("context").addEventListener("input", scheduleCheck);
$("context-kind").addEventListener("change", scheduleCheck);
$("tools-select").addEventListener("change", scheduleCheck);
$("run").addEventListener("click", run);
$("stop").addEventListener("click", () => state.running && state.running.abort());
$("save").addEventListener("click", save);
$("batch-run").addEventListener("click", runBatch);
for (const button of document.querySelectorAll(".tabs button")) button.addEventListener("click", () => selectTab(button.dataset.tab));
document.addEventListener("keydown", (event) => {
  if ((event.ctrlKey || event.metaKey) && event.key === "s") { event.preventDefault(); save(); }
  if ((event.ctrlKey || event.metaKey) && event.key === "Enter") { event.preventDefault(); run(); }
});
window.addEventListener("beforeunload", (event) => {
  if (state.path && $("source").value !== state.saved) event.preventDefault();
});
start().catch((error) => setStatus("Could not start: " + error.message, true));

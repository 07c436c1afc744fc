#!/usr/bin/env python3
"""Patch the vendored llama.cpp sources before scripts/local-llm.sh builds llama-server.

Qwen2.5-Coder-0.5B-Instruct writes tool calls as bare JSON objects,
{"name": ..., "arguments": {...}}, with no <tool_call> tags, and
scripts/qwen-tools.jinja renders past calls the same way.  llama-server's
template analyser then infers a tool-call format with no start marker, and
stock llama.cpp has three problems with that format:

1. bare-json-trigger: with tool_choice=auto no grammar is used at all (a lazy
   grammar needs a trigger word), so the model can write malformed arguments or
   call a tool that does not exist.  Patch: trigger the lazy tool-call grammar
   on a regular expression matching the start of a {"name": ...} object.
2. fenced-json: the model sometimes wraps the call in a ```json fence, which
   made the request fail (or, when streaming, leaked "```json" into the text).
   Patch: accept an optional fence around the tool calls.  Also, with
   tool_choice=required, allow no free text before the call: the stock grammar
   lets the model write text first, and a model told to answer in plain text
   then writes until the context is full because it may not stop without a call.
3. lenient-parse: any answer that contains "{" but is not a tool call (code,
   JSON) failed the whole request with HTTP 500 "The model produced output that
   does not match the expected peg-native format".  Patch: keep the tool calls
   that were parsed completely, else return the raw output as plain content.

Usage: patch-llama-cpp.py LLAMA_CPP_SOURCE_DIR
Idempotent; exits non-zero if the expected code is not found (other version).
"""

import pathlib
import sys

TAG = "struckdown"


def patch(path: pathlib.Path, name: str, edits: list[tuple[str, str]]) -> None:
    src = path.read_text()
    marker = f"{TAG}-{name}"
    if marker in src:
        print(f"  {name}: already applied")
        return
    for anchor, replacement in edits:
        count = src.count(anchor)
        if count != 1:
            sys.exit(f"patch {name}: expected code found {count} times in {path} (unsupported llama.cpp version?)")
        src = src.replace(anchor, replacement.replace("@MARKER@", marker), 1)
    path.write_text(src)
    print(f"  {name}: applied to {path.name}")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1])
    generator = root / "common" / "chat-auto-parser-generator.cpp"
    chat = root / "common" / "chat.cpp"

    grammar_anchor = "              inputs.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED));\n"
    lazy_anchor = "        if (data.grammar_lazy) {\n"
    patch(generator, "bare-json-trigger", [
        (grammar_anchor, grammar_anchor + r'''
    // @MARKER@ (added by struckdown's scripts/patch-llama-cpp.py):
    // bare JSON tool calls have no marker to trigger the lazy grammar on, so
    // stock llama.cpp samples them unconstrained with tool_choice=auto.
    // Trigger on the start of a {"name": ...} object instead.
    std::string bare_json_trigger;
    if (!include_grammar && has_tools && inputs.tool_choice == COMMON_CHAT_TOOL_CHOICE_AUTO &&
        trigger_marker.empty() && autoparser.tools.format.mode == tool_format::JSON_NATIVE &&
        !autoparser.tools.format.fun_name_is_key && !autoparser.tools.format.tools_array_wrapped &&
        autoparser.tools.format.name_field.find('.') == std::string::npos &&
        !autoparser.content.is_always_wrapped()) {
        bare_json_trigger = "[^{]*(\\{\\s*\"" + regex_escape(autoparser.tools.format.name_field) + "\"[\\s\\S]*)";
        include_grammar   = true;
    }
'''),
        (lazy_anchor, r'''        if (data.grammar_lazy && !bare_json_trigger.empty()) {
            data.grammar_triggers = {
                { COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL, bare_json_trigger }
            };
        } else if (data.grammar_lazy) {
'''),
    ])

    return_anchor = "    return ctx.reasoning_parser + p.optional(p.content(p.until(tool_start))) + tools_parser + p.end();\n"
    patch(generator, "fenced-json", [
        (return_anchor, r'''    if (tool_start == "{") {
        // @MARKER@ (added by struckdown's scripts/patch-llama-cpp.py):
        // small models sometimes wrap a bare JSON tool call in a ```json fence;
        // parse that as a tool call without leaking the fence into the content.
        auto fenced = p.space() + p.literal("```") + p.optional(p.literal("json")) + p.space() + tools_parser +
                      p.space() + p.optional(p.literal("```")) + p.space() + p.end();
        if (inputs.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED) {
            // no free text before a required call: the grammar built from this parser
            // would let the model write text forever, as it cannot end without a call
            return ctx.reasoning_parser + p.choice({ fenced, p.space() + tools_parser + p.end() });
        }
        return ctx.reasoning_parser +
               p.choice({ fenced, p.optional(p.content(p.until(tool_start))) + tools_parser + p.end() });
    }
''' + return_anchor),
    ])

    fail_anchor = '        LOG_WRN("%s: unparsed %s output: %s\\n", __func__,'
    patch(chat, "lenient-parse", [
        (fail_anchor, r'''        // @MARKER@ (added by struckdown's scripts/patch-llama-cpp.py):
        // an answer that contains '{' but is no tool call used to fail the whole
        // request with HTTP 500.  Keep the tool calls that were parsed completely,
        // else return the raw output as plain content.
        if (!is_partial) {
            LOG_WRN("%s: unparsed %s output, lenient fallback: %s\n", __func__,
                    common_chat_format_name(params.format), effective_input.substr(result.end).c_str());
            common_chat_msg parsed;
            parsed.role = "assistant";
            if (result.end > 0) {
                common_chat_peg_mapper mapper(parsed);
                mapper.from_ast(ctx.ast, result);
            }
            bool calls_ok = !parsed.tool_calls.empty();
            for (const auto & tc : parsed.tool_calls) {
                if (tc.name.empty()) {
                    calls_ok = false;
                    break;
                }
                try {
                    if (!json::parse(tc.arguments).is_object()) {
                        calls_ok = false;
                    }
                } catch (const std::exception &) {
                    calls_ok = false;
                }
            }
            if (calls_ok) {
                return parsed;
            }
            common_chat_msg raw;
            raw.role    = "assistant";
            raw.content = input;
            return raw;
        }
''' + fail_anchor),
    ])


if __name__ == "__main__":
    main()

"""The tool, prompt and resource surface the MCP conformance suite calls by name.

Source of truth: /work/shared/conformance/FIXTURES.md (sections 2-6). Names, texts, schemas and
timings here follow it exactly; mcpx must re-expose them unchanged (no prefixes, same order).

Task tools (FIXTURES.md section 2) are plain tools here: this fixture does NOT implement the
``io.modelcontextprotocol/tasks`` extension (nor 2025-11-25 tasks, so no ``execution.taskSupport``
is advertised). mcpx owns the task machinery and must apply this policy to this upstream:

    greet               never a task (ignore a legacy ``task`` param)
    slow_compute        optional (task when the host declares the extension and it runs >= ~1 s;
                        decide within a grace window well under 1 s)
    failing_job         REQUIRED (non-declaring host -> -32021 before the tool runs)
    protocol_error_job  optional (or required)
    confirm_delete      optional (or required); its question becomes task inputRequests
    multi_input         optional (or required); two questions outstanding at once
    test_tool_with_task REQUIRED, but its first round is MRTR on the call itself (no task yet)
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import struct
import wave
from typing import Any

from fixture_core import Call, RpcError, Server, Session, elicit, list_roots, missing_capability, sample

# ---- binary payloads (only need to be valid base64 of the right kind) -----------------------
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _wav_b64() -> str:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(struct.pack("<8h", 0, 1000, 2000, 1000, 0, -1000, -2000, -1000))
    return base64.b64encode(buf.getvalue()).decode()


WAV_B64 = _wav_b64()


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_result(value: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [text(value)]}
    if is_error:
        result["isError"] = True
    return result


# ---- tool definitions (order matters: test_simple_text first) --------------------------------
EMPTY = {"type": "object", "properties": {}}
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


_S = {"type": "string"}
TOOLS: list[dict[str, Any]] = [
    # section 5: core content tools
    {"name": "test_simple_text", "description": "Returns a simple text response.", "inputSchema": EMPTY},
    {"name": "test_image_content", "description": "Returns one PNG image block.", "inputSchema": EMPTY},
    {"name": "test_audio_content", "description": "Returns one WAV audio block.", "inputSchema": EMPTY},
    {"name": "test_embedded_resource", "description": "Returns one embedded text resource.", "inputSchema": EMPTY},
    {
        "name": "test_multiple_content_types",
        "description": "Returns text, image and resource blocks.",
        "inputSchema": EMPTY,
    },
    {"name": "test_error_handling", "description": "Returns a tool error (isError: true).", "inputSchema": EMPTY},
    {
        "name": "test_tool_with_progress",
        "description": "Reports progress 0/50/100 when given a progressToken.",
        "inputSchema": EMPTY,
    },
    {"name": "test_tool_with_logging", "description": "Emits three info log messages.", "inputSchema": EMPTY},
    {
        "name": "test_sampling",
        "description": "Asks the client to sample an LLM completion.",
        "inputSchema": _obj({"prompt": _S}, ["prompt"]),
    },
    {
        "name": "test_elicitation",
        "description": "Asks the client for a username and email.",
        "inputSchema": _obj({"message": _S}, ["message"]),
    },
    {
        "name": "test_elicitation_sep1034_defaults",
        "description": "Elicitation whose schema has defaults (SEP-1034).",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_elicitation_sep1330_enums",
        "description": "Elicitation with every enum form (SEP-1330).",
        "inputSchema": EMPTY,
    },
    {
        "name": "json_schema_2020_12_tool",
        "description": "Tool with JSON Schema 2020-12 features",
        "inputSchema": JSON_SCHEMA_2020_12,
    },
    {
        "name": "test_reconnection",
        "description": "Closes the SSE stream mid-call, then answers (SEP-1699).",
        "inputSchema": EMPTY,
    },
    # section 4: stateless diagnostics
    {"name": "test_missing_capability", "description": "Needs the client's sampling capability.", "inputSchema": EMPTY},
    {
        "name": "test_streaming_elicitation",
        "description": "Answers at once; never sends a request on the stream.",
        "inputSchema": EMPTY,
    },
    {"name": "test_logging_tool", "description": "Logs only when the request set a log level.", "inputSchema": EMPTY},
    {
        "name": "test_trigger_tool_change",
        "description": "Toggles test_dynamic_tool and announces the change.",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_trigger_prompt_change",
        "description": "Toggles test_dynamic_prompt and announces the change.",
        "inputSchema": EMPTY,
    },
    # section 3: MRTR
    {
        "name": "test_input_required_result_elicitation",
        "description": "MRTR: asks for a name (key user_name).",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_input_required_result_sampling",
        "description": "MRTR: asks for one sampling completion.",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_input_required_result_list_roots",
        "description": "MRTR: asks for the client's roots.",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_input_required_result_request_state",
        "description": "MRTR: round-trips a signed requestState.",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_input_required_result_multiple_inputs",
        "description": "MRTR: asks elicitation, sampling and roots at once.",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_input_required_result_multi_round",
        "description": "MRTR: two rounds of questions.",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_input_required_result_tampered_state",
        "description": "MRTR: rejects a tampered requestState.",
        "inputSchema": EMPTY,
    },
    {
        "name": "test_input_required_result_capabilities",
        "description": "MRTR: asks only for what the client declared.",
        "inputSchema": EMPTY,
    },
    # section 2: task tools (plain tools here; mcpx applies the task policy, see module docstring)
    {"name": "greet", "description": "Greets someone at once.", "inputSchema": _obj({"name": _S}, ["name"])},
    {
        "name": "slow_compute",
        "description": "Sleeps `seconds`, then reports completion. Cancellable.",
        "inputSchema": _obj({"seconds": {"type": "number", "minimum": 0}, "label": _S}, ["seconds"]),
    },
    {"name": "failing_job", "description": "After ~1 s returns a tool error (isError: true).", "inputSchema": EMPTY},
    {"name": "protocol_error_job", "description": "After ~0.5 s fails with a JSON-RPC error.", "inputSchema": EMPTY},
    {
        "name": "confirm_delete",
        "description": "Asks for confirmation before deleting a file.",
        "inputSchema": _obj({"filename": _S}, ["filename"]),
    },
    {"name": "multi_input", "description": "Asks two questions at the same time.", "inputSchema": EMPTY},
    {"name": "test_tool_with_task", "description": "Asks for a name first, then works ~1.5 s.", "inputSchema": EMPTY},
    # section 6: custom header parameter (SEP-2243)
    {
        "name": "test_header_param",
        "description": "Echoes a region that is mirrored in Mcp-Param-Region.",
        "inputSchema": _obj({"region": {"type": "string", "x-mcp-header": "Region"}}, ["region"]),
    },
]
DYNAMIC_TOOL = {
    "name": "test_dynamic_tool",
    "description": "Present while toggled on by test_trigger_tool_change.",
    "inputSchema": EMPTY,
}

PROMPTS: list[dict[str, Any]] = [
    {"name": "test_simple_prompt", "description": "A simple prompt without arguments."},
    {
        "name": "test_prompt_with_arguments",
        "description": "A prompt with two required arguments.",
        "arguments": [
            {"name": "arg1", "description": "First argument", "required": True},
            {"name": "arg2", "description": "Second argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "description": "A prompt embedding a resource.",
        "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
    },
    {"name": "test_prompt_with_image", "description": "A prompt with an image."},
    {"name": "test_input_required_result_prompt", "description": "MRTR on prompts/get: asks for context first."},
]
DYNAMIC_PROMPT = {
    "name": "test_dynamic_prompt",
    "description": "Present while toggled on by test_trigger_prompt_change.",
}

WATCHED_URI = "test://watched-resource"
RESOURCES: list[dict[str, Any]] = [
    {
        "uri": "test://static-text",
        "name": "static-text",
        "description": "Static text resource",
        "mimeType": "text/plain",
    },
    {
        "uri": "test://static-binary",
        "name": "static-binary",
        "description": "Static binary resource (PNG)",
        "mimeType": "image/png",
    },
    {"uri": WATCHED_URI, "name": "watched-resource", "description": "Subscribable resource", "mimeType": "text/plain"},
]
TEMPLATES: list[dict[str, Any]] = [
    {
        "uriTemplate": "test://template/{id}/data",
        "name": "template-data",
        "description": "Templated JSON resource",
        "mimeType": "application/json",
    },
]

SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}
SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def _summary(prefix: str, answer: dict[str, Any]) -> str:
    return f"{prefix}: action={answer.get('action')}, content={json.dumps(answer.get('content'))}"


def _sampled_text(answer: dict[str, Any]) -> str:
    content = answer.get("content")
    blocks = content if isinstance(content, list) else [content]
    return " ".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _accepted(answer: dict[str, Any]) -> dict[str, Any]:
    content = answer.get("content")
    return content if answer.get("action") == "accept" and isinstance(content, dict) else {}


class Surface:
    def __init__(self) -> None:
        self.dynamic_tool = False
        self.dynamic_prompt = False
        self.watched_version = 0

    # ---- listings ------------------------------------------------------------------------------
    def list_tools(self) -> list[dict[str, Any]]:
        tools = TOOLS + ([DYNAMIC_TOOL] if self.dynamic_tool else [])
        return json.loads(json.dumps(tools))

    def list_prompts(self) -> list[dict[str, Any]]:
        prompts = PROMPTS + ([DYNAMIC_PROMPT] if self.dynamic_prompt else [])
        return json.loads(json.dumps(prompts))

    @staticmethod
    def list_resources() -> list[dict[str, Any]]:
        return json.loads(json.dumps(RESOURCES))

    @staticmethod
    def list_resource_templates() -> list[dict[str, Any]]:
        return json.loads(json.dumps(TEMPLATES))

    @staticmethod
    def tool(name: str) -> dict[str, Any] | None:
        return next((t for t in [*TOOLS, DYNAMIC_TOOL] if t["name"] == name), None)

    # ---- resources -----------------------------------------------------------------------------
    async def read_resource(self, call: Call) -> dict[str, Any]:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(-32602, "Invalid params: 'uri' (string) is required")
        if uri == "test://static-text":
            return {
                "contents": [
                    {"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}
                ]
            }
        if uri == "test://static-binary":
            return {"contents": [{"uri": uri, "mimeType": "image/png", "blob": PNG_B64}]}
        if uri == WATCHED_URI:
            return {
                "contents": [
                    {"uri": uri, "mimeType": "text/plain", "text": f"Watched resource, version {self.watched_version}."}
                ]
            }
        parts = uri.split("/")
        if uri.startswith("test://template/") and len(parts) == 5 and parts[4] == "data" and parts[3]:
            rid = parts[3]
            body = {"id": rid, "templateTest": True, "data": f"Data for ID: {rid}"}
            return {"contents": [{"uri": uri, "mimeType": "application/json", "text": json.dumps(body)}]}
        raise RpcError(-32602, f"Resource not found: {uri}", {"uri": uri})

    def on_subscribe(self, server: Server, session: Session | None, uri: str) -> None:
        """A subscription to the watched resource sees one update ~200 ms later."""
        if uri != WATCHED_URI:
            return

        async def bump() -> None:
            await asyncio.sleep(0.2)
            self.watched_version += 1
            await server.broadcast("notifications/resources/updated", {"uri": uri})

        asyncio.get_running_loop().create_task(bump())

    # ---- completion ----------------------------------------------------------------------------
    @staticmethod
    def complete(params: dict[str, Any]) -> dict[str, Any]:
        ref = params.get("ref") if isinstance(params.get("ref"), dict) else {}
        arg = params.get("argument") if isinstance(params.get("argument"), dict) else {}
        values: list[str] = []
        if ref.get("type") == "ref/prompt" and ref.get("name") == "test_prompt_with_arguments":
            prefix = str(arg.get("value", ""))
            candidates = {"arg1": ["testValue1", "test-alpha", "test-beta"], "arg2": ["testValue2", "test-gamma"]}.get(
                str(arg.get("name")), []
            )
            values = [c for c in candidates if c.startswith(prefix)]
        elif ref.get("type") == "ref/resource" and ref.get("uri") == "test://template/{id}/data":
            values = [v for v in ("123", "456") if v.startswith(str(arg.get("value", "")))]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    # ---- prompts -------------------------------------------------------------------------------
    async def get_prompt(self, call: Call) -> dict[str, Any]:
        name = call.params.get("name")
        args = call.params.get("arguments") or {}
        if not isinstance(args, dict):
            raise RpcError(-32602, "Invalid params: 'arguments' must be an object")
        user = lambda content: {"role": "user", "content": content}  # noqa: E731 - a one-line helper reads better beside the prompts that use it
        if name == "test_simple_prompt":
            return {"messages": [user(text("This is a simple prompt for testing."))]}
        if name == "test_prompt_with_arguments":
            missing = [a for a in ("arg1", "arg2") if not isinstance(args.get(a), str)]
            if missing:
                raise RpcError(-32602, f"Invalid params: missing required argument(s) {missing}")
            return {"messages": [user(text(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"))]}
        if name == "test_prompt_with_embedded_resource":
            uri = args.get("resourceUri")
            if not isinstance(uri, str):
                raise RpcError(-32602, "Invalid params: missing required argument 'resourceUri'")
            return {
                "messages": [
                    user(
                        {
                            "type": "resource",
                            "resource": {
                                "uri": uri,
                                "mimeType": "text/plain",
                                "text": "Embedded resource content for testing.",
                            },
                        }
                    ),
                    user(text("Please process the embedded resource above.")),
                ]
            }
        if name == "test_prompt_with_image":
            return {
                "messages": [
                    user({"type": "image", "data": PNG_B64, "mimeType": "image/png"}),
                    user(text("Please analyze the image above.")),
                ]
            }
        if name == "test_input_required_result_prompt":
            answers = await call.ask(
                {"user_context": elicit("What context should the prompt use?", {"context": _S}, ["context"])},
                state=False,
            )
            context = _accepted(answers["user_context"]).get("context", "")
            return {
                "description": "Prompt built from elicited context",
                "messages": [user(text(f"Use this context: {context}"))],
            }
        if name == "test_dynamic_prompt" and self.dynamic_prompt:
            return {"messages": [user(text("This is the dynamic prompt."))]}
        raise RpcError(-32602, f"Unknown prompt: {name!r}")

    # ---- tools ---------------------------------------------------------------------------------
    async def call_tool(self, call: Call) -> dict[str, Any]:
        name = call.params.get("name")
        args = call.params.get("arguments")  # test_simple_text is called without `arguments`
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise RpcError(-32602, "Invalid params: 'arguments' must be an object")
        if (
            not isinstance(name, str)
            or self.tool(name) is None
            or (name == DYNAMIC_TOOL["name"] and not self.dynamic_tool)
        ):
            raise RpcError(-32602, f"Unknown tool: {name!r}")
        handler = getattr(self, "tool_" + name)
        return await handler(call, args)

    # section 5 ----------------------------------------------------------------------------------
    async def tool_test_simple_text(self, call: Call, args: dict) -> dict:
        return tool_result("This is a simple text response for testing.")

    async def tool_test_image_content(self, call: Call, args: dict) -> dict:
        return {"content": [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}]}

    async def tool_test_audio_content(self, call: Call, args: dict) -> dict:
        return {"content": [{"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"}]}

    async def tool_test_embedded_resource(self, call: Call, args: dict) -> dict:
        return {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "test://embedded-resource",
                        "mimeType": "text/plain",
                        "text": "This is an embedded resource content.",
                    },
                }
            ]
        }

    async def tool_test_multiple_content_types(self, call: Call, args: dict) -> dict:
        return {
            "content": [
                text("Multiple content types test:"),
                {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
                {
                    "type": "resource",
                    "resource": {
                        "uri": "test://mixed-content-resource",
                        "mimeType": "application/json",
                        "text": json.dumps({"test": "data", "value": 123}),
                    },
                },
            ]
        }

    async def tool_test_error_handling(self, call: Call, args: dict) -> dict:
        return tool_result("This tool intentionally returns an error for testing", is_error=True)

    async def tool_test_tool_with_progress(self, call: Call, args: dict) -> dict:
        for i, value in enumerate((0, 50, 100)):
            if i:
                await asyncio.sleep(0.05)
            await call.progress(value, 100, f"step {i + 1} of 3")
        return tool_result("Progress test completed.")

    async def tool_test_tool_with_logging(self, call: Call, args: dict) -> dict:
        for i, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if i:
                await asyncio.sleep(0.05)
            await call.log("info", message)
        return tool_result("Logging test completed.")

    async def tool_test_sampling(self, call: Call, args: dict) -> dict:
        prompt = args.get("prompt")
        if not isinstance(prompt, str):
            raise RpcError(-32602, "Invalid params: 'prompt' (string) is required")
        answers = await call.ask({"sample_request": sample(prompt)})
        return tool_result(f"LLM response: {_sampled_text(answers['sample_request'])}")

    async def tool_test_elicitation(self, call: Call, args: dict) -> dict:
        message = args.get("message")
        if not isinstance(message, str):
            raise RpcError(-32602, "Invalid params: 'message' (string) is required")
        answers = await call.ask(
            {
                "user_info": elicit(
                    message,
                    {
                        "username": {"type": "string", "description": "Your username"},
                        "email": {"type": "string", "description": "Your email address"},
                    },
                    ["username", "email"],
                )
            }
        )
        return tool_result(_summary("User response", answers["user_info"]))

    async def tool_test_elicitation_sep1034_defaults(self, call: Call, args: dict) -> dict:
        request = {
            "method": "elicitation/create",
            "params": {
                "message": "Please review and update the form fields with defaults",
                "requestedSchema": SEP1034_SCHEMA,
            },
        }
        answers = await call.ask({"defaults": request})
        return tool_result(_summary("Elicitation completed", answers["defaults"]))

    async def tool_test_elicitation_sep1330_enums(self, call: Call, args: dict) -> dict:
        request = {
            "method": "elicitation/create",
            "params": {"message": "Please select options from the enum fields", "requestedSchema": SEP1330_SCHEMA},
        }
        answers = await call.ask({"enums": request})
        return tool_result(_summary("Elicitation completed", answers["enums"]))

    async def tool_json_schema_2020_12_tool(self, call: Call, args: dict) -> dict:
        return tool_result(f"json_schema_2020_12_tool received: {json.dumps(args, sort_keys=True)}")

    async def tool_test_reconnection(self, call: Call, args: dict) -> dict:
        # The HTTP edge closes this call's SSE stream right after the priming event (SEP-1699);
        # the answer is then delivered on the client's GET reconnection (Last-Event-ID).
        await asyncio.sleep(0.1)
        return tool_result("Reconnection test completed: result delivered after the stream was closed.")

    # section 4 ----------------------------------------------------------------------------------
    async def tool_test_missing_capability(self, call: Call, args: dict) -> dict:
        if call.modern:
            if "sampling" not in call.caps:
                raise missing_capability({"sampling": {}})
            return tool_result("Success")
        # 2025-11-25: really use sampling; a gateway whose host lacks it answers -32021 itself
        await call.ask({"sample_request": sample("Reply with the word Success.", 20)})
        return tool_result("Success")

    async def tool_test_streaming_elicitation(self, call: Call, args: dict) -> dict:
        return tool_result("Streaming complete")

    async def tool_test_logging_tool(self, call: Call, args: dict) -> dict:
        await call.log("info", "test_logging_tool: evaluated the request's log level")
        return tool_result("Logging evaluated")

    async def tool_test_trigger_tool_change(self, call: Call, args: dict) -> dict:
        self.dynamic_tool = not self.dynamic_tool
        await call.server.broadcast("notifications/tools/list_changed")
        state = "added" if self.dynamic_tool else "removed"
        return tool_result(f"Tool list changed: test_dynamic_tool {state}")

    async def tool_test_dynamic_tool(self, call: Call, args: dict) -> dict:
        return tool_result("This is the dynamic tool.")

    async def tool_test_trigger_prompt_change(self, call: Call, args: dict) -> dict:
        self.dynamic_prompt = not self.dynamic_prompt
        await call.server.broadcast("notifications/prompts/list_changed")
        state = "added" if self.dynamic_prompt else "removed"
        return tool_result(f"Prompt list changed: test_dynamic_prompt {state}")

    # section 3 ----------------------------------------------------------------------------------
    async def tool_test_input_required_result_elicitation(self, call: Call, args: dict) -> dict:
        answers = await call.ask({"user_name": elicit("What is your name?", {"name": _S}, ["name"])}, state=False)
        return tool_result(f"Hello, {_accepted(answers['user_name']).get('name', 'stranger')}!")

    async def tool_test_input_required_result_sampling(self, call: Call, args: dict) -> dict:
        answers = await call.ask({"sample_request": sample("What is the capital of France?")}, state=False)
        return tool_result(f"Sampled: {_sampled_text(answers['sample_request'])}")

    async def tool_test_input_required_result_list_roots(self, call: Call, args: dict) -> dict:
        answers = await call.ask({"client_roots": list_roots()}, state=False)
        roots = answers["client_roots"].get("roots") or []
        uris = ", ".join(str(r.get("uri")) for r in roots if isinstance(r, dict))
        return tool_result(f"Found {len(roots)} root(s): {uris}")

    async def tool_test_input_required_result_request_state(self, call: Call, args: dict) -> dict:
        answers = await call.ask({"confirm": elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])})
        ok = _accepted(answers["confirm"]).get("ok")
        verdict = "state-ok" if call.state_verified or not call.modern else "state-missing"
        return tool_result(f"{verdict}: confirmed ok={json.dumps(ok)}")

    async def tool_test_input_required_result_multiple_inputs(self, call: Call, args: dict) -> dict:
        answers = await call.ask(
            {
                "user_name": elicit("What is your name?", {"name": _S}, ["name"]),
                "greeting": sample("Generate a greeting", 50),
                "client_roots": list_roots(),
            }
        )
        name = _accepted(answers["user_name"]).get("name", "stranger")
        roots = answers["client_roots"].get("roots") or []
        return tool_result(
            f"Received all inputs: name={name}, greeting={_sampled_text(answers['greeting'])!r}, roots={len(roots)}"
        )

    async def tool_test_input_required_result_multi_round(self, call: Call, args: dict) -> dict:
        first = await call.ask({"step1": elicit("What is your name?", {"name": _S}, ["name"])})
        second = await call.ask({"step2": elicit("What is your favorite color?", {"color": _S}, ["color"])})
        name = _accepted(first["step1"]).get("name", "someone")
        color = _accepted(second["step2"]).get("color", "no color")
        return tool_result(f"Multi-round complete for {name} who likes {color}")

    async def tool_test_input_required_result_tampered_state(self, call: Call, args: dict) -> dict:
        answers = await call.ask({"confirm": elicit("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])})
        return tool_result(f"State verified: ok={json.dumps(_accepted(answers['confirm']).get('ok'))}")

    async def tool_test_input_required_result_capabilities(self, call: Call, args: dict) -> dict:
        caps = call.caps
        requests: dict[str, Any] = {}
        if "elicitation" in caps:
            requests["user_name"] = elicit("What is your name?", {"name": _S}, ["name"])
        if "sampling" in caps:
            requests["sample_request"] = sample("What is the capital of France?")
        if "roots" in caps:
            requests["client_roots"] = list_roots()
        if not requests:
            return tool_result("No input capability declared; nothing to ask.")
        answers = await call.ask(requests)
        return tool_result("Received answers for: " + ", ".join(sorted(answers)))

    # section 2 ----------------------------------------------------------------------------------
    async def tool_greet(self, call: Call, args: dict) -> dict:
        name = args.get("name")
        if not isinstance(name, str):
            raise RpcError(-32602, "Invalid params: 'name' (string) is required")
        return tool_result(f"Hello, {name}!")

    async def tool_slow_compute(self, call: Call, args: dict) -> dict:
        seconds = args.get("seconds")
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
            raise RpcError(-32602, "Invalid params: 'seconds' must be a number >= 0")
        label = args.get("label", "job")
        await asyncio.sleep(seconds)  # a cancelled call stops here at once
        return tool_result(f"slow_compute {label} done after {json.dumps(seconds)}s")

    async def tool_failing_job(self, call: Call, args: dict) -> dict:
        await asyncio.sleep(1.0)
        return tool_result("failing_job: simulated tool failure", is_error=True)

    async def tool_protocol_error_job(self, call: Call, args: dict) -> dict:
        await asyncio.sleep(0.5)
        raise RpcError(-32603, "protocol_error_job: simulated internal error")

    async def tool_confirm_delete(self, call: Call, args: dict) -> dict:
        filename = args.get("filename")
        if not isinstance(filename, str):
            raise RpcError(-32602, "Invalid params: 'filename' (string) is required")
        if not call.resumed:
            await asyncio.sleep(0.5)  # "work" before the question (lets a gateway create a task first)
        answers = await call.ask(
            {"confirm": elicit(f"Delete {filename}?", {"confirm": {"type": "boolean"}}, ["confirm"])}
        )
        confirmed = _accepted(answers["confirm"]).get("confirm") is True
        return tool_result(f"Deleted {filename}" if confirmed else f"Kept {filename}")

    async def tool_multi_input(self, call: Call, args: dict) -> dict:
        if not call.resumed:
            await asyncio.sleep(0.5)
        schema = {"name": _S, "confirm": {"type": "boolean"}}
        answers = await call.ask(
            {
                "first": elicit("First input: your name?", schema, ["name"]),
                "second": elicit("Second input: another name?", schema, ["name"]),
            }
        )
        first = _accepted(answers["first"]).get("name")
        second = _accepted(answers["second"]).get("name")
        return tool_result(f"multi_input complete: first={first}, second={second}")

    async def tool_test_tool_with_task(self, call: Call, args: dict) -> dict:
        answers = await call.ask({"user_name": elicit("What is your name?", {"name": _S}, ["name"])})
        await asyncio.sleep(1.5)
        return tool_result(f"Hello, {_accepted(answers['user_name']).get('name', 'stranger')}!")

    # section 6 ----------------------------------------------------------------------------------
    async def tool_test_header_param(self, call: Call, args: dict) -> dict:
        region = args.get("region")
        if not isinstance(region, str):
            raise RpcError(-32602, "Invalid params: 'region' (string) is required")
        return tool_result(f"Region: {region}")

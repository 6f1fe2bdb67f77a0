"""Check JSON-RPC frames against the MCP JSON Schemas of the revision a host speaks.

House rule: every frame mcpx sends to a host is checked against the schema of that host's
revision, and a frame that fails is a failing test.

Public API
----------
``check_frame(frame, revision, *, request_method=None)``
    Raise ``AssertionError`` (definition, JSON path, jsonschema message, truncated frame) if the
    frame is invalid for ``revision``. ``request_method`` is the method of the request that a
    response answers; it picks the result definition.
``check_wire_log(path, default_revision=None) -> int``
    Check every frame of a JSONL wire log (the daemon writes one when ``MCPX_WIRE_LOG`` is set);
    all failures are collected into one ``AssertionError``. Returns how many frames were checked.
``check_definition(instance, definition, revision)``
    Validate any JSON value against one named ``$defs`` entry (``"ext-tasks:Name"`` picks the
    tasks-extension schema). Used by the tests for schema fragments.
``result_definitions(revision) -> dict[str, str]``
    The method -> result-definition map used for ``"complete"``/legacy results.

Schemas: ``tests/data/schema/`` (see the README there). All three files declare Draft 2020-12.
Files are loaded once; compiled validators are cached per (schema, definition).

Besides the schemas, a few MUST rules from the spec prose that the schemas cannot express are
checked; each such failure says "spec rule" and cites the source (paths relative to
``/work/shared/spec/upstream/`` unless prefixed ``ext-tasks:``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.jsonschema import DRAFT202012

__all__ = ["REVISIONS", "check_definition", "check_frame", "check_wire_log", "result_definitions"]

SCHEMA_DIR = Path(__file__).resolve().parent / "data" / "schema"

# Schema keys (one per file).
CORE_2025 = "2025-11-25"
CORE_2026 = "2026-07-28"
EXT_TASKS = "ext-tasks"
_FILES = {CORE_2025: "2025-11-25.json", CORE_2026: "2026-07-28.json", EXT_TASKS: "ext-tasks.json"}

# Revision a host speaks -> core schema used for it.
REVISIONS = {
    "2025-11-25": CORE_2025,
    # No schema for these two is kept in tests/data: they are checked against the 2025-11-25
    # schema. That is an approximation: it cannot catch a field newer than the host's revision
    # (e.g. `structuredContent`, `title`, `icons` sent to a 2025-03-26 host). Tasks are the one
    # exception we enforce: they appeared in 2025-11-25, so a CreateTaskResult is not accepted
    # for these revisions (see _LEGACY_TASK_REVISIONS).
    "2025-06-18": CORE_2025,
    "2025-03-26": CORE_2025,
    "2026-07-28": CORE_2026,
}
_LEGACY_TASK_REVISIONS = {"2025-11-25"}

# Format checking is deliberately OFF. None of the three schemas puts `format: date-time` on any
# timestamp (Task.createdAt/lastUpdatedAt are plain strings in both eras), so a format checker
# would not check timestamps at all. The formats the schemas do use are `uri`, `uri-template` and
# `byte`; jsonschema checks the first two only when optional packages (rfc3987, uri-template) are
# installed, so enabling it would make results depend on the environment. Consequence: the schema
# does not reject a malformed `createdAt` such as "yesterday".
_FORMAT_CHECKER = None

_FRAME_TRUNCATE = 1500
_MAX_ERRORS_SHOWN = 5


# --------------------------------------------------------------------------------------------
# Loading and compiling
# --------------------------------------------------------------------------------------------


@functools.cache
def _documents() -> dict[str, dict]:
    docs: dict[str, dict] = {}
    for key, name in _FILES.items():
        with open(SCHEMA_DIR / name, encoding="utf-8") as fh:
            doc = json.load(fh)
        cls = validator_for(doc, default=None)
        if cls is not Draft202012Validator:
            raise RuntimeError(f"{name}: expected a Draft 2020-12 schema, $schema is {doc.get('$schema')!r}")
        Draft202012Validator.check_schema(doc)
        docs[key] = doc
    return docs


def _defs(key: str) -> dict[str, Any]:
    return _documents()[key]["$defs"]


@functools.cache
def _base_uri(key: str) -> str:
    # The core files have no $id; ext-tasks has one. References in all three are local
    # ("#/$defs/..."), so each resolves inside its own document via the registry.
    return _documents()[key].get("$id") or f"urn:mcpx:wire-schema:{key}"


@functools.cache
def _registry() -> Registry:
    return Registry().with_resources(
        (_base_uri(key), DRAFT202012.create_resource(doc)) for key, doc in _documents().items()
    )


@functools.cache
def _validator(key: str, name: str) -> Draft202012Validator:
    if name not in _defs(key):
        raise KeyError(f"{name} is not defined in the {key} schema")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": f"{_base_uri(key)}#/$defs/{name}"}
    return Draft202012Validator(schema, registry=_registry(), format_checker=_FORMAT_CHECKER)


def _schema_key(revision: str) -> str:
    try:
        return REVISIONS[revision]
    except (KeyError, TypeError):
        raise AssertionError(f"unknown MCP revision {revision!r}; expected one of {sorted(REVISIONS)}") from None


# --------------------------------------------------------------------------------------------
# Indexes derived from the schemas
# --------------------------------------------------------------------------------------------

# Union definitions that carry a method const only because the union has one member
# (2026 `ClientNotification` is just `notifications/cancelled`). They are not message definitions.
_UNION_NAMES = {"ClientRequest", "ServerRequest", "ClientNotification", "ServerNotification"}


def _method_const(defn: dict) -> str | None:
    # Core definitions put `method.const` in `properties`; ext-tasks wraps it in `allOf`.
    for part in (defn, *defn.get("allOf", ())):
        if isinstance(part, dict):
            const = part.get("properties", {}).get("method", {}).get("const")
            if isinstance(const, str):
                return const
    return None


@functools.cache
def _message_index(key: str) -> dict[str, tuple[str, ...]]:
    """method -> names of the Request/Notification definitions whose `method.const` is it."""
    index: dict[str, list[str]] = {}
    for name, defn in _defs(key).items():
        if name in _UNION_NAMES:
            continue
        method = _method_const(defn)
        if method is not None:
            index.setdefault(method, []).append(name)
    return {m: tuple(sorted(names)) for m, names in index.items()}


def _message_defs(revision: str, method: str) -> list[tuple[str, str]]:
    key = _schema_key(revision)
    names = _message_index(key).get(method)
    if names:
        return [(key, n) for n in names]
    if key == CORE_2026:
        # tasks/get, tasks/update, tasks/cancel, notifications/tasks live only in ext-tasks.
        # Core wins for methods both define (ext-tasks carries copies of e.g. ElicitRequest).
        return [(EXT_TASKS, n) for n in _message_index(EXT_TASKS).get(method, ())]
    return []


def _refs(schema: dict) -> list[str]:
    if "$ref" in schema:
        return [schema["$ref"].rsplit("/", 1)[-1]]
    return [r["$ref"].rsplit("/", 1)[-1] for r in schema.get("anyOf", ()) if "$ref" in r]


# Results the schema does not pair with a method (hand-written).
_HAND_RESULTS_2025 = {
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
}
# 2026-07-28 removed ping, logging/setLevel and resources/(un)subscribe (changelog.mdx:20); their
# results would fall through to the generic `Result`, which is what EmptyResult is anyway.
_HAND_RESULTS_2026: dict[str, str] = {}


@functools.cache
def _result_map(key: str) -> dict[str, tuple[str, str]]:
    """method -> (schema key, result definition)."""
    defs = _defs(key)
    out: dict[str, tuple[str, str]] = {}
    if key == CORE_2026:
        # 2026 pairs them explicitly: `XResultResponse.properties.result` names the result type
        # (possibly `anyOf [InputRequiredResult, X]`), and `XRequest` gives the method.
        for name, defn in defs.items():
            if not name.endswith("ResultResponse") or name == "JSONRPCResultResponse":
                continue
            request = defs.get(name[: -len("ResultResponse")] + "Request")
            method = request and _method_const(request)
            results = [r for r in _refs(defn["properties"]["result"]) if r != "InputRequiredResult"]
            if method and len(results) == 1:
                out[method] = (key, results[0])
        # ext-tasks pairs by name only: XRequest <-> XResult (GetTask, UpdateTask, CancelTask).
        ext = _defs(EXT_TASKS)
        for name, defn in ext.items():
            method = _method_const(defn) if name.endswith("Request") else None
            result = name[: -len("Request")] + "Result" if method else None
            if method and result in ext and method not in _message_index(CORE_2026):
                out[method] = (EXT_TASKS, result)
        hand = _HAND_RESULTS_2026
    else:
        # 2025 has no XResultResponse; pair each member of the ServerResult/ClientResult unions
        # with the XRequest of the same stem (InitializeResult <-> InitializeRequest, ...).
        for union in ("ServerResult", "ClientResult"):
            for result in _refs(defs[union]):
                request = defs.get(result[: -len("Result")] + "Request") if result.endswith("Result") else None
                method = request and _method_const(request)
                if method:
                    out[method] = (key, result)
        hand = _HAND_RESULTS_2025
    for method, result in hand.items():
        out.setdefault(method, (key, result))
    return out


def result_definitions(revision: str) -> dict[str, str]:
    """method -> result definition ("Name", or "ext-tasks:Name") used for ordinary results.

    Special cases applied on top by check_frame: 2026 dispatches on `resultType` first
    ("input_required" -> InputRequiredResult, "task" -> ext-tasks:CreateTaskResult); 2025-11-25
    `tools/call`, `sampling/createMessage`, `elicitation/create` results with a `task` key ->
    CreateTaskResult; 2025 `tasks/result` -> GetTaskPayloadResult and CallToolResult. Methods not
    in the map validate against the generic `Result`.
    """
    key = _schema_key(revision)
    return {m: (n if k == key else f"{k}:{n}") for m, (k, n) in sorted(_result_map(key).items())}


@functools.cache
def _error_defs(key: str) -> dict[int, tuple[tuple[str, str], ...]]:
    """error code -> ((definition, level)); level is "response" (the definition describes the
    whole JSONRPCErrorResponse, e.g. UnsupportedProtocolVersionError) or "error" (it describes
    the `error` object, e.g. InvalidParamsError)."""
    out: dict[int, list[tuple[str, str]]] = {}
    for name, defn in _defs(key).items():
        props = defn.get("properties", {}) if isinstance(defn, dict) else {}
        code = props.get("code", {}).get("const")
        if isinstance(code, int):
            out.setdefault(code, []).append((name, "error"))
            continue
        for part in props.get("error", {}).get("allOf", ()):
            code = part.get("properties", {}).get("code", {}).get("const")
            if isinstance(code, int):
                out.setdefault(code, []).append((name, "response"))
    return {c: tuple(v) for c, v in out.items()}


# --------------------------------------------------------------------------------------------
# Failure reporting
# --------------------------------------------------------------------------------------------


def _dump(frame: Any) -> str:
    try:
        text = json.dumps(frame, ensure_ascii=False, sort_keys=False, default=repr)
    except (TypeError, ValueError):
        text = repr(frame)
    if len(text) > _FRAME_TRUNCATE:
        text = text[:_FRAME_TRUNCATE] + f"... [truncated, {len(text)} chars]"
    return text


def _leaves(error: ValidationError) -> list[ValidationError]:
    """The complaints of the anyOf/oneOf branch that came closest to matching.

    Branches are ranked by how many `const`/`enum` mismatches they have (a discriminator such as
    `status` not matching means the branch was not the intended one), then by error count.
    """
    if not error.context:
        return [error]
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0] if sub.relative_schema_path else None, []).append(sub)
    best = min(branches.values(), key=lambda errs: (sum(e.validator in ("const", "enum") for e in errs), len(errs)))
    return [leaf for sub in best for leaf in _leaves(sub)]


def _path(where: str, error: ValidationError) -> str:
    return where + error.json_path[1:]


class _Failures:
    def __init__(self, frame: Any, revision: str) -> None:
        self.frame = frame
        self.revision = revision
        self.items: list[str] = []

    def schema(self, key: str, name: str, instance: Any, where: str = "$") -> bool:
        errors = list(_validator(key, name).iter_errors(instance))
        if not errors:
            return True
        label = f"{key} schema, $defs/{name}"
        lines = []
        for err in errors[:_MAX_ERRORS_SHOWN]:
            lines.append(f"    at {_path(where, err)}: {err.message}")
            if err.context:
                # anyOf/oneOf: show the closest branch's own complaints.
                for leaf in _leaves(err)[:3]:
                    lines.append(f"      e.g. at {_path(where, leaf)}: {leaf.message}")
        if len(errors) > _MAX_ERRORS_SHOWN:
            lines.append(f"    ... and {len(errors) - _MAX_ERRORS_SHOWN} more")
        self.items.append(f"invalid as {label} (validating {where}):\n" + "\n".join(lines))
        return False

    def rule(self, message: str, cite: str) -> None:
        self.items.append(f"spec rule: {message} [{cite}]")

    def raise_if_any(self) -> None:
        if self.items:
            body = "\n".join(f"  - {item}" for item in self.items)
            raise AssertionError(f"frame invalid for MCP {self.revision}:\n{body}\n  frame: {_dump(self.frame)}")


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------

# 2025-11-25 request types whose params carry `task` (TaskAugmentedRequestParams) and may
# therefore be answered with CreateTaskResult (docs/specification/2025-11-25/basic/utilities/tasks.mdx:128,463).
_TASK_AUGMENTABLE_2025 = ("tools/call", "sampling/createMessage", "elicitation/create")
# docs/specification/2026-07-28/basic/patterns/mrtr.mdx:184-192
_INPUT_REQUIRED_METHODS = ("prompts/get", "resources/read", "tools/call")
# ext-tasks:specification/draft/tasks.md:87-89,102
_TASK_RESULT_METHODS = ("tools/call",)
# Notifications that 2026 delivers only on a subscriptions/listen stream, so they MUST carry
# _meta["io.modelcontextprotocol/subscriptionId"] (docs/specification/2026-07-28/basic/index.mdx:412-414;
# the schema descriptions of each; ext-tasks:specification/draft/tasks.md:414-422 for notifications/tasks).
_LISTEN_ONLY_NOTIFICATIONS_2026 = (
    "notifications/subscriptions/acknowledged",
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
    "notifications/tasks",
)
_TASK_FILTER_DEFS = {
    "subscriptions/listen": "TaskSubscriptionNotifications",
    "notifications/subscriptions/acknowledged": "TaskSubscriptionAcknowledgedNotifications",
}
_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_RELATED_TASK = "io.modelcontextprotocol/related-task"


def check_frame(frame: dict, revision: str, *, request_method: str | None = None) -> None:
    """Raise AssertionError if `frame` is not a valid message of MCP `revision`.

    `request_method` names the request a response answers (ignored for requests and
    notifications, whose own `method` is used).
    """
    key = _schema_key(revision)
    fails = _Failures(frame, revision)
    if not isinstance(frame, dict):
        fails.items.append(f"a frame must be a JSON object, got {type(frame).__name__}")
    elif "method" in frame:
        _check_message(fails, frame, revision, key, is_request="id" in frame)
    elif "error" in frame:
        if "result" in frame:
            fails.rule("a response carries either `result` or `error`, never both", "JSON-RPC 2.0 §5")
        _check_error(fails, frame, revision, key)
    elif "result" in frame:
        _check_result(fails, frame, revision, key, request_method)
    else:
        fails.items.append("not a JSON-RPC message: no `method`, `result` or `error`")
    fails.raise_if_any()


def _check_message(fails: _Failures, frame: dict, revision: str, key: str, *, is_request: bool) -> None:
    envelope = "JSONRPCRequest" if is_request else "JSONRPCNotification"
    fails.schema(key, envelope, frame)
    method = frame.get("method")
    if not isinstance(method, str):
        return
    kind = "Request" if is_request else "Notification"
    defs = _message_defs(revision, method)
    specific = [(k, n) for k, n in defs if n.endswith(kind)]
    if defs and not specific:
        other = "notification" if is_request else "request"
        fails.items.append(
            f"`{method}` is a {other} method in the {key} schema ({', '.join(n for _, n in defs)}), "
            f"but the frame {'has' if is_request else 'lacks'} an `id`"
        )
    # A method no definition names (vendor or removed method) is checked as a bare envelope only.
    for k, name in specific:
        fails.schema(k, name, frame)
    params = frame.get("params") if isinstance(frame.get("params"), dict) else {}
    if key == CORE_2026 and is_request and specific and all(k == EXT_TASKS for k, _ in specific):
        # [DIGEST X7] ext-tasks request definitions do not require `_meta`, but core makes
        # protocolVersion and clientCapabilities MUST on every request
        # (docs/specification/2026-07-28/basic/index.mdx:373-382): check params as core RequestParams.
        fails.schema(CORE_2026, "RequestParams", params, "$.params")
    if key == CORE_2026 and method in _TASK_FILTER_DEFS:
        # Core SubscriptionFilter is open, so an ill-typed `taskIds` would pass it; the extension
        # types it (ext-tasks:specification/draft/tasks.md:425-455).
        filt = params.get("notifications")
        if isinstance(filt, dict) and "taskIds" in filt:
            fails.schema(EXT_TASKS, _TASK_FILTER_DEFS[method], filt, "$.params.notifications")
    if key == CORE_2026 and not is_request and method in _LISTEN_ONLY_NOTIFICATIONS_2026:
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        if _SUBSCRIPTION_ID not in meta:
            fails.rule(
                f"`{method}` travels only on a subscriptions/listen stream and MUST carry "
                f"params._meta[{_SUBSCRIPTION_ID!r}]",
                "docs/specification/2026-07-28/basic/index.mdx:412-414",
            )
    if key == CORE_2026 and method == "notifications/tasks":
        _check_inline_task_result(fails, params, "$.params")


def _check_error(fails: _Failures, frame: dict, revision: str, key: str) -> None:
    if not fails.schema(key, "JSONRPCErrorResponse", frame):
        return
    code = frame["error"]["code"]
    for name, level in _error_defs(key).get(code, ()):
        if level == "response":
            fails.schema(key, name, frame)
        else:
            fails.schema(key, name, frame["error"], "$.error")
    if key == CORE_2026:
        # docs/specification/2026-07-28/basic/index.mdx:117-144: -32020..-32099 holds only codes the
        # spec defines (the schema's -32020/-32021/-32022); -32002 and -32042 MUST NOT be emitted.
        defined = {c for c in _error_defs(key) if -32099 <= c <= -32020}
        if code == -32002 or (-32099 <= code <= -32020 and code not in defined):
            fails.rule(
                f"error code {code} MUST NOT be emitted under 2026-07-28 "
                f"(reserved range -32020..-32099 allows only {sorted(defined)}; -32002 is legacy)",
                "docs/specification/2026-07-28/basic/index.mdx:117-144",
            )


def _check_result(fails: _Failures, frame: dict, revision: str, key: str, method: str | None) -> None:
    result = frame.get("result")
    if key == CORE_2026 and isinstance(result, dict) and "resultType" not in result:
        fails.rule(
            "every 2026-07-28 result MUST carry `resultType`", "docs/specification/2026-07-28/basic/index.mdx:73"
        )
    if not fails.schema(key, "JSONRPCResultResponse", frame) or not isinstance(result, dict):
        return
    if key == CORE_2026:
        _check_result_2026(fails, result, method)
    else:
        _check_result_2025(fails, result, revision, method)


def _check_result_2026(fails: _Failures, result: dict, method: str | None) -> None:
    # DIGEST C2: dispatch on resultType first, then validate against the matching type. The
    # schema's own unions (e.g. CallToolResultResponse = InputRequiredResult | CallToolResult)
    # would accept a CreateTaskResult as an open InputRequiredResult.
    rt = result["resultType"]
    if rt == "input_required":
        if method is not None and method not in _INPUT_REQUIRED_METHODS:
            fails.rule(
                f'`{method}` MUST NOT be answered with resultType "input_required" '
                f"(only {', '.join(_INPUT_REQUIRED_METHODS)})",
                "docs/specification/2026-07-28/basic/patterns/mrtr.mdx:184-192",
            )
        if "inputRequests" not in result and "requestState" not in result:
            fails.rule(
                "an InputRequiredResult MUST include `inputRequests` or `requestState`",
                "docs/specification/2026-07-28/basic/patterns/mrtr.mdx:245",
            )
        fails.schema(CORE_2026, "InputRequiredResult", result, "$.result")
    elif rt == "task":
        if method is not None and method not in _TASK_RESULT_METHODS:
            fails.rule(
                f'resultType "task" is only for CreateTaskResult, which only '
                f'{", ".join(_TASK_RESULT_METHODS)} may return; `{method}` must use "complete" (DIGEST X1)',
                "ext-tasks:specification/draft/tasks.md:87-102,338",
            )
        fails.schema(EXT_TASKS, "CreateTaskResult", result, "$.result")
    elif rt == "complete":
        # A method we cannot map (None, vendor, removed) validates against the generic Result.
        k, name = _result_map(CORE_2026).get(method, (CORE_2026, "Result")) if method else (CORE_2026, "Result")
        fails.schema(k, name, result, "$.result")
        if method == "tasks/get":
            _check_inline_task_result(fails, result, "$.result")
    else:
        fails.rule(
            f'unrecognized resultType {rt!r}: core defines "complete" and "input_required", '
            f'the tasks extension adds "task"; anything else MUST be treated as invalid',
            "docs/specification/2026-07-28/basic/index.mdx:81-84",
        )


def _check_inline_task_result(fails: _Failures, task: dict, where: str) -> None:
    # [derived, DIGEST X10] ext-tasks types a completed task's `result` as a bare JSON object; the
    # only task-augmentable method is tools/call, so the inlined value is a 2026 CallToolResult,
    # which requires resultType. mcpx as a server always sends "resultType": "complete" there.
    if task.get("status") == "completed" and isinstance(task.get("result"), dict):
        fails.schema(CORE_2026, "CallToolResult", task["result"], where + ".result")


def _check_result_2025(fails: _Failures, result: dict, revision: str, method: str | None) -> None:
    if method in _TASK_AUGMENTABLE_2025 and "task" in result and revision in _LEGACY_TASK_REVISIONS:
        # DIGEST L4: the ServerResult union lacks CreateTaskResult; check it explicitly.
        fails.schema(CORE_2025, "CreateTaskResult", result, "$.result")
        return
    if method == "tasks/result":
        # GetTaskPayloadResult is open ("matches the result type of the original request"). mcpx
        # only runs tools/call as tasks, so the payload must also be a CallToolResult.
        fails.schema(CORE_2025, "GetTaskPayloadResult", result, "$.result")
        fails.schema(CORE_2025, "CallToolResult", result, "$.result")
        meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
        if _RELATED_TASK not in meta:
            fails.rule(
                f"a tasks/result response MUST carry result._meta[{_RELATED_TASK!r}]",
                "docs/specification/2025-11-25/basic/utilities/tasks.mdx:755",
            )
        else:
            fails.schema(CORE_2025, "RelatedTaskMetadata", meta[_RELATED_TASK], f"$.result._meta[{_RELATED_TASK!r}]")
        return
    # A method we cannot map (None, vendor, unknown) validates against the generic Result.
    k, name = _result_map(CORE_2025).get(method, (CORE_2025, "Result")) if method else (CORE_2025, "Result")
    fails.schema(k, name, result, "$.result")


def check_definition(instance: Any, definition: str, revision: str) -> None:
    """Validate `instance` against one `$defs` entry of the revision's schema.

    `definition` is a name such as "ClientCapabilities", or "ext-tasks:GetTaskResult" for the
    tasks-extension schema. Raises AssertionError when invalid.
    """
    key = _schema_key(revision)
    if definition.startswith(EXT_TASKS + ":"):
        key, definition = EXT_TASKS, definition[len(EXT_TASKS) + 1 :]
    fails = _Failures(instance, revision)
    fails.schema(key, definition, instance)
    fails.raise_if_any()


# --------------------------------------------------------------------------------------------
# Wire logs
# --------------------------------------------------------------------------------------------


def check_wire_log(path: str | Path, default_revision: str | None = None) -> int:
    """Check every frame of a JSONL wire log; return how many frames were checked.

    Each line: {"rev": "<revision>", "method": "<method of the request this frame answers, or of
    the frame itself>", "frame": {...}}. `default_revision` stands in for a missing "rev". All
    failures are collected and raised together as one AssertionError.
    """
    failures: list[str] = []
    checked = 0
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                failures.append(f"line {lineno}: not JSON ({exc})")
                continue
            if not isinstance(entry, dict) or "frame" not in entry:
                failures.append(f"line {lineno}: expected an object with a `frame` key, got {_dump(entry)}")
                continue
            revision = entry.get("rev") or default_revision
            method = entry.get("method")
            frame = entry["frame"]
            checked += 1
            if revision is None:
                failures.append(f"line {lineno}: no `rev` and no default_revision")
                continue
            if isinstance(frame, dict) and "method" in frame and method is not None and method != frame["method"]:
                failures.append(
                    f"line {lineno}: log says method {method!r} but the frame's method is {frame['method']!r}"
                )
            try:
                check_frame(frame, revision, request_method=method)
            except AssertionError as exc:
                failures.append(f"line {lineno} (rev {revision}, method {method}): {exc}")
    if failures:
        raise AssertionError(
            f"{len(failures)} wire-log failure(s) in {path} ({checked} frames checked):\n" + "\n".join(failures)
        )
    return checked

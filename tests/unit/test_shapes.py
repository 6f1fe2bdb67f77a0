"""One source for each `/v1` shape: the event kinds are listed once (mcpx/events/kinds.py), /v1's
models and the event schemas define no JSON twice, and the console's TypedDicts (console/wire.py)
name only fields the daemon's JSON Schemas have, present and typed as the daemon sends them."""

from __future__ import annotations

import ast
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from pydantic import BaseModel

import mcpx
from console import state, wire
from mcpx.api import event_schemas, models
from mcpx.cli import text_format
from mcpx.events import bus, kinds
from mcpx.records import task as task_model

ROOT = Path(mcpx.__file__).resolve().parents[1]
Json = dict[str, Any]


# ---- the event kinds and task statuses ---------------------------------------------------------------


def test_the_kinds_are_one_tuple_everyone_shares() -> None:
    assert get_args(kinds.EventKind) == kinds.EVENT_KINDS and len(set(kinds.EVENT_KINDS)) == 18
    assert bus.EVENT_KINDS is kinds.EVENT_KINDS and bus.EventKind is kinds.EventKind
    assert text_format.EVENT_KINDS is kinds.EVENT_KINDS  # the CLI's --kind choices
    assert set(event_schemas.DATA) == set(kinds.EVENT_KINDS)
    assert event_schemas.envelope_schema()["properties"]["kind"]["enum"] == list(kinds.EVENT_KINDS)


def _kind_lists(path: Path) -> list[int]:
    """Lines where a literal tuple, list, set or Literal[...] spells out three or more event kinds."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else []
        strings = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        if len(strings & set(kinds.EVENT_KINDS)) >= 3:
            found.append(node.lineno)
    return found


def test_no_module_spells_out_the_event_kinds_but_kinds_py() -> None:
    spelt = {
        str(path.relative_to(ROOT)): lines
        for folder in ("mcpx", "console", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (lines := _kind_lists(path))
    }
    assert set(spelt) == {"mcpx/events/kinds.py"}, spelt


def test_the_task_statuses_agree_everywhere_they_are_named() -> None:
    statuses = get_args(models.TaskStatus)
    assert event_schemas.TaskStatus is models.TaskStatus
    assert statuses == text_format.TASK_STATUSES  # the CLI's --status choices
    assert get_args(task_model.Status) == statuses
    assert statuses == state.STATUSES


# ---- /v1's models and the event schemas -------------------------------------------------------------


def _models(*modules: types.ModuleType) -> list[type[BaseModel]]:
    return [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__
    ]


def _own_fields(model: type[BaseModel]) -> set[str]:
    return set(vars(model).get("__annotations__", {})) - {"model_config"}


def test_no_model_restates_the_fields_of_another() -> None:
    """A model whose own fields are all another's own fields describes the same JSON: it should
    take them from that one (as QuestionOpened takes /v1's Question)."""
    every = _models(models, event_schemas)
    restated = [
        (a.__name__, b.__name__)
        for a in every
        for b in every
        if a is not b and len(_own_fields(a)) >= 3 and _own_fields(a) <= _own_fields(b)
    ]
    assert restated == []


@pytest.mark.parametrize(
    ("data", "api"),
    [(event_schemas.QuestionOpened, models.Question), (event_schemas.ConnectionOpened, models.ConnectionRecord)],
)
def test_the_event_data_that_v1_also_serves_is_v1s_model(data: type[BaseModel], api: type[BaseModel]) -> None:
    assert issubclass(data, api) and list(data.model_fields) == list(api.model_fields)
    assert data.model_config.get("extra") == "forbid"  # events carry nothing else


def test_the_connection_v1_serves_is_the_record_with_its_counts() -> None:
    assert issubclass(models.Connection, models.ConnectionRecord)
    assert set(models.Connection.model_fields) - set(models.ConnectionRecord.model_fields) == {"tasks", "needsInput"}


def test_the_event_envelope_is_v1s_event_out() -> None:
    envelope = event_schemas.envelope_schema()
    assert list(envelope["properties"]) == ["type", *models.EventOut.model_fields]
    assert envelope["required"] == [n for n, f in models.EventOut.model_fields.items() if f.is_required()]


# ---- console/wire.py against the daemon's schemas ----------------------------------------------------


def _resolve(schema: Json, defs: Json) -> Json:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    return schema


_PLAIN = {str: "string", int: "integer", bool: "boolean", type(None): "null"}


def _json_type(schema: Json) -> str | None:
    """The JSON type of every value the schema admits (None: more than one, or unsaid)."""
    if "type" in schema:
        return str(schema["type"])
    values = schema.get("enum", [schema["const"]] if "const" in schema else [])
    found = {"null" if v is None else _PLAIN.get(type(v), "other") for v in values}
    return found.pop() if len(found) == 1 else None


def _misfits(hint: Any, schema: Json, defs: Json, where: str) -> list[str]:
    """What the daemon may send at `where` (its JSON Schema) that the console's type does not take."""
    schema = _resolve(schema, defs)
    origin = get_origin(hint)
    if hint is Any:
        return []
    if "anyOf" in schema:
        return [m for option in schema["anyOf"] for m in _misfits(hint, option, defs, where)]
    if origin in (Union, types.UnionType):
        fits = [_misfits(option, schema, defs, where) for option in get_args(hint)]
        return [] if [] in fits else [f"{where}: {schema} fits none of {hint}"]
    if origin is Literal:
        values = schema.get("enum", [schema["const"]] if "const" in schema else None)
        return [] if values is not None and set(values) <= set(get_args(hint)) else [f"{where}: {schema} is not {hint}"]
    if is_typeddict(hint):
        return _typed_dict_misfits(hint, schema, defs, where)
    if origin is list:
        if _json_type(schema) != "array":
            return [f"{where}: {schema} is not a list"]
        return _misfits(get_args(hint)[0], schema.get("items", {}), defs, f"{where}[]")
    if origin is dict:
        return [] if _json_type(schema) == "object" else [f"{where}: {schema} is not an object"]
    return [] if _json_type(schema) == _PLAIN.get(hint) else [f"{where}: {schema} is not {hint}"]


def _typed_dict_misfits(typed: Any, schema: Json, defs: Json, where: str) -> list[str]:
    properties, required = schema.get("properties", {}), set(schema.get("required", []))
    misfits = []
    for key, hint in get_type_hints(typed, include_extras=True).items():
        # (Read from the hints: under `from __future__ import annotations` 3.11's TypedDict does not
        # see NotRequired, and counts every key in __required_keys__.)
        optional = get_origin(hint) is typing.NotRequired
        hint = get_args(hint)[0] if optional else hint
        if key not in properties:
            misfits.append(f"{where}.{key}: the daemon has no such field")
        elif not optional and key not in required:
            misfits.append(f"{where}.{key}: the daemon may leave it out (mark it NotRequired)")
        else:
            misfits += _misfits(hint, properties[key], defs, f"{where}.{key}")
    return misfits


def _model_schema(model: type[BaseModel]) -> Json:
    return model.model_json_schema(mode="serialization")


def _feed_event() -> Json:
    """The envelope as the feed sends it: with its `type` (a /v1/events entry has none)."""
    envelope = event_schemas.envelope_schema()
    return {**envelope, "required": ["type", *envelope["required"]]}


# Each TypedDict of console/wire.py the daemon has a JSON Schema for, and that schema. The feed's
# other messages (snapshot, reset, heartbeat, gap) are written by mcpx/api/feed.py as plain dicts:
# wire.py is their only definition.
WIRE: dict[str, tuple[Any, Json]] = {
    "InputRequest": (wire.InputRequest, _model_schema(models.InputRequest)),
    "TaskEvent": (wire.TaskEvent, _model_schema(models.EventOut)),
    "TaskDetail": (wire.TaskDetail, _model_schema(models.TaskDetail)),
    "Frame": (wire.Frame, _model_schema(models.FrameOut)),
    "EventMessage": (wire.EventMessage, _feed_event()),
}
UNCHECKED = {"SnapshotMessage", "ResetMessage", "HeartbeatMessage", "GapMessage"}


@pytest.mark.parametrize("name", sorted(WIRE))
def test_the_consoles_wire_types_fit_the_daemons_schemas(name: str) -> None:
    typed, schema = WIRE[name]
    assert _typed_dict_misfits(typed, schema, schema.get("$defs", {}), name) == []


def test_every_wire_type_is_checked_or_has_no_daemon_schema() -> None:
    typed = {n for n, v in vars(wire).items() if is_typeddict(v)}
    assert typed == set(WIRE) | UNCHECKED
    assert {"snapshot", "event", "reset", "heartbeat", "gap"} == wire.FEED_TYPES


class _Drifted(typing.TypedDict):
    seq: int
    createdAt: str  # renamed by the daemon (createdMs)
    by: str  # the daemon may leave it out, or send null
    side: Literal["host"]  # the daemon also sends "upstream"
    frames: list[int]


def test_the_wire_check_finds_drift() -> None:
    schema = {
        "properties": {
            "seq": {"type": "integer"},
            "createdMs": {"type": "integer"},
            "by": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "side": {"enum": ["host", "upstream"], "type": "string"},
            "frames": {"type": "array", "items": {"$ref": "#/$defs/F"}},
        },
        "required": ["seq", "createdMs", "side", "frames"],
        "$defs": {"F": {"type": "object"}},
    }
    assert _typed_dict_misfits(_Drifted, schema, schema["$defs"], "D") == [
        "D.createdAt: the daemon has no such field",
        "D.by: the daemon may leave it out (mark it NotRequired)",
        "D.side: {'enum': ['host', 'upstream'], 'type': 'string'} is not typing.Literal['host']",
        "D.frames[]: {'type': 'object'} is not <class 'int'>",
    ]

"""MCP elicitation forms: parse a ``requestedSchema``, check an answer against it, coerce CLI strings.

Pure. Both revisions (2025-11-25, 2026-07-28) define the same restricted schema: a flat ``type:
object`` of ``PrimitiveSchemaDefinition``s — string (``format`` email/uri/date/date-time), number,
integer, boolean, single-select (``enum``; ``oneOf`` const/title; legacy ``enum`` + ``enumNames``)
and multi-select (``type: array``, ``items.enum`` or ``items.anyOf``). Where the spec is loose:

- Anything outside that subset raises ``FormError``: nested objects, other arrays, union types,
  wrong-typed keywords or defaults, empty or duplicate options, ``required`` naming no property, a
  ``pattern`` Python cannot compile. Unknown keywords and unknown formats are ignored (JSON Schema
  formats are annotations); ``properties`` may be absent; ``enum``/``oneOf`` without ``type`` is a
  string choice; ``default: null`` is no default.
- ``pattern`` (2025-11-25 prose only; in neither schema.json) is honoured, unanchored (``re.search``).
- An integer is a JSON integer (``3.0`` is not); booleans are never numbers, NaN/infinity never are.
  Bounds are inclusive; lengths count code points. Email: ``local@domain``, no spaces, no empty
  labels; URI: a scheme, ``:``, no whitespace; date/date-time: RFC 3339 (offset required).
- Content may not carry unknown fields, ``null`` values or a multi-select option twice; ``None``
  content is an empty answer (``ElicitResult.content`` is optional); a whole-content error is keyed "".
- ``fill_defaults``: an accepted answer that leaves a field out gets the field's default before it
  goes upstream (SEP-1034), whoever answered (a host, an operator).
- ``coerce`` only reports strings that cannot become the field's JSON type; booleans: true/false,
  yes/no, y/n, on/off, 1/0; choices: an option's value, else title, else a unique case-insensitive
  match (anything else stays a string for ``validate`` to reject); multi-select: ``a,b`` or a JSON array.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date
from functools import partial
from typing import Any, Literal

Kind = Literal["string", "number", "integer", "boolean", "choice", "multi_choice"]
Format = Literal["email", "uri", "date", "date-time"]
Value = str | int | float | bool | tuple[str, ...]

FORMATS: tuple[Format, ...] = ("email", "uri", "date", "date-time")
_EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(\.[^@\s.]+)*")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:\S*")
_TIME = r"[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-]([0-9]{2}):([0-9]{2}))"
_DATE_TIME = re.compile(rf"([0-9]{{4}})-([0-9]{{2}})-([0-9]{{2}})({_TIME})?")  # RFC 3339 full-date, date-time
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_FORMAT_PROBLEMS: dict[Format, str] = {
    "email": "must be an email address (name@example.com)",
    "uri": "must be a URI (scheme:..., e.g. https://example.com)",
    "date": "must be an RFC 3339 date (2025-01-31)",
    "date-time": "must be an RFC 3339 date-time with an offset (2025-01-31T09:30:00Z)",
}
_BOOLEANS = {"true": True, "yes": True, "y": True, "on": True, "1": True}
_BOOLEANS |= {"false": False, "no": False, "n": False, "off": False, "0": False}


class FormError(ValueError):
    """The requested schema is not a form this module can show (outside the spec's restricted subset)."""


@dataclass(frozen=True, slots=True)
class Option:
    value: str
    title: str  # the value itself when the schema gives no title


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    kind: Kind
    title: str | None = None
    description: str | None = None
    required: bool = False
    default: Value | None = None  # a multi_choice default is a tuple
    options: tuple[Option, ...] = ()
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    format: Format | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_items: int | None = None
    max_items: int | None = None

    @property
    def label(self) -> str:
        return self.title or self.name


@dataclass(frozen=True, slots=True)
class Form:
    title: str | None
    description: str | None
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "string": (lambda v: isinstance(v, str), "a string"),
    "boolean": (lambda v: isinstance(v, bool), "a boolean"),
    "number": (_is_number, "a number"),
    "integer": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a non-negative integer"),
}


def _get(where: str, schema: Mapping[str, Any], key: str, check: str) -> Any:
    """``schema[key]`` (``None`` when absent or null), or ``FormError`` when it has the wrong type."""
    value = schema.get(key)
    ok, what = _CHECKS[check]
    if value is not None and not ok(value):
        raise FormError(f"{where}: {key!r} must be {what}")
    return value


def _strings(where: str, value: object, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FormError(f"{where}: {key!r} must be a list of strings")
    return value


def _options(where: str, schema: Mapping[str, Any], key: str) -> tuple[Option, ...]:
    if key == "enum":
        values = _strings(where, schema["enum"], "enum")
        names = schema.get("enumNames")
        titles = values if names is None else _strings(where, names, "enumNames")
        if len(titles) != len(values):
            raise FormError(f"{where}: 'enumNames' must have one title per 'enum' value")
        options = tuple(Option(v, t) for v, t in zip(values, titles, strict=True))
    else:
        entries = schema[key]
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise FormError(f"{where}: {key!r} must be a list of {{const, title}} objects")
        if not all(isinstance(e.get("const"), str) and isinstance(e.get("title", ""), str) for e in entries):
            raise FormError(f"{where}: each {key!r} entry needs a string 'const' (and a string 'title')")
        options = tuple(Option(e["const"], e.get("title", e["const"])) for e in entries)
    if not options:
        raise FormError(f"{where}: no options to choose from")
    if len({o.value for o in options}) != len(options):
        raise FormError(f"{where}: an option value appears twice")
    return options


def _field(name: str, schema: object, required: bool) -> Field:
    where = f"property {name!r}"
    if not isinstance(schema, dict):
        raise FormError(f"{where}: a property schema must be an object")
    get = partial(_get, where, schema)
    choice = "enum" if "enum" in schema else "oneOf" if "oneOf" in schema else None
    type_ = schema.get("type", "string" if choice else None)
    if choice and type_ != "string":
        raise FormError(f"{where}: {choice!r} is only supported on a string (a multi-select puts it in 'items')")
    title, description = get("title", "string"), get("description", "string")
    base = Field(name=name, kind="string", title=title, description=description, required=required)
    if type_ == "string" and choice:
        return replace(base, kind="choice", options=_options(where, schema, choice), default=get("default", "string"))
    if type_ == "string":
        pattern = get("pattern", "string")
        try:
            re.compile(pattern or "")
        except re.error as e:
            raise FormError(f"{where}: 'pattern' is not a regular expression Python understands ({e})") from None
        fmt = schema.get("format") if schema.get("format") in FORMATS else None  # unknown formats: annotations
        min_length, max_length = get("minLength", "count"), get("maxLength", "count")
        return replace(
            base,
            default=get("default", "string"),
            pattern=pattern,
            format=fmt,
            min_length=min_length,
            max_length=max_length,
        )
    if type_ in ("number", "integer"):
        minimum, maximum = get("minimum", "number"), get("maximum", "number")
        return replace(base, kind=type_, default=get("default", type_), minimum=minimum, maximum=maximum)
    if type_ == "boolean":
        return replace(base, kind="boolean", default=get("default", "boolean"))
    if type_ == "array":
        items = schema.get("items")
        key = next((k for k in ("enum", "anyOf") if isinstance(items, dict) and k in items), None)
        if not isinstance(items, dict) or key is None or items.get("type", "string") != "string":
            raise FormError(f"{where}: an array is only supported as a multi-select ('items' with 'enum' or 'anyOf')")
        default = None if schema.get("default") is None else tuple(_strings(where, schema["default"], "default"))
        options, min_items, max_items = _options(where, items, key), get("minItems", "count"), get("maxItems", "count")
        return replace(
            base, kind="multi_choice", options=options, default=default, min_items=min_items, max_items=max_items
        )
    if type_ == "object":
        raise FormError(f"{where}: nested objects are not supported (a form is flat)")
    raise FormError(f"{where}: type {type_!r} cannot be shown as a form field")


def parse_form(requested_schema: object) -> Form:
    """The form a ``requestedSchema`` describes; ``FormError`` says why when it is not one."""
    if not isinstance(requested_schema, dict) or requested_schema.get("type") != "object":
        raise FormError("the requested schema must be an object schema ({'type': 'object', 'properties': ...})")
    properties = requested_schema.get("properties", {})
    if not isinstance(properties, dict):
        raise FormError("'properties' must be an object")
    where = "the requested schema"
    required = _strings(where, requested_schema.get("required", []), "required")
    unknown = [r for r in required if r not in properties]
    if unknown:
        raise FormError(f"'required' names properties that do not exist: {', '.join(unknown)}")
    return Form(
        title=_get(where, requested_schema, "title", "string"),
        description=_get(where, requested_schema, "description", "string"),
        fields=tuple(_field(name, schema, name in required) for name, schema in properties.items()),
    )


def _check_format(fmt: Format, value: str) -> bool:
    if fmt == "email":
        return _EMAIL.fullmatch(value) is not None
    if fmt == "uri":
        return _URI.fullmatch(value) is not None
    m = _DATE_TIME.fullmatch(value)
    if m is None or (m[4] is None) != (fmt == "date"):
        return False
    try:
        date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return False
    if fmt == "date":
        return True
    time_ok = int(m[5]) <= 23 and int(m[6]) <= 59 and int(m[7]) <= 60  # 60: a leap second
    return time_ok and (m[9] in "Zz" or (int(m[10]) <= 23 and int(m[11]) <= 59))


def _plural(n: int | float, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _problem(f: Field, value: object) -> str | None:
    if f.kind in ("string", "choice"):
        if not isinstance(value, str):
            return "must be a string"
        if f.kind == "choice":
            return None if any(o.value == value for o in f.options) else _one_of(f)
        if f.min_length is not None and len(value) < f.min_length:
            return f"must be at least {_plural(f.min_length, 'character')} long"
        if f.max_length is not None and len(value) > f.max_length:
            return f"must be at most {_plural(f.max_length, 'character')} long"
        if f.pattern is not None and re.search(f.pattern, value) is None:
            return f"must match the pattern {f.pattern}"
        if f.format is not None and not _check_format(f.format, value):
            return _FORMAT_PROBLEMS[f.format]
        return None
    if f.kind == "boolean":
        return None if isinstance(value, bool) else "must be true or false"
    if f.kind in ("number", "integer"):
        whole = f.kind == "integer"
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float) or not math.isfinite(value):
            return "must be a whole number" if whole else "must be a number"
        if f.minimum is not None and value < f.minimum:
            return f"must be at least {f.minimum}"
        if f.maximum is not None and value > f.maximum:
            return f"must be at most {f.maximum}"
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "must be a list of choices"
    wrong = [v for v in value if not any(o.value == v for o in f.options)]
    if wrong:
        return f"{', '.join(map(repr, wrong))} {'is' if len(wrong) == 1 else 'are'} not allowed; {_one_of(f)}"
    if len(set(value)) != len(value):
        return "each choice may be given only once"
    if f.min_items is not None and len(value) < f.min_items:
        return f"choose at least {_plural(f.min_items, 'option')}"
    if f.max_items is not None and len(value) > f.max_items:
        return f"choose at most {_plural(f.max_items, 'option')}"
    return None


def _one_of(f: Field) -> str:
    shown = (o.value if o.title == o.value else f"{o.value} ({o.title})" for o in f.options)
    return "must be one of: " + ", ".join(shown)


def validate(form: Form, content: object) -> dict[str, str]:
    """Field name -> what is wrong with its value, for every problem; ``{}`` means the answer is valid."""
    content = {} if content is None else content
    if not isinstance(content, dict):
        return {"": "the content must be an object of field values"}
    errors: dict[str, str] = {}
    for f in form.fields:
        problem = _problem(f, content[f.name]) if f.name in content else ("a value is required" if f.required else None)
        if problem:
            errors[f.name] = problem
    for name in content:
        if form.field(str(name)) is None:
            errors[str(name)] = "is not a field of this form"
    return errors


def _choose(f: Field, raw: str) -> str:
    """The option value ``raw`` names (value, then title, then a unique case-insensitive match), else ``raw``."""
    for found in ([o for o in f.options if o.value == raw], [o for o in f.options if o.title == raw]):
        if found:
            return found[0].value
    folded = [o for o in f.options if raw.strip().casefold() in (o.value.casefold(), o.title.casefold())]
    return folded[0].value if len(folded) == 1 else raw


def _coerce_one(f: Field, raw: str) -> tuple[object, str | None]:
    text = raw.strip()
    if f.kind == "string":
        return raw, None
    if f.kind == "choice":
        return _choose(f, raw), None  # an unknown choice stays a string: validate names the options
    if f.kind == "boolean":
        value = _BOOLEANS.get(text.casefold())
        return value, None if value is not None else "must be true or false (or yes/no, on/off, 1/0)"
    if f.kind in ("integer", "number"):
        if _INTEGER.fullmatch(text):
            return int(text), None
        number = float(text) if f.kind == "number" and _NUMBER.fullmatch(text) else math.nan
        return (
            (number, None)
            if math.isfinite(number)
            else (None, f"must be a {'whole ' if f.kind == 'integer' else ''}number")
        )
    try:
        items = json.loads(text) if text.startswith("[") else [p.strip() for p in text.split(",") if p.strip()]
    except ValueError:
        items = None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return None, "must be comma-separated choices or a JSON array of strings"
    return [_choose(f, i) for i in items], None


def coerce(form: Form, raw: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Typed content from strings (CLI ``key=value``): (content, errors). Absent fields stay absent."""
    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, text in raw.items():
        f = form.field(name)
        if f is None:
            errors[name] = "is not a field of this form"
            continue
        value, problem = _coerce_one(f, text)
        if problem is None:
            content[name] = value
        else:
            errors[name] = problem
    return content, errors


def with_defaults(form: Form) -> dict[str, Any]:
    """The defaults the schema declares (JSON-shaped: a multi-select default is a list)."""
    defaults = {f.name: f.default for f in form.fields if f.default is not None}
    return {name: list(d) if isinstance(d, tuple) else d for name, d in defaults.items()}


def fill_defaults(requested_schema: object, answer: Mapping[str, Any]) -> dict[str, Any]:
    """An ElicitResult as it goes upstream (SEP-1034): an ``accept`` whose content leaves out a field
    the schema gives a default gets that default. Anything else, and a schema that is not a form,
    is returned as it came."""
    out = dict(answer)
    if out.get("action") != "accept" or not (out.get("content") is None or isinstance(out.get("content"), dict)):
        return out
    try:
        defaults = with_defaults(parse_form(requested_schema))
    except FormError:
        return out
    content = out.get("content") or {}
    missing = {name: value for name, value in defaults.items() if name not in content}
    if missing:
        out["content"] = {**content, **missing}
    return out

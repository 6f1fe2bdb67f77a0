"""A question from ``/v1/questions/{id}`` as a form to show, and an answer from what its widgets hold. Pure.

Checks go through ``mcpx.questions.elicitation`` (``coerce``, then ``validate``), so the console refuses
exactly what the daemon would. Widget rules:

- An empty text, number or integer input, and a single choice with nothing chosen, send nothing
  (a required field then says "a value is required"). A switch and a selection list always have
  a state, so they always send it.
- A single choice is a radio set when it is required and has at most ``RADIO_MAX`` options (nothing
  to clear), else a select with a blank entry.
- Field ids for widgets (``FieldSpec.key``) are the field names when those are valid Textual ids,
  else a sanitized name with the field's position appended.
- Sampling, roots and unknown kinds are answered with a result object typed as JSON.
- An approval (mcpx's own gate, ``params._meta["io.mcpx/approval"]``) is headed as mcpx asking,
  never the server, and carries its arguments whole (``FormSpec.arguments``), never the message's
  shortened preview.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from mcpx.questions import elicitation
from mcpx.questions.elicitation import Field, Form, FormError, Option

Widget = Literal["text", "number", "integer", "switch", "radio", "select", "multi"]
Action = Literal["accept", "decline", "cancel"]
RawValue = str | bool | list[str] | None
RADIO_MAX = 6
_WIDGETS: dict[str, Widget] = {"string": "text", "number": "number", "integer": "integer", "boolean": "switch"}
_FORMAT_HINTS = {
    "email": "email",
    "uri": "URI, e.g. https://…",
    "date": "YYYY-MM-DD",
    "date-time": "YYYY-MM-DDThh:mm:ssZ",
}
_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
APPROVAL_META = "io.mcpx/approval"  # an approval gate's question: what is to be approved (docs/approvals.md)
_TEMPLATES: dict[str, dict[str, Any]] = {
    "sampling": {"role": "assistant", "model": "operator", "content": {"type": "text", "text": ""}},
    "roots": {"roots": []},
    "other": {},
}


@dataclass(frozen=True)
class Answer:
    action: Action
    content: dict[str, Any] | None = None  # a form elicitation's accepted content
    result: dict[str, Any] | None = None  # an accepted sampling/roots/other answer: the result object

    def body(self, by: str | None = None) -> dict[str, Any]:
        """The ``POST /v1/questions/{id}/answer`` body."""
        out: dict[str, Any] = {"action": self.action}
        out |= {k: v for k, v in (("content", self.content), ("result", self.result), ("by", by)) if v is not None}
        return out


@dataclass(frozen=True)
class FieldSpec:
    name: str
    key: str  # id-safe: widgets are #field-<key>, #error-<key>, #help-<key>
    widget: Widget
    label: str  # with " *" when required
    help: str  # description, format hint, bounds, pattern; "" when none
    initial: RawValue  # what the widget starts with (the schema's default)
    options: tuple[Option, ...]
    field: Field


@dataclass(frozen=True)
class FormSpec:
    question_id: str
    kind: str  # "elicitation" | "url-elicitation" | "sampling" | "roots" | "other"
    title: str
    message: str  # the upstream's message, or the request rendered (sampling)
    upstream: str
    warning: str
    fields: tuple[FieldSpec, ...] = ()
    form: Form | None = None  # a form elicitation's parsed schema
    problem: str | None = None  # why a form elicitation cannot be answered with accept
    url: str | None = None  # a URL elicitation's address
    result_template: str | None = None  # JSON to start a sampling/roots/other answer from
    arguments: str | None = None  # an approval's arguments, whole, as indented JSON

    @property
    def arguments_note(self) -> str:
        """How much there is to read: said, so a box that scrolls is never taken for all of it."""
        text = self.arguments or ""
        return f"Arguments: all {len(text):,} characters, {text.count(chr(10)) + 1:,} lines (the box scrolls)"

    @property
    def wants_json(self) -> bool:
        return self.result_template is not None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _bounds(low: object, high: object, unit: str = "") -> str | None:
    if low is not None and high is not None:
        return f"{low}–{high}{unit}"
    if low is not None:
        return f"at least {low}{unit}"
    return None if high is None else f"at most {high}{unit}"


def _help(f: Field) -> str:
    parts = [f.description or "", _FORMAT_HINTS.get(f.format or "", "")]
    parts.append(_bounds(f.minimum, f.maximum) or "")
    parts.append(_bounds(f.min_length, f.max_length, " characters") or "")
    parts.append(f"must match {f.pattern}" if f.pattern else "")
    items = _bounds(f.min_items, f.max_items)
    parts.append(f"choose {items}" if items else "")
    return " · ".join(p for p in parts if p)


def _initial(f: Field) -> RawValue:
    d = f.default
    if f.kind == "boolean":
        return bool(d)
    if f.kind == "multi_choice":
        return list(d) if isinstance(d, tuple) else []
    if f.kind == "choice":
        return d if isinstance(d, str) else None
    return "" if d is None else str(d)


def _widget(f: Field) -> Widget:
    if f.kind == "choice":
        return "radio" if f.required and len(f.options) <= RADIO_MAX else "select"
    return "multi" if f.kind == "multi_choice" else _WIDGETS[f.kind]


def _field_spec(f: Field, index: int, taken: set[str]) -> FieldSpec:
    key = re.sub(r"[^A-Za-z0-9_-]", "_", f.name)
    key = key if _ID.fullmatch(key) else f"_{key}"
    if key != f.name or key in taken:
        key = f"{key}-{index}"
    while key in taken:
        key = f"{key}-{index}"
    taken.add(key)
    label = f.label + (" *" if f.required else "")
    return FieldSpec(f.name, key, _widget(f), label, _help(f), _initial(f), f.options, f)


def _sampling_request(params: Mapping[str, Any]) -> str:
    lines = [f"system: {params['systemPrompt']}"] if isinstance(params.get("systemPrompt"), str) else []
    messages = params.get("messages")
    for m in messages if isinstance(messages, list) else []:
        m = m if isinstance(m, dict) else {}
        content = m.get("content")
        blocks = [b for b in (content if isinstance(content, list) else [content]) if isinstance(b, dict)]
        shown = [str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')}]" for b in blocks]
        lines.append(f"{m.get('role', '?')}: {' '.join(shown)}")
    if params.get("maxTokens") is not None:
        lines.append(f"(max tokens: {params['maxTokens']})")
    return "\n".join(lines)


def _warning(upstream: str, candidates: object) -> str:
    """Who is asking. A question no one call could be tied to (a shared stdio server, calls of
    several hosts in flight) names the calls that may have asked it: any of them may see the answer."""
    if not isinstance(candidates, list) or not candidates:
        return f"{upstream} is asking; only answer what you would tell it"
    names = [str(c.get("name") or c.get("method") or "?") for c in candidates if isinstance(c, dict)]
    return (
        f"{upstream} is asking for one of {len(candidates)} calls in flight ({', '.join(names)}), mcpx cannot"
        " tell which: only answer what you would tell any of them"
    )


def form_spec(question: Mapping[str, Any]) -> FormSpec:
    """What to show for a question (as ``GET /v1/questions/{id}`` returns it)."""
    kind, upstream = str(question.get("kind", "other")), str(question.get("upstream", "the upstream"))
    params: Mapping[str, Any] = question.get("params") or {}
    base = FormSpec(
        question_id=str(question.get("id", "")),
        kind=kind,
        title=f"{upstream} asks",
        message=_text(params.get("message")),
        upstream=upstream,
        warning=_warning(upstream, question.get("candidates")),
    )
    if kind == "url-elicitation":
        return replace(base, title=f"{upstream} asks you to open a URL", url=_text(params.get("url")))
    if kind != "elicitation":
        what = {"sampling": "a model completion (sampling)", "roots": "its roots (the folders it may use)"}
        title = f"{upstream} asks for {what[kind]}" if kind in what else f"{upstream} asks: {question.get('method')}"
        message = _sampling_request(params) if kind == "sampling" else base.message
        template = json.dumps(_TEMPLATES.get(kind, {}), indent=2)
        return replace(base, title=title, message=message, result_template=template)
    try:
        form = elicitation.parse_form(params.get("requestedSchema"))
    except FormError as exc:
        return replace(base, problem=f"this form cannot be shown: {exc}; decline or cancel it")
    taken: set[str] = set()
    fields = tuple(_field_spec(f, i, taken) for i, f in enumerate(form.fields))
    approval = approval_of(params)
    if approval is not None:
        host, tool = approval.get("host") or "a host", approval.get("tool") or "a tool"
        return replace(
            base,
            title=f"mcpx asks: may {host} run {tool}?",
            message=f"{tool} is a tool of {upstream}; the call waits until you answer.",
            warning=f"mcpx's own approval gate: {upstream} is not asking, and the host cannot answer for itself",
            form=form,
            fields=fields,
            arguments=json.dumps(approval.get("arguments"), ensure_ascii=False, sort_keys=True, indent=2),
        )
    return replace(base, title=form.title or base.title, form=form, fields=fields)


def approval_of(params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What an approval gate's question is about (tool, upstream, host, arguments), or None."""
    meta = params.get("_meta")
    approval = meta.get(APPROVAL_META) if isinstance(meta, Mapping) else None
    return approval if isinstance(approval, Mapping) else None


def collect(spec: FormSpec, raw: Mapping[str, RawValue]) -> tuple[dict[str, Any], dict[str, str]]:
    """A form's content from its widgets' values (by field name), and what is wrong, by field name."""
    if spec.form is None:
        return {}, ({"": spec.problem} if spec.problem else {})
    texts: dict[str, str] = {}
    content: dict[str, Any] = {}
    for fs in spec.fields:
        value = raw.get(fs.name)
        if isinstance(value, bool | list):
            content[fs.name] = value
        elif isinstance(value, str) and value != "":
            texts[fs.name] = value
    coerced, errors = elicitation.coerce(spec.form, texts)
    content |= coerced
    return content, {**elicitation.validate(spec.form, content), **errors}


def parse_result(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """A sampling/roots answer typed as JSON: (the result object, None) or (None, what is wrong)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    return (value, None) if isinstance(value, dict) else (None, "must be a JSON object ({...})")


def split_errors(spec: FormSpec, errors: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The daemon's refusal (``content.<field>``, ``result…``, ``""``) as (by field key, general lines).
    A sampling/roots answer's errors are keyed ``result``."""
    keys = {fs.name: fs.key for fs in spec.fields}
    by_key: dict[str, str] = {}
    general: list[str] = []
    for where, why in errors.items():
        name = where.removeprefix("content.")
        if where.startswith("content.") and name in keys:
            by_key[keys[name]] = why
        elif spec.wants_json and where.startswith("result"):
            line = why if where == "result" else f"{where}: {why}"
            by_key["result"] = "; ".join(filter(None, [by_key.get("result"), line]))
        else:
            general.append(f"{where}: {why}" if where else why)
    return by_key, general


def quick_answer(question: Mapping[str, Any], key: str) -> Answer | None:
    """The answer a shortcut key gives in the answer queue, or None when the full form is needed."""
    if key in ("d", "x"):
        return Answer("decline" if key == "d" else "cancel")
    spec = form_spec(question)
    if spec.kind == "url-elicitation":
        return Answer("accept") if key == "enter" else None
    if len(spec.fields) != 1:
        return None
    f = spec.fields[0].field
    if f.kind == "boolean" and key in ("y", "n"):
        return Answer("accept", content={f.name: key == "y"})
    if f.kind == "choice" and len(key) == 1 and "1" <= key <= "9" and int(key) <= len(f.options):
        return Answer("accept", content={f.name: f.options[int(key) - 1].value})
    return None

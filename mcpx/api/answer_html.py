"""The answer page's HTML, rendered on the server: no JavaScript, no third-party assets, mobile
first. Pure: a question's form (questions/elicitation.py, the rules the console's forms follow)
and what was typed in, to text. Every value shown is escaped."""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

from ..questions.elicitation import Field, Form

APPROVAL_META = "io.mcpx/approval"

_STYLE = """
body{font:16px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1d21}
main{max-width:40rem;margin:0 auto;padding:1rem}
h1{font-size:1.25rem;margin:.5rem 0 1rem}
.card{background:#fff;border-radius:.6rem;padding:1rem;box-shadow:0 1px 3px #0002}
.msg{white-space:pre-wrap;word-break:break-word;margin:0 0 1rem}
label,.lbl{display:block;font-weight:600;margin:.8rem 0 .3rem}
.hint{font-weight:400;color:#555;font-size:.9rem}
input[type=text],input[type=number],input[type=email],input[type=url],input[type=date],select,textarea
{width:100%;box-sizing:border-box;font:inherit;padding:.55rem;border:1px solid #bbb;border-radius:.4rem}
.err{color:#b00020;font-size:.9rem;margin:.25rem 0 0}
.choice{font-weight:400;display:block;margin:.2rem 0}
.buttons{display:flex;gap:.6rem;flex-wrap:wrap;margin-top:1.2rem}
button{font:inherit;padding:.7rem 1.2rem;border-radius:.4rem;border:0;flex:1 1 8rem;cursor:pointer}
.yes{background:#1a7f37;color:#fff}.no{background:#cf222e;color:#fff}.other{background:#ddd}
.meta{color:#555;font-size:.85rem;margin-top:1rem}
.args{white-space:pre-wrap;word-break:break-all;max-height:50vh;overflow:auto;margin:0 0 .5rem;padding:.6rem;
background:#f3f4f6;border:1px solid #ddd;border-radius:.4rem;font:13px/1.4 ui-monospace,monospace}
"""


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f'<body><main><h1>{escape(title)}</h1><div class="card">{body}</div></main></body></html>'
    )


def message_page(title: str, text: str) -> str:
    """A page that only says something: used, expired, answered elsewhere, thank you."""
    return _page(title, f'<p class="msg">{escape(text)}</p>')


def _error(errors: Mapping[str, str], name: str) -> str:
    problem = errors.get(name)
    return f'<p class="err" id="err-{escape(name)}">{escape(problem)}</p>' if problem else ""


def _input(f: Field, value: str) -> str:
    name = escape(f.name)
    req = " required" if f.required else ""
    if f.kind == "choice":
        options = "" if f.required else '<option value=""></option>'
        for o in f.options:
            sel = " selected" if o.value == value else ""
            options += f'<option value="{escape(o.value)}"{sel}>{escape(o.title)}</option>'
        return f'<select id="f-{name}" name="{name}"{req}>{options}</select>'
    if f.kind == "boolean":
        options = "" if f.required else '<option value=""></option>'
        for v, t in (("true", "Yes"), ("false", "No")):
            options += f'<option value="{v}"{" selected" if value == v else ""}>{t}</option>'
        return f'<select id="f-{name}" name="{name}"{req}>{options}</select>'
    if f.kind == "multi_choice":
        chosen = set(value.split("\x1f")) if value else set()
        return "".join(
            f'<label class="choice"><input type="checkbox" name="{name}" value="{escape(o.value)}"'
            f"{' checked' if o.value in chosen else ''}> {escape(o.title)}</label>"
            for o in f.options
        )
    kind = {"number": "number", "integer": "number"}.get(f.kind, "text")
    if f.kind == "string" and f.format in ("email", "uri", "date"):
        kind = "url" if f.format == "uri" else f.format
    step = ' step="1"' if f.kind == "integer" else ' step="any"' if f.kind == "number" else ""
    limits = "".join(
        f' {attr}="{escape(str(v))}"'
        for attr, v in (("min", f.minimum), ("max", f.maximum), ("maxlength", f.max_length))
        if v is not None
    )
    return f'<input type="{kind}" id="f-{name}" name="{name}" value="{escape(value)}"{step}{limits}{req}>'


def default_values(form: Form) -> dict[str, str]:
    """A fresh form's fields as the page shows them: each field's schema default (SEP-1034), in the
    text the inputs hold (a multi-select's choices joined by \x1f, a boolean as true/false)."""
    out: dict[str, str] = {}
    for f in form.fields:
        d = f.default
        if d is None:
            continue
        if isinstance(d, bool):
            out[f.name] = "true" if d else "false"
        elif isinstance(d, tuple):
            out[f.name] = "\x1f".join(d)
        else:
            out[f.name] = str(d)
    return out


def _field(f: Field, value: str, errors: Mapping[str, str]) -> str:
    hint = f' <span class="hint">{escape(f.description)}</span>' if f.description else ""
    mark = " *" if f.required else ""
    return (
        f'<label for="f-{escape(f.name)}">{escape(f.label)}{mark}{hint}</label>'
        f"{_input(f, value)}{_error(errors, f.name)}"
    )


def approval_of(params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What an approval gate's question is about (tool, upstream, host, arguments), or None."""
    meta = params.get("_meta")
    approval = meta.get(APPROVAL_META) if isinstance(meta, Mapping) else None
    return approval if isinstance(approval, Mapping) else None


def approval_title(approval: Mapping[str, Any]) -> str:
    """The gate is mcpx's own: the server is not the one asking."""
    return f"mcpx asks: may {approval.get('host') or 'a host'} run {approval.get('tool') or 'a tool'}?"


def _arguments(approval: Mapping[str, Any]) -> str:
    """Every argument, whole: in a box that scrolls, never cut."""
    text = json.dumps(approval.get("arguments"), ensure_ascii=False, sort_keys=True, indent=2)
    lines = text.count("\n") + 1
    return (
        f'<p class="hint">on {escape(str(approval.get("upstream")))} · the call waits until you answer</p>'
        f'<p class="lbl">Arguments <span class="hint">(all {len(text):,} characters, {lines:,} lines;'
        " the box scrolls)</span></p>"
        f'<pre class="args" id="arguments" tabindex="0">{escape(text)}</pre>'
    )


def question_page(
    question: dict[str, Any],
    form: Form,
    *,
    action_url: str,
    csrf: str,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> str:
    """The question and its form. An approval (mcpx's own question) shows its arguments whole and
    gets Allow / Deny buttons and a reason; any other form gets its fields and Accept / Decline.
    `values`: what was typed in (a form sent back with errors); None: a fresh form, its fields
    filled with the schema's defaults."""
    values = default_values(form) if values is None else values
    errors = errors or {}
    params = question.get("params") or {}
    approval = approval_of(params)
    if approval is not None:
        body = _arguments(approval)
    else:
        body = f'<p class="msg">{escape(str(params.get("message") or "The server asks:"))}</p>'
    body += f'<form method="post" action="{escape(action_url)}">'
    body += f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
    if approval is not None:
        reason = form.field("reason")
        if reason is not None:
            body += _field(reason, values.get("reason", ""), errors)
        buttons = (
            '<button class="yes" type="submit" name="decision" value="allow">Allow once</button>'
            '<button class="no" type="submit" name="decision" value="deny">Deny</button>'
        )
    else:
        body += "".join(_field(f, values.get(f.name, ""), errors) for f in form.fields)
        buttons = (
            '<button class="yes" type="submit" name="action" value="accept">Accept</button>'
            '<button class="no" type="submit" name="action" value="decline">Decline</button>'
        )
    body += (
        '<label for="f-by">Your name <span class="hint">(the audit log records it)</span></label>'
        f'<input type="text" id="f-by" name="by" value="{escape(values.get("by", ""))}" maxlength="64" required>'
        f"{_error(errors, 'by')}{_error(errors, '')}"
        f'<div class="buttons">{buttons}</div></form>'
    )
    if approval is not None:
        body += f'<p class="meta">mcpx approval gate · question {escape(str(question.get("id")))}</p>'
        return _page(approval_title(approval), body)
    body += (
        f'<p class="meta">From {escape(str(question.get("upstream")))} · question {escape(str(question.get("id")))}</p>'
    )
    return _page("A question for you", body)

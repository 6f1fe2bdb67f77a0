"""console.forms: questions as the daemon sends them become forms; widget values become answers.

The elicitation schemas are the 2026-07-28 spec examples where it has them (paths relative to
/work/shared/spec/upstream/schema/2026-07-28/examples/); content that ``collect`` accepts is also
what the daemon's own check (``mcpx.questions.answers.operator_answer``) accepts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from shared_folder import SPEC

from console.forms import Answer, collect, form_spec, parse_result, quick_answer, split_errors
from mcpx.questions.answers import operator_answer
from mcpx.questions.elicitation import with_defaults
from mcpx.records.question import Question

EXAMPLES = SPEC / "schema" / "2026-07-28" / "examples"
METHODS = {"sampling": "sampling/createMessage", "roots": "roots/list", "other": "ping"}


def _example(folder: str, name: str) -> Any:
    path = EXAMPLES / folder / name
    if not path.exists():
        pytest.fail(f"the MCP spec copy is absent ({path} not found): set MCPX_SHARED to the shared folder")
    return json.loads(path.read_text())


def question(kind: str, params: dict[str, Any], upstream: str = "github") -> dict[str, Any]:
    """A question the way GET /v1/questions/{id} returns it."""
    return {
        "id": "q-1f2e",
        "kind": kind,
        "method": METHODS.get(kind, "elicitation/create"),
        "upstream": upstream,
        "params": params,
        "status": "open",
        "createdMs": 1_700_000_000_000,
        "expiresMs": 1_700_000_600_000,
        "taskId": None,
        "connectionId": "conn-1",
        "inputKey": None,
        "hostCanAnswer": False,
        "answeredBy": None,
        "answer": None,
        "error": None,
        "closedMs": None,
        "reason": None,
    }


def form_q(properties: dict[str, Any], required: tuple[str, ...] = (), **schema: Any) -> dict[str, Any]:
    requested = {"type": "object", "properties": properties, "required": list(required), **schema}
    return question("elicitation", {"mode": "form", "message": "Tell me", "requestedSchema": requested})


def one(prop: dict[str, Any], required: bool = False) -> dict[str, Any]:
    return form_q({"f": prop}, ("f",) if required else ())


def contact() -> dict[str, Any]:
    return question("elicitation", _example("ElicitRequestFormParams", "elicit-multiple-fields.json"))


def daemon_accepts(q: dict[str, Any], content: dict[str, Any]) -> bool:
    asked = Question(
        id=q["id"], upstream=q["upstream"], method=q["method"], params=q["params"], created_ms=0, expires_ms=1
    )
    return operator_answer(asked, "accept", content) == {"action": "accept", "content": content}


# ---- question -> FormSpec ----


def test_a_question_no_call_could_be_tied_to_names_the_calls_that_may_have_asked_it() -> None:
    q = question("elicitation", _example("ElicitRequest", "elicitation-request.json")["params"])
    q["candidates"] = [
        {"connectionId": "c-a", "taskId": None, "method": "tools/call", "name": "demo__watch"},
        {"connectionId": "c-b", "taskId": "t-1", "method": "tools/call", "name": "demo__confirm"},
    ]
    warning = form_spec(q).warning
    assert "one of 2 calls in flight (demo__watch, demo__confirm)" in warning
    assert "only answer what you would tell any of them" in warning


def test_the_spec_example_request_becomes_one_required_text_field() -> None:
    q = question("elicitation", _example("ElicitRequest", "elicitation-request.json")["params"])
    spec = form_spec(q)
    assert (spec.question_id, spec.kind, spec.upstream) == ("q-1f2e", "elicitation", "github")
    assert spec.message == "Please provide your GitHub username"
    assert spec.warning == "github is asking; only answer what you would tell it"
    assert spec.title == "github asks"  # the schema has no title
    [f] = spec.fields
    assert (f.name, f.key, f.widget, f.label, f.help, f.initial) == (
        "name",
        "name",
        "text",
        "GitHub Username *",
        "Your GitHub username",
        "",
    )
    assert spec.url is None and spec.result_template is None and spec.problem is None


def test_the_contact_example_has_a_format_hint_and_a_minimum() -> None:
    spec = form_spec(contact())
    assert [(f.name, f.widget, f.label) for f in spec.fields] == [
        ("name", "text", "name *"),
        ("email", "text", "email *"),
        ("age", "number", "age"),
    ]
    assert [f.help for f in spec.fields] == ["Your full name", "Your email address · email", "Your age · at least 18"]


def test_a_schema_title_is_the_form_title() -> None:
    assert form_spec(form_q({}, title="Deploy settings")).title == "Deploy settings"


ABC = ["a", "b", "c"]


@pytest.mark.parametrize(
    ("prop", "required", "widget", "titles"),
    [
        ({"type": "string"}, False, "text", []),
        ({"type": "number"}, False, "number", []),
        ({"type": "integer"}, False, "integer", []),
        ({"type": "boolean"}, False, "switch", []),
        ({"type": "string", "enum": ABC}, True, "radio", ABC),
        ({"enum": ABC}, False, "select", ABC),  # optional: a select can go back to blank
        ({"type": "string", "enum": list("abcdefg")}, True, "select", list("abcdefg")),  # too many for radios
        (
            {"type": "string", "oneOf": [{"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}]},
            True,
            "radio",
            ["Red", "Green"],
        ),
        ({"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]}, True, "radio", ["Small", "Medium"]),
        ({"type": "array", "items": {"type": "string", "enum": ABC}}, False, "multi", ABC),
        (
            {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}, {"const": "y"}]}},
            True,
            "multi",
            ["Ex", "y"],
        ),
    ],
)
def test_each_kind_gets_its_widget(prop: dict[str, Any], required: bool, widget: str, titles: list[str]) -> None:
    [f] = form_spec(one(prop, required)).fields
    assert f.widget == widget
    assert [o.title for o in f.options] == titles
    assert f.label == "f *" if required else f.label == "f"


@pytest.mark.parametrize(
    ("prop", "help_"),
    [
        ({"type": "string", "format": "email"}, "email"),
        ({"type": "string", "format": "uri"}, "URI, e.g. https://…"),
        ({"type": "string", "format": "date"}, "YYYY-MM-DD"),
        ({"type": "string", "format": "date-time"}, "YYYY-MM-DDThh:mm:ssZ"),
        ({"type": "string", "format": "hostname"}, ""),  # unknown formats are annotations
        ({"type": "integer", "minimum": 1, "maximum": 10}, "1–10"),
        ({"type": "number", "maximum": 2.5}, "at most 2.5"),
        ({"type": "string", "minLength": 2, "maxLength": 20}, "2–20 characters"),
        ({"type": "string", "maxLength": 8}, "at most 8 characters"),
        ({"type": "string", "pattern": "^[a-z]+$"}, "must match ^[a-z]+$"),
        ({"type": "array", "items": {"enum": ABC}, "minItems": 1, "maxItems": 2}, "choose 1–2"),
        (
            {"type": "string", "description": "Where", "format": "uri", "minLength": 8},
            "Where · URI, e.g. https://… · at least 8 characters",
        ),
    ],
)
def test_constraints_become_help(prop: dict[str, Any], help_: str) -> None:
    assert form_spec(one(prop)).fields[0].help == help_


@pytest.mark.parametrize(
    ("prop", "initial"),
    [
        ({"type": "string", "default": "octocat"}, "octocat"),
        ({"type": "string"}, ""),
        ({"type": "number", "default": 18}, "18"),
        ({"type": "number", "default": 2.5}, "2.5"),
        ({"type": "integer", "default": 0}, "0"),
        ({"type": "boolean", "default": True}, True),
        ({"type": "boolean"}, False),
        ({"enum": ABC, "default": "b"}, "b"),
        ({"enum": ABC}, None),
        ({"type": "array", "items": {"enum": ABC}, "default": ["a", "c"]}, ["a", "c"]),
        ({"type": "array", "items": {"enum": ABC}}, []),
    ],
)
def test_the_default_is_the_initial_value(prop: dict[str, Any], initial: object) -> None:
    assert form_spec(one(prop)).fields[0].initial == initial


def test_field_names_that_are_not_widget_ids_get_safe_keys() -> None:
    names = ["first name", "ok_name-2", "1st", "a_b-4", "a b"]
    spec = form_spec(form_q({name: {"type": "string"} for name in names}))
    assert [f.key for f in spec.fields] == ["first_name-0", "ok_name-2", "_1st-2", "a_b-4", "a_b-4-4"]


def test_a_url_elicitation_shows_its_address() -> None:
    spec = form_spec(question("url-elicitation", _example("ElicitRequestURLParams", "elicit-sensitive-data.json")))
    assert spec.url == "https://mcp.example.com/ui/set_api_key"
    assert spec.message == "Please provide your API key to continue."
    assert spec.title == "github asks you to open a URL"
    assert spec.fields == () and not spec.wants_json


def test_sampling_shows_the_request_and_offers_a_result_template() -> None:
    params = {
        "systemPrompt": "You are terse.",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Summarise the diff"}},
            {"role": "assistant", "content": [{"type": "text", "text": "Which one?"}, {"type": "image", "data": "…"}]},
        ],
        "maxTokens": 200,
    }
    spec = form_spec(question("sampling", params, upstream="reviewer"))
    assert spec.title == "reviewer asks for a model completion (sampling)"
    assert spec.message.splitlines() == [
        "system: You are terse.",
        "user: Summarise the diff",
        "assistant: Which one? [image]",
        "(max tokens: 200)",
    ]
    assert spec.wants_json and spec.result_template is not None
    template, problem = parse_result(spec.result_template)
    assert problem is None and template is not None and template["role"] == "assistant"


def test_roots_and_other_kinds_take_a_json_result() -> None:
    roots = form_spec(question("roots", {}))
    assert (roots.message, json.loads(roots.result_template or "")) == ("", {"roots": []})
    other = form_spec(question("other", {"x": 1}))
    assert other.title == "github asks: ping" and other.wants_json


def test_a_form_outside_the_spec_subset_cannot_be_accepted() -> None:
    q = one({"type": "object", "properties": {}})
    spec = form_spec(q)
    assert spec.fields == () and spec.form is None
    assert spec.problem is not None and "nested objects" in spec.problem
    assert collect(spec, {}) == ({}, {"": spec.problem})
    assert quick_answer(q, "d") == Answer("decline")


# ---- collect: widget values -> content ----


def test_a_contact_answer_round_trips_and_the_daemon_accepts_it() -> None:
    q = contact()
    content, errors = collect(form_spec(q), {"name": "Ada Lovelace", "email": "ada@example.com", "age": "36"})
    assert errors == {}
    assert content == {"name": "Ada Lovelace", "email": "ada@example.com", "age": 36}
    assert daemon_accepts(q, content)


@pytest.mark.parametrize(
    ("raw", "errors"),
    [
        ({"name": "Ada", "email": "ada-at-example"}, {"email": "must be an email address (name@example.com)"}),
        ({"name": "", "email": ""}, {"name": "a value is required", "email": "a value is required"}),
        ({"name": "Ada", "email": "a@b.c", "age": "old"}, {"age": "must be a number"}),
        ({"name": "Ada", "email": "a@b.c", "age": "17"}, {"age": "must be at least 18"}),
    ],
)
def test_collect_reports_what_the_daemon_would_refuse(raw: dict[str, Any], errors: dict[str, str]) -> None:
    assert collect(form_spec(contact()), raw)[1] == errors


def test_empty_optional_inputs_and_blank_choices_are_left_out() -> None:
    q = form_q({"note": {"type": "string"}, "n": {"type": "integer"}, "size": {"enum": ["s", "m"]}})
    assert collect(form_spec(q), {"note": "", "n": "", "size": None}) == ({}, {})


def test_integers_and_numbers_are_coerced_like_the_cli_does() -> None:
    q = form_q({"n": {"type": "integer", "maximum": 5}, "x": {"type": "number"}})
    spec = form_spec(q)
    assert collect(spec, {"n": " 3 ", "x": "2.5"}) == ({"n": 3, "x": 2.5}, {})
    assert collect(spec, {"n": "3.5"})[1] == {"n": "must be a whole number"}
    assert collect(spec, {"n": "6"})[1] == {"n": "must be at most 5"}


def test_switches_choices_and_selection_lists() -> None:
    q = form_q(
        {
            "ok": {"type": "boolean"},
            "color": {
                "type": "string",
                "oneOf": [{"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}],
            },
            "tags": {"type": "array", "items": {"enum": ABC}, "maxItems": 2},
        },
        ("color",),
    )
    spec = form_spec(q)
    content, errors = collect(spec, {"ok": False, "color": "#0f0", "tags": []})
    assert (content, errors) == ({"ok": False, "color": "#0f0", "tags": []}, {})
    assert daemon_accepts(q, content)
    assert collect(spec, {"ok": True, "color": None, "tags": ["a"]})[1] == {"color": "a value is required"}
    assert collect(spec, {"ok": True, "color": "#f00", "tags": ABC})[1] == {"tags": "choose at most 2 options"}


def test_the_initial_values_collect_to_the_schema_defaults() -> None:
    q = form_q(
        {
            "name": {"type": "string", "default": "octocat"},
            "age": {"type": "integer", "default": 30},
            "ok": {"type": "boolean", "default": True},
            "size": {"enum": ["s", "m"], "default": "m"},
            "tags": {"type": "array", "items": {"enum": ABC}, "default": ["b"]},
        }
    )
    spec = form_spec(q)
    assert spec.form is not None
    content, errors = collect(spec, {f.name: f.initial for f in spec.fields})
    assert errors == {} and content == with_defaults(spec.form)


def test_a_pattern_is_checked_unanchored() -> None:
    spec = form_spec(one({"type": "string", "pattern": "[0-9]{3}"}))
    assert collect(spec, {"f": "ab123"}) == ({"f": "ab123"}, {})
    assert collect(spec, {"f": "ab12"})[1] == {"f": "must match the pattern [0-9]{3}"}


# ---- JSON results and the daemon's refusals ----


@pytest.mark.parametrize(
    ("text", "result", "problem"),
    [
        ('{"roots": []}', {"roots": []}, None),
        ("[1, 2]", None, "must be a JSON object ({...})"),
        ("{roots: []}", None, "not JSON: "),
    ],
)
def test_parse_result(text: str, result: object, problem: str | None) -> None:
    got, why = parse_result(text)
    assert got == result
    assert why == problem if problem is None or not problem.startswith("not JSON") else (why or "").startswith(problem)


def test_split_errors_maps_daemon_keys_to_fields() -> None:
    spec = form_spec(form_q({"first name": {"type": "string"}, "email": {"type": "string"}}))
    errors = {
        "content.email": "must be an email address",
        "content.first name": "too long",
        "content.zzz": "is not a field",
    }
    assert split_errors(spec, {**errors, "": "already answered"}) == (
        {"email": "must be an email address", "first_name-0": "too long"},
        ["content.zzz: is not a field", "already answered"],
    )


def test_split_errors_puts_a_result_refusal_under_the_json() -> None:
    spec = form_spec(question("sampling", {"messages": []}))
    by_key, general = split_errors(spec, {"result.role": 'must be "assistant"', "result.model": "required"})
    assert by_key == {"result": 'result.role: must be "assistant"; result.model: required'} and general == []
    assert split_errors(spec, {"result": "not JSON: line 1"}) == ({"result": "not JSON: line 1"}, [])


def test_answer_bodies() -> None:
    assert Answer("accept", content={"a": 1}).body("ops") == {"action": "accept", "content": {"a": 1}, "by": "ops"}
    assert Answer("decline").body() == {"action": "decline"}
    assert Answer("accept", result={"roots": []}).body() == {"action": "accept", "result": {"roots": []}}


# ---- quick_answer: the answer queue's keys ----


def test_a_single_boolean_answers_y_and_n() -> None:
    q = one({"type": "boolean", "title": "Proceed?"}, required=True)
    assert quick_answer(q, "y") == Answer("accept", content={"f": True})
    assert quick_answer(q, "n") == Answer("accept", content={"f": False})
    assert quick_answer(q, "1") is None and quick_answer(q, "enter") is None


def test_a_single_choice_answers_by_number() -> None:
    q = one({"type": "string", "oneOf": [{"const": "prod", "title": "Production"}, {"const": "dev", "title": "Dev"}]})
    assert quick_answer(q, "1") == Answer("accept", content={"f": "prod"})
    assert quick_answer(q, "2") == Answer("accept", content={"f": "dev"})
    assert quick_answer(q, "3") is None and quick_answer(q, "0") is None and quick_answer(q, "y") is None


@pytest.mark.parametrize(
    "make",
    [
        contact,
        lambda: one({"type": "boolean"}),
        lambda: question("url-elicitation", {"mode": "url", "url": "https://example.com", "message": "m"}),
        lambda: question("sampling", {"messages": []}),
        lambda: question("roots", {}),
    ],
)
def test_any_question_answers_d_and_x(make: Callable[[], dict[str, Any]]) -> None:
    assert quick_answer(make(), "d") == Answer("decline")
    assert quick_answer(make(), "x") == Answer("cancel")


def test_a_url_elicitation_answers_enter_as_done() -> None:
    q = question("url-elicitation", {"mode": "url", "url": "https://example.com/login", "message": "Sign in"})
    assert quick_answer(q, "enter") == Answer("accept")
    assert quick_answer(q, "y") is None


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (contact, "y"),  # several fields
        (lambda: one({"type": "string"}), "y"),  # a text field needs typing
        (lambda: one({"type": "array", "items": {"enum": ABC}}), "1"),  # multi-select is not single-choice
        (lambda: form_q({"a": {"type": "boolean"}, "b": {"type": "boolean"}}), "y"),
        (contact, "enter"),
        (lambda: question("sampling", {"messages": []}), "enter"),
    ],
)
def test_everything_else_needs_the_full_form(make: Callable[[], dict[str, Any]], key: str) -> None:
    assert quick_answer(make(), key) is None

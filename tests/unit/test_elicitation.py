"""mcpx.questions.elicitation: elicitation forms parsed, answers validated, CLI strings coerced.

The schemas come from the spec where it has them: the 2026-07-28 examples (schema/2026-07-28/examples),
the documented property schemas of both revisions' elicitation pages (the JSON blocks under
"Requested Schema"), and both schema.json files (every PrimitiveSchemaDefinition keyword is one we
understand). Paths are relative to /work/shared/spec/upstream/.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from shared_folder import SPEC

from mcpx.questions.elicitation import (
    Field,
    Form,
    FormError,
    Option,
    coerce,
    fill_defaults,
    parse_form,
    validate,
    with_defaults,
)

REVISIONS = ("2025-11-25", "2026-07-28")


def _spec_path(*parts: str) -> Path:
    path = SPEC.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"the MCP spec copy is absent ({path} not found): set MCPX_SHARED to the shared folder")
    return path


def _example(folder: str, name: str) -> Any:
    return json.loads(_spec_path("schema", "2026-07-28", "examples", folder, name).read_text())


def _documented_property_schemas(revision: str) -> list[dict[str, Any]]:
    """The JSON blocks of docs/specification/<revision>/client/elicitation.mdx under "Requested Schema"."""
    text = _spec_path("docs", "specification", revision, "client", "elicitation.mdx").read_text()
    section = text[text.index("#### Requested Schema") : text.index("Clients can use this schema")]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    return [json.loads(re.sub(r"\s//[^\n]*", "", block)) for block in blocks]  # "// or integer" is JSONC


def _documented(revision: str, shape: str) -> dict[str, Any]:
    """One documented property schema, picked by its shape."""
    matches = {
        "string": lambda s: s["type"] == "string" and "enum" not in s and "oneOf" not in s,
        "number": lambda s: s["type"] == "number",
        "boolean": lambda s: s["type"] == "boolean",
        "single-untitled": lambda s: "enum" in s,
        "single-titled": lambda s: "oneOf" in s,
        "multi-untitled": lambda s: s["type"] == "array" and "enum" in s["items"],
        "multi-titled": lambda s: s["type"] == "array" and "anyOf" in s["items"],
    }
    found = [s for s in _documented_property_schemas(revision) if matches[shape](s)]
    assert len(found) == 1, f"{revision}: expected one documented {shape} schema, found {len(found)}"
    return found[0]


def _form_of(prop: dict[str, Any], *, required: bool = False) -> Form:
    schema: dict[str, Any] = {"type": "object", "properties": {"f": prop}}
    if required:
        schema["required"] = ["f"]
    return parse_form(schema)


def _field_of(prop: dict[str, Any]) -> Field:
    return _form_of(prop).fields[0]


def _requested_schemas(node: object) -> list[Any]:
    if isinstance(node, dict):
        found = [node["requestedSchema"]] if "requestedSchema" in node else []
        return found + [s for v in node.values() for s in _requested_schemas(v)]
    if isinstance(node, list):
        return [s for v in node for s in _requested_schemas(v)]
    return []


CONTACT = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "email": {"type": "string", "format": "email"},
        "age": {"type": "integer", "minimum": 18, "maximum": 120},
        "score": {"type": "number", "minimum": 0.5},
        "subscribe": {"type": "boolean", "default": False},
        "color": {"type": "string", "oneOf": [{"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2},
    },
    "required": ["name", "email"],
}


# ---- the spec's own schemas -------------------------------------------------------------------


def test_the_spec_example_form_keeps_property_order_kinds_and_constraints() -> None:
    form = parse_form(_example("ElicitRequestFormParams", "elicit-multiple-fields.json")["requestedSchema"])
    assert [(f.name, f.kind, f.required) for f in form.fields] == [
        ("name", "string", True),
        ("email", "string", True),
        ("age", "number", False),
    ]
    email, age = form.fields[1], form.fields[2]
    assert email.format == "email" and email.description == "Your email address"
    assert age.minimum == 18 and age.maximum is None


def test_a_field_title_is_its_label_and_the_name_is_the_fallback() -> None:
    titled = parse_form(_example("ElicitRequest", "elicitation-request.json")["params"]["requestedSchema"])
    assert titled.fields[0].title == "GitHub Username" and titled.fields[0].label == "GitHub Username"
    untitled = parse_form(_example("ElicitRequestFormParams", "elicit-single-field.json")["requestedSchema"])
    assert untitled.fields[0].title is None and untitled.fields[0].label == "name"


def test_every_requested_schema_in_the_2026_examples_is_a_form() -> None:
    files = sorted(_spec_path("schema", "2026-07-28", "examples").rglob("*.json"))
    schemas = [s for p in files for s in _requested_schemas(json.loads(p.read_text()))]
    assert len(schemas) >= 5
    for schema in schemas:
        assert parse_form(schema).fields


@pytest.mark.parametrize(
    ("request_example", "result_example"),
    [
        ("elicit-multiple-fields.json", "input-multiple-fields.json"),
        ("elicit-single-field.json", "input-single-field.json"),
    ],
)
def test_the_spec_example_answers_are_valid_for_their_forms(request_example: str, result_example: str) -> None:
    form = parse_form(_example("ElicitRequestFormParams", request_example)["requestedSchema"])
    assert validate(form, _example("ElicitResult", result_example)["content"]) == {}


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_keyword_of_each_primitive_schema_in_schema_json_is_understood(revision: str) -> None:
    defs = json.loads(_spec_path("schema", revision, "schema.json").read_text())["$defs"]
    variants = [ref["$ref"].rsplit("/", 1)[-1] for ref in defs["PrimitiveSchemaDefinition"]["anyOf"]]
    assert len(variants) == 8
    understood = {"type", "title", "description", "default", "format", "minLength", "maxLength", "minimum"}
    understood |= {"maximum", "enum", "enumNames", "oneOf", "items", "minItems", "maxItems"}
    for name in variants:
        assert set(defs[name]["properties"]) <= understood, name
    string_formats = set(defs["StringSchema"]["properties"]["format"]["enum"])
    assert string_formats == {"email", "uri", "date", "date-time"}


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_documented_string_schema_gives_its_constraints_and_default(revision: str) -> None:
    f = _field_of(_documented(revision, "string"))
    assert (f.kind, f.title, f.description) == ("string", "Display Name", "Description text")
    assert (f.min_length, f.max_length, f.format, f.default) == (3, 50, "email", "user@example.com")
    # Only the 2025-11-25 page shows `pattern`; neither schema.json has it.
    assert f.pattern == ("^[A-Za-z]+$" if revision == "2025-11-25" else None)


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_documented_number_schema_gives_its_range_and_default(revision: str) -> None:
    f = _field_of(_documented(revision, "number"))
    assert (f.kind, f.minimum, f.maximum, f.default) == ("number", 0, 100, 50)


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_documented_boolean_schema_keeps_a_false_default(revision: str) -> None:
    form = _form_of(_documented(revision, "boolean"))
    assert form.fields[0].kind == "boolean" and with_defaults(form) == {"f": False}


@pytest.mark.parametrize("revision", REVISIONS)
def test_an_untitled_single_select_offers_its_values_as_their_own_titles(revision: str) -> None:
    f = _field_of(_documented(revision, "single-untitled"))
    assert f.kind == "choice" and f.default == "Red"
    assert f.options == (Option("Red", "Red"), Option("Green", "Green"), Option("Blue", "Blue"))


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_titled_single_select_offers_one_of_const_and_title(revision: str) -> None:
    f = _field_of(_documented(revision, "single-titled"))
    assert f.kind == "choice" and f.default == "#FF0000"
    assert f.options == (Option("#FF0000", "Red"), Option("#00FF00", "Green"), Option("#0000FF", "Blue"))


@pytest.mark.parametrize("revision", REVISIONS)
def test_an_untitled_multi_select_offers_items_enum_with_its_item_counts(revision: str) -> None:
    form = _form_of(_documented(revision, "multi-untitled"))
    f = form.fields[0]
    assert (f.kind, f.min_items, f.max_items) == ("multi_choice", 1, 2)
    assert [o.value for o in f.options] == ["Red", "Green", "Blue"]
    assert f.default == ("Red", "Green") and with_defaults(form) == {"f": ["Red", "Green"]}


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_titled_multi_select_offers_items_any_of(revision: str) -> None:
    form = _form_of(_documented(revision, "multi-titled"))
    f = form.fields[0]
    assert f.kind == "multi_choice" and f.options[1] == Option("#00FF00", "Green")
    assert validate(form, with_defaults(form)) == {}


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_documented_default_is_valid_for_its_own_field_but_one(revision: str) -> None:
    for prop in _documented_property_schemas(revision):
        form = _form_of(prop)
        errors = validate(form, with_defaults(form))
        if revision == "2025-11-25" and "pattern" in prop:
            # The 2025-11-25 page's string example: default "user@example.com" with pattern
            # "^[A-Za-z]+$" contradicts itself (2026-07-28 drops the pattern); prefilled, it is flagged.
            assert errors == {"f": "must match the pattern ^[A-Za-z]+$"}
        else:
            assert errors == {}, prop


def test_a_legacy_enum_names_schema_titles_each_enum_value() -> None:
    f = _field_of({"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"], "default": "g"})
    assert f.kind == "choice" and f.options == (Option("r", "Red"), Option("g", "Green")) and f.default == "g"


# ---- schemas that are not forms -----------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [None, [], "object", {}, {"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    ids=["null", "list", "string", "no-type", "string-schema", "array-schema"],
)
def test_a_schema_that_is_not_an_object_schema_is_a_form_error(schema: object) -> None:
    with pytest.raises(FormError, match="object schema"):
        parse_form(schema)


def test_a_nested_object_property_is_a_form_error_that_names_it() -> None:
    with pytest.raises(FormError, match=r"property 'address'.*nested objects"):
        parse_form({"type": "object", "properties": {"address": {"type": "object", "properties": {}}}})


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "array", "items": {"type": "string"}},
        {"type": "array", "items": {"type": "object", "properties": {}}},
        {"type": "array", "items": {"type": "integer", "enum": [1, 2]}},
        {"type": "array"},
    ],
)
def test_an_array_that_is_not_a_multi_select_is_a_form_error(prop: dict[str, Any]) -> None:
    with pytest.raises(FormError, match="multi-select"):
        _form_of(prop)


@pytest.mark.parametrize("prop", [{"type": ["string", "null"]}, {"type": "null"}, {}, {"anyOf": [{"type": "string"}]}])
def test_a_property_type_that_cannot_be_shown_is_a_form_error(prop: dict[str, Any]) -> None:
    with pytest.raises(FormError, match="cannot be shown"):
        _form_of(prop)


def test_a_property_schema_that_is_not_an_object_is_a_form_error() -> None:
    with pytest.raises(FormError, match="property 'f'"):
        _form_of("string")  # type: ignore[arg-type]  # a wrong type on purpose


def test_properties_that_are_not_an_object_are_a_form_error() -> None:
    with pytest.raises(FormError, match="'properties'"):
        parse_form({"type": "object", "properties": [{"type": "string"}]})


def test_a_required_name_without_a_property_is_a_form_error() -> None:
    with pytest.raises(FormError, match="do not exist: ghost"):
        parse_form({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]})


def test_a_required_list_that_is_not_strings_is_a_form_error() -> None:
    with pytest.raises(FormError, match="'required' must be a list of strings"):
        parse_form({"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"})


@pytest.mark.parametrize(
    ("prop", "message"),
    [
        ({"type": "string", "minLength": "3"}, "'minLength' must be a non-negative integer"),
        ({"type": "string", "maxLength": -1}, "'maxLength' must be a non-negative integer"),
        ({"type": "string", "minLength": True}, "'minLength' must be a non-negative integer"),
        ({"type": "string", "pattern": 5}, "'pattern' must be a string"),
        ({"type": "string", "default": 5}, "'default' must be a string"),
        ({"type": "string", "title": ["x"]}, "'title' must be a string"),
        ({"type": "number", "minimum": "0"}, "'minimum' must be a number"),
        ({"type": "number", "maximum": False}, "'maximum' must be a number"),
        ({"type": "number", "default": True}, "'default' must be a number"),
        ({"type": "integer", "default": 2.5}, "'default' must be an integer"),
        ({"type": "boolean", "default": "false"}, "'default' must be a boolean"),
        ({"type": "string", "enum": ["a"], "default": 1}, "'default' must be a string"),
        ({"type": "array", "items": {"enum": ["a"]}, "default": "a"}, "'default' must be a list of strings"),
        ({"type": "array", "items": {"enum": ["a"]}, "minItems": 1.5}, "'minItems' must be a non-negative integer"),
    ],
)
def test_a_keyword_of_the_wrong_type_is_a_form_error(prop: dict[str, Any], message: str) -> None:
    with pytest.raises(FormError, match=re.escape(message)):
        _form_of(prop)


@pytest.mark.parametrize(
    ("prop", "message"),
    [
        ({"type": "string", "enum": []}, "no options"),
        ({"type": "string", "enum": ["a", "a"]}, "appears twice"),
        ({"type": "string", "enum": ["a", 1]}, "'enum' must be a list of strings"),
        ({"type": "string", "oneOf": [{"const": 1, "title": "One"}]}, "string 'const'"),
        ({"type": "string", "oneOf": [{"const": "a", "title": 1}]}, "string 'title'"),
        ({"type": "string", "oneOf": ["a"]}, "list of {const, title} objects"),
        ({"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}, "one title per 'enum' value"),
        ({"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}] * 2}}, "appears twice"),
    ],
)
def test_missing_malformed_or_duplicate_options_are_a_form_error(prop: dict[str, Any], message: str) -> None:
    with pytest.raises(FormError, match=re.escape(message)):
        _form_of(prop)


@pytest.mark.parametrize("prop", [{"type": "number", "enum": [1, 2]}, {"type": "boolean", "oneOf": []}])
def test_an_enum_on_anything_but_a_string_is_a_form_error(prop: dict[str, Any]) -> None:
    with pytest.raises(FormError, match="only supported on a string"):
        _form_of(prop)


def test_a_pattern_python_cannot_compile_is_a_form_error() -> None:
    with pytest.raises(FormError, match="'pattern' is not a regular expression"):
        _form_of({"type": "string", "pattern": "("})


def test_unknown_keywords_and_unknown_formats_are_ignored() -> None:
    f = _field_of({"type": "string", "format": "hostname", "x-widget": "textarea", "examples": ["a"]})
    assert f.kind == "string" and f.format is None
    assert validate(_form_of({"type": "string", "format": "hostname"}), {"f": "not a hostname!"}) == {}


def test_a_schema_without_properties_is_a_form_with_no_fields() -> None:
    form = parse_form({"type": "object", "$schema": "https://json-schema.org/draft/2020-12/schema"})
    assert form == Form(title=None, description=None, fields=())
    assert validate(form, {}) == {} and validate(form, None) == {}


def test_an_enum_or_one_of_without_a_type_is_a_string_choice() -> None:
    assert _field_of({"enum": ["a", "b"]}).kind == "choice"
    assert _field_of({"oneOf": [{"const": "a", "title": "A"}]}).options == (Option("a", "A"),)


def test_a_one_of_entry_without_a_title_is_titled_by_its_value() -> None:
    assert _field_of({"type": "string", "oneOf": [{"const": "a"}]}).options == (Option("a", "a"),)


def test_a_null_default_is_no_default() -> None:
    form = _form_of({"type": "string", "default": None})
    assert form.fields[0].default is None and with_defaults(form) == {}


def test_the_form_keeps_the_schema_title_and_description() -> None:
    form = parse_form({"type": "object", "title": "Contact", "description": "Who are you?", "properties": {}})
    assert (form.title, form.description) == ("Contact", "Who are you?")


def test_a_form_is_frozen_and_hashable() -> None:
    form = parse_form(CONTACT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        form.fields[0].name = "other"  # type: ignore[misc]  # the write the frozen dataclass must refuse
    assert hash(form) == hash(parse_form(CONTACT))
    assert form.field("age") is form.fields[2] and form.field("nope") is None


# ---- validate -------------------------------------------------------------------------------------

VALID = {"name": "Ann", "email": "ann@example.com", "age": 30, "score": 0.5, "color": "#f00", "tags": ["a"]}


def test_a_valid_answer_has_no_errors() -> None:
    assert validate(parse_form(CONTACT), VALID) == {}


def test_a_required_field_that_is_missing_is_named() -> None:
    assert validate(parse_form(CONTACT), {"email": "ann@example.com"}) == {"name": "a value is required"}


def test_optional_fields_may_be_left_out() -> None:
    assert validate(parse_form(CONTACT), {"name": "Ann", "email": "a@b"}) == {}


def test_no_content_is_an_empty_answer() -> None:
    form = parse_form(CONTACT)
    assert validate(form, None) == {"name": "a value is required", "email": "a value is required"}


@pytest.mark.parametrize("content", [[], "name=Ann", 3])
def test_content_that_is_not_an_object_is_an_error_about_the_whole_answer(content: object) -> None:
    assert list(validate(parse_form(CONTACT), content)) == [""]


def test_an_unknown_field_is_named() -> None:
    assert validate(parse_form(CONTACT), {**VALID, "nickname": "A"}) == {"nickname": "is not a field of this form"}


def test_every_problem_is_reported_at_once() -> None:
    errors = validate(parse_form(CONTACT), {"email": "nope", "age": 17, "tags": [], "extra": 1})
    assert set(errors) == {"name", "email", "age", "tags", "extra"}


@pytest.mark.parametrize("value", [5, None, True, ["Ann"]])
def test_a_string_field_rejects_a_value_that_is_not_a_string(value: object) -> None:
    assert validate(parse_form(CONTACT), {**VALID, "name": value}) == {"name": "must be a string"}


def test_a_string_that_is_too_short_or_too_long_is_named_with_the_limit() -> None:
    form = parse_form(CONTACT)
    assert validate(form, {**VALID, "name": "A"}) == {"name": "must be at least 2 characters long"}
    assert validate(form, {**VALID, "name": "Annabel"}) == {"name": "must be at most 5 characters long"}


def test_string_length_counts_characters_not_bytes() -> None:
    assert validate(parse_form(CONTACT), {**VALID, "name": "Zoë😀"}) == {}
    assert _form_of({"type": "string", "maxLength": 1}).fields[0].max_length == 1
    assert validate(_form_of({"type": "string", "minLength": 1}), {"f": ""}) == {
        "f": "must be at least 1 character long"
    }


def test_a_pattern_is_searched_unanchored_as_json_schema_does() -> None:
    form = _form_of({"type": "string", "pattern": "[0-9]{3}"})
    assert validate(form, {"f": "ab123cd"}) == {}
    assert validate(form, {"f": "ab12"}) == {"f": "must match the pattern [0-9]{3}"}
    anchored = _form_of({"type": "string", "pattern": "^[A-Za-z]+$"})
    assert validate(anchored, {"f": "Ann"}) == {} and "f" in validate(anchored, {"f": "Ann1"})


HINTS = {"email": "an email address", "uri": "a URI", "date": "RFC 3339 date (", "date-time": "RFC 3339 date-time"}


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("email", ["ann@example.com", "a.b+c@sub.example.org", "root@localhost"],
         ["ann", "ann@", "@example.com", "a b@example.com", "a@b@c", "ann@example..com", "ann@.com"]),
        ("uri", ["https://example.com/x?y=1", "urn:isbn:0451450523", "mailto:a@b.c", "file:///tmp"],
         ["example.com", "/relative/path", "https://exa mple.com", "1http://x", ""]),
        ("date", ["2025-01-31", "2024-02-29"],
         ["2025-02-29", "2025-13-01", "2025-1-1", "31/01/2025", "2025-01-31T00:00:00Z", "２０２５-01-31"]),
        ("date-time", ["2025-01-31T09:30:00Z", "2025-01-31t09:30:00.123+02:00", "2016-12-31T23:59:60z"],
         ["2025-01-31T09:30:00", "2025-01-31 09:30:00Z", "2025-01-31T24:00:00Z", "2025-01-31T09:61:00Z",
          "2025-02-30T09:30:00Z", "2025-01-31T09:30:00+25:00", "2025-01-31"]),
    ],
)  # fmt: skip
def test_a_string_format_accepts_its_values_and_rejects_others(fmt: str, good: list[str], bad: list[str]) -> None:
    form = _form_of({"type": "string", "format": fmt})
    for value in good:
        assert validate(form, {"f": value}) == {}, value
    for value in bad:
        assert list(validate(form, {"f": value})) == ["f"], value
        assert HINTS[fmt] in validate(form, {"f": value})["f"], value


@pytest.mark.parametrize("value", [True, False, "30", None, float("nan"), float("inf"), [30]])
def test_a_number_field_rejects_booleans_strings_and_non_finite_values(value: object) -> None:
    assert validate(parse_form(CONTACT), {**VALID, "score": value}) == {"score": "must be a number"}


@pytest.mark.parametrize("value", [0.5, 1, 1e9])
def test_a_number_field_accepts_integers_and_fractions_within_its_bounds(value: float) -> None:
    assert validate(parse_form(CONTACT), {**VALID, "score": value}) == {}


@pytest.mark.parametrize("value", [30.0, 30.5, True, "30"])
def test_an_integer_field_accepts_only_json_integers(value: object) -> None:
    assert validate(parse_form(CONTACT), {**VALID, "age": value}) == {"age": "must be a whole number"}


def test_number_bounds_are_inclusive_and_named_in_the_error() -> None:
    form = parse_form(CONTACT)
    assert validate(form, {**VALID, "age": 18}) == {} and validate(form, {**VALID, "age": 120}) == {}
    assert validate(form, {**VALID, "age": 17}) == {"age": "must be at least 18"}
    assert validate(form, {**VALID, "age": 121}) == {"age": "must be at most 120"}
    assert validate(form, {**VALID, "score": 0.25}) == {"score": "must be at least 0.5"}


@pytest.mark.parametrize("value", ["true", 1, 0, None])
def test_a_boolean_field_accepts_only_true_or_false(value: object) -> None:
    assert validate(parse_form(CONTACT), {**VALID, "subscribe": value}) == {"subscribe": "must be true or false"}
    assert validate(parse_form(CONTACT), {**VALID, "subscribe": True}) == {}


def test_a_choice_must_be_an_option_value_and_the_error_lists_the_options() -> None:
    form = parse_form(CONTACT)
    assert validate(form, {**VALID, "color": "#0f0"}) == {}
    assert validate(form, {**VALID, "color": "Red"}) == {"color": "must be one of: #f00 (Red), #0f0 (Green)"}
    assert validate(form, {**VALID, "color": 1}) == {"color": "must be a string"}


def test_an_untitled_choice_error_lists_the_bare_values() -> None:
    form = _form_of({"type": "string", "enum": ["x", "y"]})
    assert validate(form, {"f": "z"}) == {"f": "must be one of: x, y"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a", "must be a list of choices"),
        (["a", 1], "must be a list of choices"),
        (["a", "z"], "'z' is not allowed; must be one of: a, b, c"),
        (["y", "z"], "'y', 'z' are not allowed; must be one of: a, b, c"),
        (["a", "a"], "each choice may be given only once"),
        ([], "choose at least 1 option"),
        (["a", "b", "c"], "choose at most 2 options"),
    ],
)
def test_a_multi_choice_checks_its_items_and_selection_count(value: object, message: str) -> None:
    assert validate(parse_form(CONTACT), {**VALID, "tags": value}) == {"tags": message}


def test_a_multi_choice_without_counts_accepts_no_selection() -> None:
    assert validate(_form_of({"type": "array", "items": {"enum": ["a"]}}), {"f": []}) == {}


# ---- coerce ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [("true", True), ("TRUE", True), ("yes", True), ("on", True), ("1", True), ("y", True),
     ("false", False), ("False", False), ("no", False), ("off", False), ("0", False), (" n ", False)],
)  # fmt: skip
def test_coerce_turns_boolean_words_into_booleans(raw: str, value: bool) -> None:
    assert coerce(parse_form(CONTACT), {"subscribe": raw}) == ({"subscribe": value}, {})


def test_coerce_reports_a_word_that_is_not_a_boolean() -> None:
    content, errors = coerce(parse_form(CONTACT), {"subscribe": "maybe"})
    assert content == {} and errors["subscribe"].startswith("must be true or false")


@pytest.mark.parametrize(("raw", "value"), [("42", 42), ("-3", -3), ("+7", 7), (" 19 ", 19)])
def test_coerce_turns_digits_into_an_integer(raw: str, value: int) -> None:
    content, errors = coerce(parse_form(CONTACT), {"age": raw})
    assert errors == {} and content == {"age": value} and type(content["age"]) is int


@pytest.mark.parametrize("raw", ["3.0", "1_000", "x", "", "1e3", "٣"])
def test_coerce_rejects_an_integer_that_is_not_plain_digits(raw: str) -> None:
    assert coerce(parse_form(CONTACT), {"age": raw}) == ({}, {"age": "must be a whole number"})


@pytest.mark.parametrize(("raw", "value"), [("4.5", 4.5), ("42", 42), ("-.5", -0.5), ("1e3", 1000.0), ("2.", 2.0)])
def test_coerce_turns_a_decimal_into_a_number_and_keeps_whole_numbers_integers(raw: str, value: float) -> None:
    content, errors = coerce(parse_form(CONTACT), {"score": raw})
    assert errors == {} and content == {"score": value} and type(content["score"]) is type(value)


@pytest.mark.parametrize("raw", ["nan", "inf", "-Infinity", "1e999", "4,5", "", "0x10"])
def test_coerce_rejects_a_number_that_is_not_a_finite_decimal(raw: str) -> None:
    assert coerce(parse_form(CONTACT), {"score": raw}) == ({}, {"score": "must be a number"})


def test_coerce_keeps_a_string_exactly_as_given() -> None:
    assert coerce(parse_form(CONTACT), {"name": "  Ann "}) == ({"name": "  Ann "}, {})


@pytest.mark.parametrize(("raw", "value"), [("#0f0", "#0f0"), ("Green", "#0f0"), ("green", "#0f0"), (" Red ", "#f00")])
def test_coerce_turns_an_option_title_or_value_into_its_value(raw: str, value: str) -> None:
    assert coerce(parse_form(CONTACT), {"color": raw}) == ({"color": value}, {})


def test_coerce_prefers_an_exact_value_over_a_title_and_refuses_ambiguous_case_matches() -> None:
    form = _form_of({"type": "string", "oneOf": [{"const": "b", "title": "a"}, {"const": "a", "title": "b"}]})
    assert coerce(form, {"f": "a"}) == ({"f": "a"}, {})
    ambiguous = _form_of({"type": "string", "enum": ["x", "X"]})
    assert coerce(ambiguous, {"f": "X"}) == ({"f": "X"}, {})
    content, _ = coerce(_form_of({"type": "string", "enum": ["Ab", "AB"]}), {"f": "ab"})
    assert content == {"f": "ab"}  # neither is chosen; validate rejects it


def test_coerce_leaves_an_unknown_choice_for_validate_to_reject() -> None:
    form = parse_form(CONTACT)
    content, errors = coerce(form, {"color": "Blue"})
    assert (content, errors) == ({"color": "Blue"}, {})
    assert validate(form, {**VALID, **content}) == {"color": "must be one of: #f00 (Red), #0f0 (Green)"}


@pytest.mark.parametrize(
    ("raw", "value"),
    [("a,b", ["a", "b"]), (" a , c ", ["a", "c"]), ("a", ["a"]), ("", []), ("a,,b,", ["a", "b"]), ('["a"]', ["a"])],
)
def test_coerce_splits_a_multi_choice_on_commas_or_reads_a_json_array(raw: str, value: list[str]) -> None:
    assert coerce(parse_form(CONTACT), {"tags": raw}) == ({"tags": value}, {})


def test_coerce_maps_multi_choice_titles_and_allows_commas_inside_a_json_array() -> None:
    form = _form_of(
        {"type": "array", "items": {"anyOf": [{"const": "x,y", "title": "Both"}, {"const": "z", "title": "Zed"}]}}
    )
    assert coerce(form, {"f": "Both,zed"}) == ({"f": ["x,y", "z"]}, {})
    assert coerce(form, {"f": '["x,y", "Zed"]'}) == ({"f": ["x,y", "z"]}, {})


@pytest.mark.parametrize("raw", ["[a", '["a", 1]', "[1]"])
def test_coerce_reports_a_multi_choice_that_is_a_broken_json_array(raw: str) -> None:
    content, errors = coerce(parse_form(CONTACT), {"tags": raw})
    assert content == {} and "JSON array of strings" in errors["tags"]


def test_coerce_leaves_out_fields_not_given_and_invents_no_defaults() -> None:
    form = parse_form(CONTACT)
    assert coerce(form, {"name": "Ann"}) == ({"name": "Ann"}, {})
    assert coerce(form, {}) == ({}, {})


def test_coerce_names_an_unknown_field() -> None:
    assert coerce(parse_form(CONTACT), {"nick": "A", "name": "Ann"}) == (
        {"name": "Ann"},
        {"nick": "is not a field of this form"},
    )


def test_coerce_then_validate_checks_the_constraints_of_a_cli_answer() -> None:
    form = parse_form(CONTACT)
    raw = {"name": "Ann", "email": "ann@example.com", "age": "17", "subscribe": "yes", "color": "Red", "tags": "a,b"}
    content, errors = coerce(form, raw)
    assert errors == {}
    assert content == {
        "name": "Ann",
        "email": "ann@example.com",
        "age": 17,
        "subscribe": True,
        "color": "#f00",
        "tags": ["a", "b"],
    }
    assert validate(form, content) == {"age": "must be at least 18"}


def test_coerce_accepts_the_spec_example_answer_given_as_strings() -> None:
    form = parse_form(_example("ElicitRequestFormParams", "elicit-multiple-fields.json")["requestedSchema"])
    expected = _example("ElicitResult", "input-multiple-fields.json")["content"]
    content, errors = coerce(form, {k: str(v) for k, v in expected.items()})
    assert errors == {} and content == expected and validate(form, content) == {}


# ---- with_defaults --------------------------------------------------------------------------------


def test_with_defaults_gives_only_the_declared_defaults_as_json_values() -> None:
    form = parse_form(
        {
            "type": "object",
            "properties": {
                "s": {"type": "string", "default": "x"},
                "n": {"type": "number", "default": 0},
                "i": {"type": "integer"},
                "b": {"type": "boolean", "default": True},
                "c": {"type": "string", "enum": ["p", "q"], "default": "q"},
                "m": {"type": "array", "items": {"enum": ["p", "q"]}, "default": []},
            },
        }
    )
    defaults = with_defaults(form)
    assert defaults == {"s": "x", "n": 0, "b": True, "c": "q", "m": []}
    assert json.loads(json.dumps(defaults)) == defaults
    defaults["m"].append("p")
    assert with_defaults(form)["m"] == []  # a fresh list each time: the form itself stays frozen


def test_with_defaults_of_the_contact_form_prefills_only_subscribe() -> None:
    assert with_defaults(parse_form(CONTACT)) == {"subscribe": False}


# ---- fill_defaults (SEP-1034) ---------------------------------------------------------------------
SEP1034 = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "default": ["a"]},
        "note": {"type": "string"},
    },
}


def test_fill_defaults_gives_an_accept_the_defaults_of_the_fields_it_leaves_out() -> None:
    answer = {"action": "accept", "content": {"name": "Ada", "verified": False}}
    assert fill_defaults(SEP1034, answer) == {
        "action": "accept",
        "content": {"name": "Ada", "verified": False, "age": 30, "score": 95.5, "status": "active", "tags": ["a"]},
    }
    assert answer == {"action": "accept", "content": {"name": "Ada", "verified": False}}  # not changed in place


def test_fill_defaults_of_an_accept_without_content_is_every_default() -> None:
    out = fill_defaults(SEP1034, {"action": "accept"})
    assert out["content"] == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
        "tags": ["a"],
    }


@pytest.mark.parametrize(
    "answer",
    [{"action": "decline"}, {"action": "cancel"}, {"action": "accept", "content": "not an object"}],
)
def test_fill_defaults_leaves_anything_but_an_accepted_form_as_it_came(answer: dict[str, Any]) -> None:
    assert fill_defaults(SEP1034, answer) == answer


def test_fill_defaults_of_a_schema_that_is_no_form_adds_nothing() -> None:
    nested = {"type": "object", "properties": {"o": {"type": "object", "default": {}}}}
    assert fill_defaults(nested, {"action": "accept", "content": {}}) == {"action": "accept", "content": {}}

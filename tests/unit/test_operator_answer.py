"""mcpx.questions.answers.operator_answer: what the upstream gets for an operator's answer, per question
kind (form and URL elicitation, sampling, roots, anything else) and action (accept, decline,
cancel), and the field each refusal names (the 422 body's `fields`). Pure."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.questions.answers import AnswerError, operator_answer
from mcpx.records.question import USER_REJECTED, Action, Question

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2},
        "age": {"type": "integer", "minimum": 0},
        "color": {"type": "string", "enum": ["red", "blue"]},
    },
    "required": ["name"],
}


def q(method: str, **params: Any) -> Question:
    return Question("q-1", "up", method, params, 0, 1)


FORM = q("elicitation/create", message="who?", requestedSchema=SCHEMA)
URL = q("elicitation/create", mode="url", url="https://example.com/login", message="log in")
SAMPLING = q("sampling/createMessage", messages=[], maxTokens=10)
ROOTS = q("roots/list")
OTHER = q("x/custom")
GOOD_SAMPLE = {"role": "assistant", "model": "m-1", "content": {"type": "text", "text": "hi"}, "stopReason": "end"}


def refusal(question: Question, action: Action = "accept", **kw: object) -> dict[str, str]:
    with pytest.raises(AnswerError) as caught:
        operator_answer(question, action, **kw)  # type: ignore[arg-type]  # content/result
    return caught.value.fields


# ---- form elicitation --------------------------------------------------------------------------


def test_an_accepted_form_answer_that_fits_its_schema_goes_through() -> None:
    content = {"name": "Ann", "age": 30, "color": "red"}
    assert operator_answer(FORM, "accept", content) == {"action": "accept", "content": content}


def test_a_form_answer_names_every_field_that_does_not_fit() -> None:
    assert refusal(FORM, content={"name": "A", "age": -1, "color": "green", "extra": 1}) == {
        "content.name": "must be at least 2 characters long",
        "content.age": "must be at least 0",
        "content.color": "must be one of: red, blue",
        "content.extra": "is not a field of this form",
    }


def test_a_form_answer_without_a_required_field_names_it() -> None:
    assert refusal(FORM, content={"age": 3}) == {"content.name": "a value is required"}
    assert refusal(FORM, content=None) == {"content.name": "a value is required"}


def test_form_content_that_is_not_an_object_is_refused_as_a_whole() -> None:
    assert refusal(FORM, content=["Ann"]) == {"content": "the content must be an object of field values"}


def test_an_empty_form_accepts_no_content_as_an_empty_answer() -> None:
    empty = q("elicitation/create", message="ok?", requestedSchema={"type": "object", "properties": {}})
    assert operator_answer(empty, "accept") == {"action": "accept", "content": {}}


def test_a_form_the_upstream_sent_that_cannot_be_answered_names_the_schema() -> None:
    nested = q("elicitation/create", requestedSchema={"type": "object", "properties": {"a": {"type": "object"}}})
    fields = refusal(nested, content={"a": {}})
    assert list(fields) == ["requestedSchema"] and "cannot be answered" in fields["requestedSchema"]
    assert list(refusal(q("elicitation/create", message="no schema"), content={})) == ["requestedSchema"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_or_cancelling_an_elicitation_carries_no_content(action: Action) -> None:
    assert operator_answer(FORM, action) == {"action": action}
    assert operator_answer(URL, action) == {"action": action}
    assert refusal(FORM, action, content={"name": "Ann"}) == {"content": f"a {action} carries no content"}


# ---- URL elicitation -----------------------------------------------------------------------------


def test_accepting_a_url_elicitation_says_the_person_is_done_and_needs_no_content() -> None:
    assert URL.kind == "url-elicitation"
    assert operator_answer(URL, "accept") == {"action": "accept"}


# ---- sampling ----------------------------------------------------------------------------------


def test_an_accepted_sampling_result_that_fits_goes_through_unchanged() -> None:
    assert operator_answer(SAMPLING, "accept", result=GOOD_SAMPLE) is GOOD_SAMPLE
    blocks = {**GOOD_SAMPLE, "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "", "mimeType": "x"}]}
    assert operator_answer(SAMPLING, "accept", result=blocks) == blocks


def test_a_sampling_result_names_every_field_that_does_not_fit() -> None:
    assert refusal(SAMPLING, result={"role": "user", "content": {"type": "text"}, "stopReason": 3}) == {
        "result.role": 'must be "assistant"',
        "result.model": "required, the model's name",
        "result.content.text": "required, a string",
        "result.stopReason": "must be a string",
    }
    assert refusal(SAMPLING, result={**GOOD_SAMPLE, "model": ""}) == {"result.model": "required, the model's name"}
    assert refusal(SAMPLING, result={**GOOD_SAMPLE, "content": "hi"}) == {
        "result.content": "a content block with a type"
    }


def test_a_sampling_result_with_content_blocks_names_the_block_by_index() -> None:
    result = {**GOOD_SAMPLE, "content": [{"type": "text", "text": "ok"}, {"text": "no type"}, {"type": "text"}]}
    assert refusal(SAMPLING, result=result) == {
        "result.content[1]": "a content block with a type",
        "result.content[2].text": "required, a string",
    }


@pytest.mark.parametrize("question", [SAMPLING, ROOTS, OTHER], ids=["sampling", "roots", "other"])
def test_an_accepted_answer_other_than_an_elicitation_needs_a_result_object(question: Question) -> None:
    fields = refusal(question, result=None)
    assert list(fields) == ["result"] and "needs a result object" in fields["result"]
    assert list(refusal(question, result=["not", "an", "object"])) == ["result"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_sampling_is_the_user_rejected_error(action: Action) -> None:
    code, message = operator_answer(SAMPLING, action)  # type: ignore[misc]  # a (code, message) pair
    assert code == USER_REJECTED == -1 and action in message and "rejected" in message


# ---- roots ---------------------------------------------------------------------------------------


def test_an_accepted_roots_result_that_fits_goes_through_unchanged() -> None:
    result = {"roots": [{"uri": "file:///home/ann", "name": "home"}, {"uri": "file:///tmp"}], "_meta": {"x": 1}}
    assert operator_answer(ROOTS, "accept", result=result) is result
    assert operator_answer(ROOTS, "accept", result={"roots": []}) == {"roots": []}


def test_a_roots_result_names_every_root_that_does_not_fit() -> None:
    result = {
        "roots": [
            {"uri": "file:///ok"},
            {"name": "no uri"},
            {"uri": "https://example.com"},
            {"uri": "file:///x", "name": 5},
            "str",
        ],
        "extra": True,
    }
    assert refusal(ROOTS, result=result) == {
        "result.roots[1].uri": "required, a string",
        "result.roots[2].uri": "a root is a file:// URI",
        "result.roots[3].name": "must be a string",
        "result.roots[4].uri": "required, a string",
        "result.extra": "unknown key",
    }
    assert refusal(ROOTS, result={"roots": "file:///x"}) == {"result.roots": "must be a list of {uri, name?}"}


@pytest.mark.parametrize("question", [ROOTS, OTHER], ids=["roots", "other"])
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_roots_or_another_kind_is_an_internal_error(question: Question, action: Action) -> None:
    assert operator_answer(question, action) == (-32603, f"the operator answered {action}")


# ---- anything else -------------------------------------------------------------------------------


def test_an_accepted_answer_to_an_unknown_kind_is_passed_on_as_given() -> None:
    assert OTHER.kind == "other"
    assert operator_answer(OTHER, "accept", result={"anything": [1]}) == {"anything": [1]}


def test_an_answer_error_says_each_field_and_problem() -> None:
    error = AnswerError({"content.name": "a value is required", "": "the content must be an object"})
    assert str(error) == "content.name: a value is required; answer: the content must be an object"

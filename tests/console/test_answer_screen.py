"""console.answer_screen: the answer modal driven by Textual's pilot, with a fake ``submit``.

A unit-level UI test: ``submit`` is a plain async function that records what it got and replies
what the test scripts (None: taken; a dict: the daemon's refusal). Real-daemon tests live elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Select, SelectionList, Static, TextArea

from console.answer_screen import AnswerScreen
from console.forms import Answer

pytestmark = pytest.mark.anyio

CONTACT = {  # schema/2026-07-28/examples/ElicitRequestFormParams/elicit-multiple-fields.json
    "mode": "form",
    "message": "Please provide your contact information",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Your full name"},
            "email": {"type": "string", "format": "email", "description": "Your email address"},
            "age": {"type": "number", "minimum": 18, "description": "Your age"},
        },
        "required": ["name", "email"],
    },
}
METHODS = {"sampling": "sampling/createMessage", "roots": "roots/list"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def question(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "q-7",
        "kind": kind,
        "method": METHODS.get(kind, "elicitation/create"),
        "upstream": "crm",
        "params": params,
        "status": "open",
        "taskId": "t-1",
        "hostCanAnswer": False,
    }


class Host(App[None]):
    """Pushes the screen on mount; records what ``submit`` got and what the screen was dismissed with."""

    def __init__(self, q: dict[str, Any], *replies: dict[str, str] | None, fail: bool = False) -> None:
        super().__init__()
        self.q, self.replies, self.fail = q, list(replies), fail
        self.sent: list[Answer] = []
        self.results: list[Answer | None] = []

    async def submit(self, answer: Answer) -> dict[str, str] | None:
        self.sent.append(answer)
        if self.fail:
            raise ConnectionError("daemon unreachable")
        return self.replies.pop(0) if self.replies else None

    def on_mount(self) -> None:
        self.push_screen(AnswerScreen(self.q, self.submit), self.results.append)


async def settle(pilot: Pilot[None]) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def type_into(pilot: Pilot[None], selector: str, text: str) -> None:
    pilot.app.screen.query_one(selector, Input).focus()
    await pilot.press("end", *text)  # focus selects the whole value; type after it


def text_of(pilot: Pilot[None], selector: str) -> str:
    return str(pilot.app.screen.query_one(selector, Static).content)


async def fill_contact(pilot: Pilot[None], email: str) -> None:
    await type_into(pilot, "#field-name", "Ada Lovelace")
    await type_into(pilot, "#field-email", email)
    await type_into(pilot, "#field-age", "36")


async def test_it_shows_the_question_and_its_fields() -> None:
    app = Host(question("elicitation", CONTACT))
    async with app.run_test(size=(120, 40)) as pilot:
        assert isinstance(app.screen, AnswerScreen)
        assert text_of(pilot, "#message") == "Please provide your contact information"
        assert text_of(pilot, "#warning") == "crm is asking; only answer what you would tell it"
        assert text_of(pilot, "#help-email") == "Your email address · email"
        assert text_of(pilot, "#help-age") == "Your age · at least 18"
        assert app.focused is app.screen.query_one("#field-name")


async def test_a_valid_answer_is_submitted_once_and_closes_the_screen() -> None:
    app = Host(question("elicitation", CONTACT))
    async with app.run_test(size=(120, 40)) as pilot:
        await fill_contact(pilot, "ada@example.com")
        await pilot.press("ctrl+s")
        await settle(pilot)
        expected = Answer("accept", content={"name": "Ada Lovelace", "email": "ada@example.com", "age": 36})
        assert app.sent == [expected] and app.results == [expected]
        assert not isinstance(app.screen, AnswerScreen)


async def test_an_invalid_email_is_shown_under_the_field_and_nothing_is_sent() -> None:
    app = Host(question("elicitation", CONTACT))
    async with app.run_test(size=(120, 40)) as pilot:
        await fill_contact(pilot, "ada-at-example")
        await pilot.click("#accept")
        await settle(pilot)
        assert text_of(pilot, "#error-email") == "must be an email address (name@example.com)"
        assert text_of(pilot, "#error-name") == "" and text_of(pilot, "#error-age") == ""
        assert app.sent == [] and isinstance(app.screen, AnswerScreen)
        assert app.focused is app.screen.query_one("#field-email")


async def test_missing_required_fields_are_named() -> None:
    app = Host(question("elicitation", CONTACT))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert text_of(pilot, "#error-name") == text_of(pilot, "#error-email") == "a value is required"
        assert app.sent == []


async def test_a_422_from_the_daemon_is_shown_next_to_its_field_then_a_retry_goes_through() -> None:
    app = Host(question("elicitation", CONTACT), {"content.email": "is already registered"}, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await fill_contact(pilot, "ada@example.com")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert text_of(pilot, "#error-email") == "is already registered"
        assert app.results == [] and isinstance(app.screen, AnswerScreen)
        await type_into(pilot, "#field-email", "x")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert [a.content["email"] for a in app.sent if a.content] == ["ada@example.com", "ada@example.comx"]
        assert app.results == [app.sent[1]]


async def test_already_answered_is_shown_at_the_top() -> None:
    app = Host(question("elicitation", CONTACT), {"": "already answered (by host:conn-2)"})
    async with app.run_test(size=(120, 40)) as pilot:
        await fill_contact(pilot, "ada@example.com")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert text_of(pilot, "#top-error") == "already answered (by host:conn-2)"
        assert app.results == []


async def test_a_failing_submit_is_shown_not_raised() -> None:
    app = Host(question("elicitation", CONTACT), fail=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+d")
        await settle(pilot)
        assert text_of(pilot, "#top-error") == "not sent: daemon unreachable"
        assert app.results == []


async def test_decline_from_inside_an_input_and_cancel_by_button() -> None:
    app = Host(question("elicitation", CONTACT))
    async with app.run_test(size=(120, 40)) as pilot:
        await type_into(pilot, "#field-name", "Ad")
        await pilot.press("ctrl+d")  # the input's own ctrl+d (delete right) does not win
        await settle(pilot)
        assert app.sent == app.results == [Answer("decline")]
    app = Host(question("elicitation", CONTACT))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.click("#cancel")
        await settle(pilot)
        assert app.sent == app.results == [Answer("cancel")]
    app = Host(question("elicitation", CONTACT))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+x")
        await settle(pilot)
        assert app.sent == [Answer("cancel")]


async def test_escape_closes_without_answering() -> None:
    app = Host(question("elicitation", CONTACT))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("escape")
        await settle(pilot)
        assert app.sent == [] and app.results == [None]


async def test_switch_radio_select_and_selection_list_by_keyboard() -> None:
    params = {
        "message": "Deploy?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "now": {"type": "boolean", "title": "Deploy now"},
                "env": {"type": "string", "oneOf": [{"const": "prod", "title": "Production"}, {"const": "dev"}]},
                "size": {"enum": ["s", "m", "l"], "default": "m"},
                "regions": {"type": "array", "items": {"enum": ["eu", "us", "ap"]}, "minItems": 1},
            },
            "required": ["env"],
        },
    }
    app = Host(question("elicitation", params))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen.query_one("#field-now"), Checkbox)
        assert isinstance(screen.query_one("#field-env"), RadioSet)
        assert isinstance(screen.query_one("#field-size"), Select)
        assert isinstance(screen.query_one("#field-regions"), SelectionList)
        await pilot.press("space")  # the switch has focus
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert text_of(pilot, "#error-env") == "a value is required"
        assert text_of(pilot, "#error-regions") == "choose at least 1 option"
        screen.query_one("#field-env").focus()
        await pilot.press("down", "enter")  # the radio set: second button
        screen.query_one("#field-regions").focus()
        await pilot.press("down", "space")  # the selection list: "us"
        await pilot.press("ctrl+s")
        await settle(pilot)
        expected = Answer("accept", content={"now": True, "env": "dev", "size": "m", "regions": ["us"]})
        assert app.sent == [expected] and app.results == [expected]


async def test_a_url_elicitation_shows_the_url_and_is_done_with_enter() -> None:
    url = "https://mcp.example.com/ui/set_api_key"
    app = Host(question("url-elicitation", {"mode": "url", "url": url, "message": "Please provide your API key."}))
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.screen.query_one("#url", TextArea).text == url
        assert app.screen.query_one("#url", TextArea).read_only
        done = app.screen.query_one("#accept", Button)
        assert str(done.label) == "Done" and app.focused is done
        await pilot.press("enter")
        await settle(pilot)
        assert app.sent == app.results == [Answer("accept")]


async def test_sampling_takes_a_json_result_checked_before_it_is_sent() -> None:
    params = {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 50}
    app = Host(question("sampling", params), {"result.model": "required, the model's name"}, None)
    async with app.run_test(size=(120, 40)) as pilot:
        assert text_of(pilot, "#message") == "user: Hi\n(max tokens: 50)"
        area = app.screen.query_one("#result", TextArea)
        assert app.focused is area and json.loads(area.text)["role"] == "assistant"
        area.text = '{"role": "assistant",'
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert text_of(pilot, "#error-result").startswith("not JSON")
        assert app.sent == []
        result = {"role": "assistant", "model": "", "content": {"type": "text", "text": "Hello"}}
        area.text = json.dumps(result)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert text_of(pilot, "#error-result") == "result.model: required, the model's name"
        area.text = json.dumps(result | {"model": "operator"})
        await pilot.click("#accept")
        await settle(pilot)
        assert app.sent == [Answer("accept", result=result), Answer("accept", result=result | {"model": "operator"})]
        assert app.results == [app.sent[-1]]


async def test_a_form_that_cannot_be_shown_can_only_be_declined_or_cancelled() -> None:
    params = {"message": "m", "requestedSchema": {"type": "object", "properties": {"x": {"type": "object"}}}}
    app = Host(question("elicitation", params))
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.screen.query_one("#accept", Button).disabled
        assert "nested objects" in text_of(pilot, "#top-error")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.sent == []
        await pilot.press("ctrl+d")
        await settle(pilot)
        assert app.sent == [Answer("decline")]


async def test_upstream_text_is_not_markup() -> None:
    params = {"message": "[bold]hi[/bold] [link=x]", "requestedSchema": {"type": "object", "properties": {}}}
    app = Host(question("elicitation", params))
    async with app.run_test(size=(120, 40)) as pilot:
        assert text_of(pilot, "#message") == "[bold]hi[/bold] [link=x]"


async def test_an_approval_is_mcpx_asking_and_shows_every_argument_whole() -> None:
    """#37 item 5, #39 item 6: the gate is mcpx's, and nothing of what is approved is hidden."""
    from mcpx.host.approvals import Requester, question_params

    args = {"a_padding": "x" * 5000, "command": "rm -rf / --no-preserve-root"}
    params = question_params(Requester("agent in ~/src", None), "fx__run", "fx", args)
    app = Host({**question("elicitation", params), "upstream": "fx"})
    async with app.run_test(size=(120, 40)) as pilot:
        assert text_of(pilot, "#title") == "mcpx asks: may agent in ~/src run fx__run?"
        assert text_of(pilot, "#warning") == (
            "mcpx's own approval gate: fx is not asking, and the host cannot answer for itself"
        )
        whole = json.dumps(args, ensure_ascii=False, sort_keys=True, indent=2)
        box = app.screen.query_one("#arguments", TextArea)
        assert box.text == whole and box.read_only and "rm -rf / --no-preserve-root" in box.text
        note = str(app.screen.query_one("#arguments-note", Static).content)
        assert note == f"Arguments: all {len(whole):,} characters, 4 lines (the box scrolls)"
        # Allow once or deny: this caller (no binding) is offered no allowance.
        radios = app.screen.query_one("#field-decision", RadioSet)
        assert [str(b.label) for b in radios.query(RadioButton)] == ["Allow once", "Deny"]
        assert not app.screen.query("#field-minutes")

"""mcpx.api.answer_links and answer_html: one-time links (only their hash kept; used once; expire
with their question) and the page's HTML (every value escaped; an approval's own buttons)."""

from __future__ import annotations

from mcpx.api import answer_links
from mcpx.api.answer_html import question_page
from mcpx.api.answer_links import AnswerLinks
from mcpx.questions.elicitation import parse_form


def test_a_link_opens_its_question_once_until_it_expires_and_only_its_hash_is_kept() -> None:
    now = [1000.0]
    links = AnswerLinks(clock=lambda: now[0])
    token = links.mint("q1", expires_ms=1_000_500)
    assert len(token) >= 43  # 256 bits, base64url
    assert token not in repr(links._links) and all(token not in k for k in links._links)
    assert links.question_of(token) == ("q1", "")
    assert links.question_of(token + "x")[0] is None
    assert links.csrf_ok(token, links.csrf(token)) and not links.csrf_ok(token, "0" * 64)
    links.use(token)
    qid, why = links.question_of(token)
    assert qid is None and "used already" in why
    other = links.mint("q2", expires_ms=1_000_500)
    now[0] = 1000.6
    qid, why = links.question_of(other)
    assert qid is None and "expired" in why
    links.mint("q3", expires_ms=2_000_000)  # minting sweeps the expired ones
    assert len(links._links) == 1
    assert answer_links.TOKEN_BYTES * 8 >= 128


def test_the_page_escapes_what_the_server_sent_and_shows_errors_inline() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "<b>Name</b>"},
            "color": {
                "type": "string",
                "oneOf": [{"const": "r", "title": "Red & co"}, {"const": "g", "title": "Green"}],
            },
        },
        "required": ["name"],
    }
    question = {
        "id": "q<1>",
        "upstream": "up",
        "params": {"message": "<script>alert(1)</script>", "requestedSchema": schema},
    }
    html = question_page(
        question,
        parse_form(schema),
        action_url="/answer/t",
        csrf="c",
        values={"name": '"><x'},
        errors={"name": "bad <i>"},
    )
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;Name&lt;/b&gt;" in html and "Red &amp; co" in html and 'value="&quot;&gt;&lt;x"' in html
    assert 'id="err-name"' in html and "bad &lt;i&gt;" in html
    assert 'value="accept"' in html and 'value="decline"' in html and 'name="csrf" value="c"' in html


def test_an_approval_gets_allow_and_deny_buttons_not_its_decision_field() -> None:
    from mcpx.host.approvals import Requester, question_params

    params = question_params(Requester("claude in ~/src", "this 2025 session"), "fx__deploy", "fx", {"env": "prod"})
    question = {"id": "q", "upstream": "fx", "params": params}
    html = question_page(question, parse_form(params["requestedSchema"]), action_url="/a", csrf="c")
    assert 'name="decision" value="allow"' in html and 'name="decision" value="deny"' in html
    assert 'id="f-reason"' in html and 'id="f-decision"' not in html
    assert "<h1>mcpx asks: may claude in ~/src run fx__deploy?</h1>" in html  # mcpx's gate, not fx asking


def test_a_fresh_page_shows_the_forms_defaults_and_a_page_sent_back_what_was_typed() -> None:
    """SEP-1034: a fresh form is filled in with the schema's defaults (server-everything's
    "String with default" was empty); a form sent back with errors keeps what the person typed."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "String with default", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "inactive"},
            "verified": {"type": "boolean", "default": True},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "default": ["b"]},
            "note": {"type": "string"},
        },
    }
    question = {"id": "q1", "upstream": "up", "params": {"message": "m", "requestedSchema": schema}}
    fresh = question_page(question, parse_form(schema), action_url="/a", csrf="c")
    assert 'id="f-name" name="name" value="John Doe"' in fresh
    assert 'name="age" value="30"' in fresh and 'name="score" value="95.5"' in fresh
    assert '<option value="inactive" selected>' in fresh and '<option value="true" selected>' in fresh
    assert 'value="b" checked' in fresh and 'value="a" checked' not in fresh
    assert 'name="note" value=""' in fresh
    typed = question_page(question, parse_form(schema), action_url="/a", csrf="c", values={"name": "Ada"})
    assert 'name="name" value="Ada"' in typed and 'name="age" value=""' in typed

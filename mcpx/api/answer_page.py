"""`/answer/{token}`: the page an answer link opens (docs/answer-links.md). GET shows the question
as a form, POST answers it, once, as `operator:<name>@link`. The link itself is the credential
(no operator token): it names one question, is good once, and expires with the question."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..host.approvals import denied_text
from ..protocol.errors import LimitReached
from ..questions import elicitation
from ..questions.answers import AnswerError
from ..records.question import Question
from .answer_html import APPROVAL_META, approval_of, message_page, question_page
from .answer_links import AnswerLinks
from .operations import Conflict, NotFound, Operations, Unavailable

MAX_FORM_BYTES = 64 * 1024
# The token is in the path: never sent on as a Referer, never cached, never framed.
HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
}


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def answered_by(q: Question) -> str:
    """'bob via link', 'olga', 'the host' — who took a question, for people."""
    by = q.answered_by or "someone"
    if by.startswith("operator:"):
        name = by.removeprefix("operator:")
        return name.replace("@link", " via link") if name.endswith("@link") else name
    return "the host" if by.startswith("host:") else by


class AnswerPage:
    def __init__(self, links: AnswerLinks, ops: Operations) -> None:
        self.links = links
        self.ops = ops

    async def __call__(self, request: Request) -> HTMLResponse:
        token = str(request.path_params["token"])
        qid, why = self.links.question_of(token)
        if qid is None:
            return _html(message_page("This link cannot be used", why), 410)
        try:
            q = await self.ops.question(qid)
        except NotFound:
            return _html(message_page("This link cannot be used", "Its question is gone."), 410)
        if q.status != "open":
            return _html(self._closed(q), 410)
        if q.kind != "elicitation":
            text = f"This {q.kind} question can be answered in the console (mcpx console), not here."
            return _html(message_page("Not answerable here", text), 422)
        try:
            form = elicitation.parse_form(q.params.get("requestedSchema"))
        except elicitation.FormError as exc:
            return _html(message_page("Not answerable here", f"The server's form cannot be shown: {exc}"), 422)
        if request.method == "GET":
            return _html(self._form(q, form, token))
        return await self._post(request, q, form, token)

    def _form(
        self, q: Question, form: elicitation.Form, token: str, values: dict[str, str] | None = None,
        errors: dict[str, str] | None = None,
    ) -> str:  # fmt: skip
        return question_page(
            q.wire(), form, action_url=f"/answer/{token}", csrf=self.links.csrf(token), values=values, errors=errors
        )

    @staticmethod
    def _closed(q: Question) -> str:
        if q.status == "answered":
            return message_page("Already answered", f"This question was already answered by {answered_by(q)}.")
        return message_page("No longer open", f"This question is closed: {q.reason or 'it expired'}.")

    async def _post(self, request: Request, q: Question, form: elicitation.Form, token: str) -> HTMLResponse:
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
            return _html(message_page("Refused", "This form may only be sent from its own page."), 403)
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return _html(message_page("Refused", "The answer is too large."), 413)
        sent = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
        one = {k: v[-1] for k, v in sent.items()}
        if not self.links.csrf_ok(token, one.get("csrf", "")):
            return _html(
                message_page("Refused", "This form is stale or was not sent from its page: open the link again."), 403
            )
        by = one.get("by", "").strip()
        values = {f.name: "\x1f".join(sent[f.name]) for f in form.fields if f.name in sent} | {"by": by}
        errors: dict[str, str] = {} if 0 < len(by) <= 64 else {"by": "your name is required (64 characters at most)"}
        action, content = self._answer(q, form, sent, one, errors)
        if errors:
            return _html(self._form(q, form, token, values, errors), 422)
        try:
            await self.ops.answer(q.id, action, content, None, f"operator:{by}@link")
        except AnswerError as exc:
            fields = {k.removeprefix("content.").removeprefix("content"): v for k, v in exc.fields.items()}
            return _html(self._form(q, form, token, values, fields), 422)
        except (Conflict, NotFound):
            return _html(self._closed(await self.ops.question(q.id)), 409)
        except (Unavailable, LimitReached) as exc:
            return _html(message_page("Not recorded", f"mcpx could not record the answer: {exc}. Try again."), 503)
        self.links.use(token)
        return _html(_done(q, action, content, f"operator:{by}@link"))

    @staticmethod
    def _answer(
        q: Question, form: elicitation.Form, sent: dict[str, list[str]], one: dict[str, str], errors: dict[str, str]
    ) -> tuple[Any, Any]:
        """(action, content) from the posted fields; problems go into `errors`."""
        if APPROVAL_META in (q.params.get("_meta") or {}):
            decision = one.get("decision")
            if decision not in ("allow", "deny"):
                errors[""] = "choose Allow once or Deny"
            content: dict[str, Any] = {"decision": decision}
            if one.get("reason", "").strip():
                content["reason"] = one["reason"].strip()
            return "accept", content
        action = one.get("action")
        if action not in ("accept", "decline"):
            errors[""] = "choose Accept or Decline"
            return action, None
        if action == "decline":
            return action, None
        raw: dict[str, str] = {}
        for f in form.fields:
            given = [v for v in sent.get(f.name, []) if v != ""]
            if not given:
                continue
            raw[f.name] = json.dumps(given) if f.kind == "multi_choice" else given[-1]
        coerced, problems = elicitation.coerce(form, raw)
        errors.update(problems)
        return action, coerced


def _done(q: Question, action: str, content: object, by: str) -> str:
    """What happened, in the operator's terms: for an approval, what the host was told."""
    approval = approval_of(q.params)
    if approval is None:
        return message_page("Thank you", f"Your answer ({action}) went to {q.upstream}.")
    answer = {"action": action, "content": content}
    told = denied_text(str(approval.get("tool")), answer, by, 0)
    if told is not None:
        return message_page("Denied", f"Denied. The host was told: “{told}”")
    return message_page(
        "Allowed", f"Allowed once. {approval.get('host') or 'The host'}'s call to {approval.get('tool')} runs now."
    )

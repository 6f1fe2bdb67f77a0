"""`mcpx questions ls|show|answer`: the questions upstreams asked, answered as an operator.

A form elicitation's `--accept name=value` strings are coerced by the requested schema and
checked before anything is sent (mcpx/elicitation.py, the same rules the daemon applies).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from ..client.daemon_client import EXIT_OK, EXIT_USAGE, Api, ApiError, CliError, resolve_id
from ..config.model import state_dir
from ..events.kinds import EVENT_KINDS
from ..questions import elicitation
from . import text_format as fmt
from .operator_commands import Subcommands, base_options, default_by, epilog


def _api(args: argparse.Namespace) -> Api:
    return Api.open(state_dir(args.state_dir))


def cmd_questions_ls(args: argparse.Namespace) -> int:
    statuses = ["open", "answered", "expired", "abandoned"] if args.all else ["open"]
    with _api(args) as api:
        questions = api.get("/v1/questions", {"status": statuses, "limit": args.limit})["questions"]
    if args.json:
        print(json.dumps({"questions": questions}, indent=2, ensure_ascii=False))
    elif questions:
        print(fmt.question_table(questions, int(time.time() * 1000)))
    else:
        print("no questions" if args.all else "no open questions")
    return EXIT_OK


def cmd_questions_show(args: argparse.Namespace) -> int:
    with _api(args) as api:
        question = _question(api, args.id)
    if args.json:
        print(json.dumps(question, indent=2, ensure_ascii=False))
    else:
        print(fmt.question_detail(question))
    return EXIT_OK


def _question(api: Api, given: str) -> dict[str, Any]:
    """The question `given` names (a whole id or a unique prefix of one)."""
    try:
        question: dict[str, Any] = api.get(f"/v1/questions/{resolve_id(api, 'question', given)}")
    except ApiError as exc:
        raise CliError(f"no such question: {exc.error}" if exc.status == 404 else str(exc)) from None
    return question


def _pairs(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise CliError(f"--accept takes name=value pairs, not {item!r}", EXIT_USAGE)
        out[name] = value
    return out


def _refused(message: str, fields: dict[str, str]) -> CliError:
    return CliError("\n".join([message, *fmt.field_errors(fields)]))


def form_content(schema: object, pairs: dict[str, str], check: bool) -> dict[str, Any]:
    """A form answer's content from `name=value` strings: coerced by the schema, defaults filled in,
    then validated; a problem raises CliError listing every field (unless `check` is off)."""
    try:
        form = elicitation.parse_form(schema)
    except elicitation.FormError as exc:
        if check:
            raise CliError(f"the upstream's form cannot be checked here: {exc} (--no-check sends it anyway)") from None
        return dict(pairs)
    content, errors = elicitation.coerce(form, pairs)
    if not check:
        return {**elicitation.with_defaults(form), **pairs, **content}
    content = {**elicitation.with_defaults(form), **content}
    errors = {**elicitation.validate(form, content), **errors}
    if errors:
        raise _refused("the answer does not fit the form (nothing was sent):", errors)
    return content


def answer_body(question: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The POST body for `questions answer`, by the question's kind."""
    kind = question["kind"]
    action = "decline" if args.decline else "cancel" if args.cancel else "accept"
    body: dict[str, Any] = {"action": action, "by": args.by}
    if action != "accept":
        if args.accept or args.result_json:
            raise CliError(f"--{action} takes no values", EXIT_USAGE)
        return body
    if kind in ("elicitation", "url-elicitation"):
        if args.result_json is not None:
            raise CliError("an elicitation is answered with --accept name=value ..., not --result-json", EXIT_USAGE)
        pairs = _pairs(args.accept)
        if kind == "url-elicitation":
            if pairs:
                raise CliError("a URL elicitation is accepted with a bare --accept (no values)", EXIT_USAGE)
            return body
        body["content"] = form_content((question.get("params") or {}).get("requestedSchema"), pairs, args.check)
        return body
    if args.accept:
        raise CliError(f"a {kind} question is accepted with --accept --result-json '{{...}}'", EXIT_USAGE)
    if args.result_json is None:
        raise CliError(f"accepting a {kind} question needs --result-json '{{...}}' (the result object)", EXIT_USAGE)
    try:
        result = json.loads(args.result_json)
    except ValueError as exc:
        raise CliError(f"--result-json is not JSON: {exc}", EXIT_USAGE) from None
    if not isinstance(result, dict):
        raise CliError("--result-json must be a JSON object", EXIT_USAGE)
    body["result"] = result
    return body


def cmd_questions_answer(args: argparse.Namespace) -> int:
    with _api(args) as api:
        question = _question(api, args.id)
        body = answer_body(question, args)
        try:
            answered = api.post(f"/v1/questions/{question['id']}/answer", body)
        except ApiError as exc:
            if exc.status == 422:
                why = "" if exc.fields else f": {exc.error}"
                raise _refused(f"the daemon refused the answer (HTTP 422){why}", exc.fields) from None
            if exc.status == 409:
                raise CliError(f"too late: {exc.error}{_closed_how(api, question['id'])}") from None
            raise
    if args.json:
        print(json.dumps(answered, indent=2, ensure_ascii=False))
    else:
        print(f"question {answered['id']} answered {body['action']} by {answered.get('answeredBy')}")
    return EXIT_OK


def _closed_how(api: Api, qid: str) -> str:
    try:
        q = api.get(f"/v1/questions/{qid}")
    except CliError:
        return ""
    if q.get("answeredBy"):
        return f" (answered by {q['answeredBy']})"
    return f" ({q['status']}: {q['reason']})" if q.get("reason") else ""


def cmd_questions_watch(args: argparse.Namespace) -> int:
    """One line per question as it opens, and as it closes, until interrupted. Attached as an
    operator (unless --no-operator), so questions nobody else can answer wait for you."""
    subscribe: dict[str, Any] = {"kinds": [k for k in EVENT_KINDS if k.startswith("question.")]}
    if args.operator:
        subscribe["operator"] = args.by or "cli"
    with _api(args) as api:
        try:
            for message in api.feed(subscribe):
                if message.get("type") == "snapshot":
                    for q in message.get("questions") or []:
                        print(fmt.watched_question(q), flush=True)
                elif message.get("type") == "event":
                    print(json.dumps(message) if args.json else fmt.watched_event(message), flush=True)
        except KeyboardInterrupt:
            return EXIT_OK
    raise CliError("the event feed ended (the daemon stopped?)")


def add_questions_parser(sub: Subcommands) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    q = sub.add_parser(
        "questions", help="questions upstreams ask (elicitation, sampling, roots)", epilog=EPILOG, formatter_class=raw
    )
    qsub = q.add_subparsers(dest="questions_command", required=True, metavar="{ls,show,answer,watch}")

    ls = qsub.add_parser("ls", help="open questions (--all: answered and expired too)", **epilog(LS_EPILOG))
    ls.add_argument("--all", action="store_true", help="include answered and expired questions")
    ls.add_argument("--limit", type=int, default=200, metavar="N", help="at most N (default 200)")
    base_options(ls)
    ls.set_defaults(func=cmd_questions_ls)

    show = qsub.add_parser("show", help="one question, with its form's fields", **epilog(SHOW_EPILOG))
    show.add_argument("id", metavar="ID")
    base_options(show)
    show.set_defaults(func=cmd_questions_show)

    a = qsub.add_parser(
        "answer", help="answer a question (first answer wins)", epilog=ANSWER_EPILOG, formatter_class=raw
    )
    a.add_argument("id", metavar="ID")
    how = a.add_mutually_exclusive_group(required=True)
    how.add_argument("--accept", nargs="*", metavar="NAME=VALUE", help="accept; a form's values as name=value")
    how.add_argument("--decline", action="store_true", help="decline")
    how.add_argument("--cancel", action="store_true", help="cancel (dismiss without choosing)")
    a.add_argument("--result-json", metavar="JSON", help="with --accept: a sampling or roots result object")
    a.add_argument("--no-check", dest="check", action="store_false", help="send the values without checking them here")
    a.add_argument("--by", metavar="NAME", default=default_by(), help="your name in the audit log (default: $USER)")
    base_options(a)
    a.set_defaults(func=cmd_questions_answer)

    w = qsub.add_parser("watch", help="print questions as they open and close, until interrupted")
    w.add_argument("--by", metavar="NAME", default=default_by(), help="your operator name (default: $USER)")
    w.add_argument(
        "--no-operator", dest="operator", action="store_false", help="only watch: do not count as an attached operator"
    )
    base_options(w)
    w.set_defaults(func=cmd_questions_watch)


LS_EPILOG = """\
HOST says whether the host itself can be asked; BY is who answered it (or why it closed).
exit codes: 0 listed, 1 error (daemon not running, API error)
"""
SHOW_EPILOG = """\
What it asks; for a form elicitation, its fields as --accept expects them (name=type, required,
choices, default).
exit codes: 0 shown, 1 error (no such question, daemon not running)
"""
EPILOG = """\
exit codes: 0 ok, 1 error (refused answers included), 2 usage
examples:
  mcpx questions ls
  mcpx questions show QID
  mcpx questions answer QID --accept username=ada email=ada@example.com
  mcpx questions answer QID --accept --result-json '{"roots": [{"uri": "file:///work"}]}'
"""
ANSWER_EPILOG = """\
A form's values are strings coerced by its schema: numbers, booleans (true/false, yes/no, on/off,
1/0), a choice by value or title, a multi-select as a,b or a JSON array. Fields left out take the
schema's default. The answer is checked before it is sent; every field that does not fit is listed.
A URL elicitation is accepted with a bare --accept; sampling and roots with --accept --result-json.
Put the question ID before --accept's values.
exit codes: 0 answered, 1 refused (a field error, HTTP 422; already answered or closed, HTTP 409;
no such question; daemon not running), 2 usage
"""

"""Readable text for the CLI: plain column tables, event lines, task and question details.

Pure: every function takes the API's JSON (and `now` where an age is shown) and returns text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..events import kinds

Json = Mapping[str, Any]

# The CLI offers these as choices. The statuses are /v1's TaskStatus, spelt out so that the CLI does
# not load the API's models (tests/unit/test_shapes.py holds them equal); the event kinds are the bus's.
TASK_STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
EVENT_KINDS = kinds.EVENT_KINDS


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def clip(text: str | None, width: int = 60) -> str:
    one = " ".join((text or "").split())
    return one if len(one) <= width else one[: width - 1] + "…"


def short(ident: str | None, n: int = 8) -> str:
    return ident[:n] if ident else "-"


def clock(ms: int) -> str:
    """Local time of day with milliseconds, as event lines show it."""
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def stamp(ms: int | None) -> str:
    """Local date and time, for details."""
    return "-" if ms is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def age(ms: int, now_ms: int) -> str:
    s = max(0, now_ms - ms) // 1000
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    return f"{s // 3600}h" if s < 172_800 else f"{s // 86400}d"


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ---- tasks -------------------------------------------------------------------------------------
def task_status(task: Json) -> str:
    status = str(task["status"])
    return status + " (needs input)" if task.get("needsInput") and status != "input_required" else status


def task_table(tasks: Sequence[Json], now_ms: int) -> str:
    rows = [
        [
            t["id"],
            t.get("kind", "task"),
            task_status(t),
            f"{t['upstream']}/{t['tool']}",
            t.get("connectionId") or "-",
            age(t["createdMs"], now_ms),
            clip(t.get("statusMessage"), 50),
        ]
        for t in tasks
    ]
    return table(["ID", "KIND", "STATUS", "TOOL", "CONNECTION", "AGE", "MESSAGE"], rows)


def _result_text(result: Json) -> str:
    texts = [b.get("text", "") for b in result.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"]
    flag = " (the tool reported an error)" if result.get("isError") else ""
    return (clip(" ".join(texts), 200) if texts else clip(compact(result), 200)) + flag


def task_detail(task: Json) -> str:
    ttl = task.get("ttlMs")
    lines = [
        f"{'call' if task.get('kind') == 'call' else 'task'}       {task['id']}"
        + ("  (a host's plain call: it holds no task)" if task.get("kind") == "call" else ""),
        f"status     {task_status(task)}" + (f": {task['statusMessage']}" if task.get("statusMessage") else ""),
        f"tool       {task['upstream']}/{task['tool']} ({task['era']})",
        f"arguments  {clip(compact(task.get('arguments') or {}), 200)}",
        f"owner      {task['owner']}, connection {task.get('connectionId') or '-'}",
        f"created    {stamp(task['createdMs'])}, updated {stamp(task['updatedMs'])}",
        f"expires    {stamp(task.get('expiresMs'))}" + (f" (ttl {ttl // 1000} s)" if ttl else ""),
        f"poll       every {task['pollIntervalMs']} ms",
    ]
    if task.get("why"):
        lines.append(f"why        {task['why']}")
    if task.get("upstreamTaskId"):
        lines.append(f"upstream task  {task['upstreamTaskId']}")
    if task.get("result") is not None:
        lines.append(f"result     {_result_text(task['result'])}")
    if task.get("error") is not None:
        err = task["error"]
        lines.append(f"error      {err.get('code', '')} {err.get('message', compact(err))}".rstrip())
    requests = task.get("inputRequests") or []
    if requests:
        lines.append(f"waiting for {len(requests)} answer(s) (`mcpx questions answer ID ...`):")
        for r in requests:
            lines.append(f"  {r['questionId']}  {r['kind']} from {r['upstream']}: {question_asks(r)}")
    events = task.get("events") or []
    if events:
        lines.append("timeline:")
        lines.extend("  " + event_line(e) for e in events)
    return "\n".join(lines)


# ---- events ------------------------------------------------------------------------------------
def _essentials(event: Json) -> str:
    kind, d = event["kind"], event.get("data") or {}
    if kind in ("connection.opened", "connection.updated"):
        info = d.get("clientInfo") or {}
        who = d.get("label") or " ".join(str(info[k]) for k in ("name", "version") if info.get(k)) or "?"
        return f"{d.get('kind')} {d.get('transport')} {d.get('revision') or '-'} {who} from {d.get('peer') or '-'}"
    if kind == "connection.closed":
        return f"closed: {d.get('reason')}"
    if kind == "task.created":
        what = f"{d.get('era')}, plain call" if d.get("kind") == "call" else d.get("era")
        return f"{d.get('upstream')}/{d.get('tool')} {clip(compact(d.get('arguments') or {}), 60)} ({what})"
    if kind == "task.status":
        text = f"{d.get('previous')} → {d.get('status')}"
        if d.get("statusMessage"):
            text += f": {clip(d['statusMessage'], 80)}"
        if d.get("error"):
            text += f" [error {d['error'].get('code')}: {clip(d['error'].get('message'), 60)}]"
        return text + (" [tool error]" if d.get("isError") else "")
    if kind == "task.input_required":
        requests = d.get("requests") or {}
        return f"waits for {len(requests)} answer(s)" + (f", new: {', '.join(d['added'])}" if d.get("added") else "")
    if kind == "task.cancel_requested":
        return f"cancel asked (was {d.get('status')})"
    if kind == "task.expired":
        return "expired (its TTL passed)"
    if kind == "question.opened":
        return f"{d.get('kind')} from {d.get('upstream')}: {question_asks(d)}"
    if kind == "question.answered":
        return f"answered {d.get('action')}"
    if kind == "question.expired":
        return f"closed unanswered: {d.get('reason')}"
    if kind == "question.abandoned":
        return f"abandoned, never answered: {d.get('reason')}"
    return clip(compact(d), 100)


def event_line(event: Json) -> str:
    """`time  #seq  kind  task  essentials [by ...]`: one line per event."""
    text = _essentials(event)
    if event.get("questionId"):
        text = f"question {event['questionId']} {text}"
    elif event.get("connectionId") and str(event["kind"]).startswith("connection."):
        text = f"{event['connectionId']} {text}"
    if event.get("by"):
        text += f" by {event['by']}"
    return f"{clock(event['ts'])}  #{event['seq']:<5} {event['kind']:<21} {short(event.get('taskId')):<8}  {text}"


def snapshot_line(snap: Json) -> str:
    tasks = snap.get("tasks") or []
    unfinished = sum(1 for t in tasks if t.get("status") in ("working", "input_required"))
    operators = ", ".join(snap.get("operators") or []) or "none"
    return (
        f"-- snapshot at #{snap.get('seq')}: {len(snap.get('connections') or [])} connection(s), "
        f"{len(tasks)} task(s) ({unfinished} unfinished), {len(snap.get('questions') or [])} open question(s), "
        f"operators: {operators}"
    )


# ---- questions ---------------------------------------------------------------------------------
def watched_question(q: Json) -> str:
    """`mcpx questions watch`: an open question and how to answer it, on one line."""
    return (
        f"{stamp(q.get('createdMs'))}  open      {q['id']}  {q.get('kind')} from {q.get('upstream')}: "
        f"{question_asks(q)}  (mcpx questions answer {str(q['id'])[:8]} ...)"
    )


def watched_event(event: Json) -> str:
    """`mcpx questions watch`: a question opened, answered (by whom) or closed."""
    data = event.get("data") or {}
    if event.get("kind") == "question.opened":
        return watched_question(data)
    when, qid = stamp(event.get("ts")), event.get("questionId")
    if event.get("kind") == "question.answered":
        return f"{when}  answered  {qid}  by {event.get('by') or data.get('by')}: {data.get('action')}"
    return f"{when}  closed    {qid}  {data.get('reason') or 'expired'}"


def question_asks(q: Json) -> str:
    """What a question (or input request) asks, in a few words."""
    params = q.get("params") or {}
    if params.get("mode") == "url":
        return clip(f"{params.get('message') or ''} open {params.get('url')}", 80)
    if isinstance(params.get("message"), str):
        return clip(params["message"], 80)
    if q.get("method") == "sampling/createMessage":
        msgs = params.get("messages") or []
        last = msgs[-1].get("content") if msgs and isinstance(msgs[-1], dict) else None
        text = last.get("text") if isinstance(last, dict) else None
        return clip(f"a model reply to: {text}" if text else "a model reply", 80)
    if q.get("method") == "roots/list":
        return "the client's roots"
    return clip(compact(params), 80)


def question_table(questions: Sequence[Json], now_ms: int) -> str:
    rows = [
        [
            q["id"],
            q["status"],
            q["kind"],
            q["upstream"],
            short(q.get("taskId")),
            "yes" if q.get("hostCanAnswer") else "no",
            age(q["createdMs"], now_ms),
            q.get("answeredBy") or q.get("reason") or "",
            question_asks(q),
        ]
        for q in questions
    ]
    return table(["ID", "STATUS", "KIND", "UPSTREAM", "TASK", "HOST", "AGE", "BY", "ASKS"], rows)


def form_lines(schema: object) -> list[str]:
    """The fields of a form elicitation's requestedSchema: name, type, required, choices, default."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return []
    required = set(schema.get("required") or []) if isinstance(schema, dict) else set()
    out = []
    for name, p in props.items():
        p = p if isinstance(p, dict) else {}
        kind = str(p.get("type", "string"))
        choices = p.get("enum") or [o.get("const") for o in p.get("oneOf") or [] if isinstance(o, dict)]
        items: dict[str, Any] = p["items"] if isinstance(p.get("items"), dict) else {}
        choices = choices or items.get("enum") or [o.get("const") for o in items.get("anyOf") or []]
        text = f"  {name}={kind}" + (" (required)" if name in required else "")
        if choices:
            text += f" one of: {', '.join(map(str, choices))}"
        if "default" in p:
            text += f" [default {compact(p['default'])}]"
        if p.get("description") or p.get("title"):
            text += f" — {p.get('description') or p.get('title')}"
        out.append(text)
    return out


def question_detail(q: Json) -> str:
    lines = [
        f"question   {q['id']}",
        f"status     {q['status']}" + (f" ({q['reason']})" if q.get("reason") else ""),
        f"kind       {q['kind']} ({q['method']}) from {q['upstream']}",
        f"task       {q.get('taskId') or '-'}, connection {q.get('connectionId') or '-'}",
        f"asked      {stamp(q['createdMs'])}, expires {stamp(q['expiresMs'])}",
        f"host       {'can' if q.get('hostCanAnswer') else 'cannot'} answer it",
        f"asks       {question_asks(q)}",
    ]
    if q.get("why"):
        lines.insert(6, f"why        {q['why']}")
    candidates = q.get("candidates") or []
    if candidates:  # no one call could be tied to it: an operator's alone
        lines.append(f"asked by   one of {len(candidates)} calls in flight (mcpx cannot tell which):")
        lines.extend(
            f"  {c.get('name') or c.get('method')} of connection {c.get('connectionId') or '-'}"
            + (f", task {c['taskId']}" if c.get("taskId") else "")
            for c in candidates
        )
    fields = form_lines((q.get("params") or {}).get("requestedSchema"))
    if fields:
        lines.append("fields (answer with --accept name=value ...):")
        lines.extend(fields)
    if q.get("answeredBy"):
        lines.append(f"answered   by {q['answeredBy']}: {compact(q.get('answer') or q.get('error'))}")
    return "\n".join(lines)


def field_errors(fields: Mapping[str, str]) -> list[str]:
    return [f"  {name or 'answer'}: {problem}" for name, problem in fields.items()]


# ---- status ------------------------------------------------------------------------------------
def upstream_lines(u: Json) -> list[str]:
    err = f" — {u['lastError']}" if u.get("lastError") else ""
    head = (
        f"  {u['name']:<20} {u['transport']:<5} {u['state']:<10} {u.get('revision') or '-':<11} "
        f"{u['tools']} tools, {u['restarts']} restarts{err}"
    )
    lines = [head]
    auth = u.get("auth") or {}
    if auth.get("needsLogin"):
        lines.append(f"      needs a sign-in ({auth['needsLogin']}): run `mcpx login {u['name']}`")
    elif auth.get("signedIn"):
        scopes = " ".join(auth.get("scopes") or []) or "no scope named"
        lines.append(
            f"      signed in at {auth.get('issuer')} by {auth.get('by')} ({scopes}; expires {stamp(auth.get('expiresMs'))})"
        )
    for tool in u.get("leftOutTools") or []:  # not offered to hosts (SEP-2243)
        lines.append(f"      left out {tool['name']}: {tool['reason']}")
    if u.get("state") != "ready":
        if u.get("exitCode") is not None:
            lines.append(f"      exit code {u['exitCode']}")
        tail = u.get("stderrTail") or []
        if tail:
            lines.append("      last stderr lines:")
            lines.extend(f"        | {line}" for line in tail)
        if u.get("logPath"):
            lines.append(f"      log: {u['logPath']}")
    return lines


def reload_text(reload: Json) -> str:
    """A config reload (/v1's ConfigReload) in one or two lines: `mcpx reload`, `mcpx status`."""
    if reload["result"] == "refused":
        return f"refused, still serving the config it had: {reload['error']}"
    done = [f"{what} {', '.join(reload[what])}" for what in ("added", "removed", "changed") if reload.get(what)]
    text = "applied: " + ("; ".join(done) if done else "no server changed")
    if reload.get("needsRestart"):
        text += f"\nneeds a restart (ignored until then): {', '.join(reload['needsRestart'])}"
    return text


def status_text(status: Json, folder: str) -> str:
    lines = [
        f"mcpx {status['version']} running: pid {status['pid']}, {status.get('url')}, up {status['uptimeS']:.0f} s"
        + (f" ({status['phase']})" if status.get("phase") not in (None, "serving") else ""),
        f"config: {status.get('config') or '(none)'}; state: {folder}",
        f"upstreams: {len(status['upstreams'])}",
    ]
    for u in status["upstreams"]:
        lines.extend(upstream_lines(u))
    connections = status["connections"]
    count = connections if isinstance(connections, int) else len(connections)
    lines.append(f"host connections: {count}")
    lines.append(f"operators attached: {', '.join(status.get('operators') or []) or 'none'}")
    lines.append(f"last event: #{status.get('lastSeq', 0)}")
    frames = status.get("frames")
    if isinstance(frames, dict):
        kept, budget = frames["bytes"] / 2**20, frames["budgetBytes"] / 2**20
        lines.append(f"frames kept in memory: {frames['tasks']} tasks, {kept:.1f} of {budget:.0f} MB")
    reload = status.get("lastReload")
    if isinstance(reload, dict):
        said = reload_text(reload).replace("\n", "; ")
        lines.append(f"last config reload, {stamp(reload.get('atMs'))} ({reload['trigger']}): {said}")
    for sink in status.get("notify") or []:  # docs/notify.md: how each webhook and command hook does
        counts = f"{sink['delivered']} delivered, {sink['failed']} failed, {sink['dropped']} dropped, {sink['queued']} queued"
        lines.append(f"notify {sink['sink']} ({sink['kind']} {sink['target']}): {counts}")
        if sink.get("lastError"):
            lines.append(f"  last error, {stamp(sink.get('lastErrorMs'))}: {clip(sink['lastError'], 100)}")
    for work in status.get("background") or []:  # docs/daemon-behavior.md, "Background work"
        lines.append(
            f"background {work['task']} failed {work['failures']} time(s), last {stamp(work.get('lastFailedMs'))}"
            f" ({work['state']}): {clip(work['lastError'], 100)}"
        )
    return "\n".join(lines)

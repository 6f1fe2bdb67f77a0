"""The console views' pure parts: completing `:` commands, and the event log the events view shows."""

from __future__ import annotations

from console.event_log import EventLog, subject_of
from console.views import names


def _ev(seq: int, kind: str = "task.created", **extra: object) -> dict[str, object]:
    return {"type": "event", "seq": seq, "ts": 1_000 * seq, "kind": kind, "data": {}, **extra}


def test_a_prefix_completes_to_the_first_view_and_resolves_only_when_unique() -> None:
    assert names.complete(":up") == "upstreams" and names.complete("h") == "hosts"
    assert names.complete("") is None and names.complete("zz") is None
    assert names.completions("") == list(names.VIEWS)
    assert names.resolve(":events") == "events" and names.resolve(" ups ") == "upstreams"
    assert names.resolve("up") == "upstreams" and names.resolve("q") == "questions"  # aliases
    assert names.resolve("t") == "tasks" and names.resolve("x") is None


def test_the_event_log_keeps_each_event_once_newest_first_and_filters_by_text() -> None:
    log = EventLog(kept=3)
    for message in (_ev(1), _ev(2, "question.opened", questionId="q-abcdefghij"), _ev(2), {"type": "snapshot"}):
        log.apply(message)
    assert [r.seq for r in log.shown("")] == [2, 1]  # the resumed duplicate and the snapshot change nothing
    log.add([_ev(3), _ev(4, "task.status", by="operator:olga")])
    assert [r.seq for r in log.shown("")] == [4, 3, 2]  # only the newest `kept`
    assert [r.seq for r in log.shown("OLGA")] == [4] and [r.seq for r in log.shown("q-abcdef")] == [2]


def test_older_events_backfill_before_the_kept_ones_without_doubles() -> None:
    log = EventLog()
    log.add([_ev(10), _ev(11)])
    log.backfill([_ev(8), _ev(9), _ev(10)])
    assert [r.seq for r in log.rows] == [8, 9, 10, 11]


def test_an_events_subject_names_what_it_is_about_and_who() -> None:
    ev = {"taskId": "Tk1buildAAAA", "connectionId": "c-ide-123456", "by": "host:c-ide", "data": {"tool": "build"}}
    assert subject_of(ev) == "task Tk1build · host c-ide-12 · build · by host:c-ide"


def test_an_events_host_is_named_as_the_hosts_pane_names_it_and_still_found_by_its_id() -> None:
    names = {"c-ide-123456": "research-agent · python in ~/src/api"}
    ev = {"seq": 7, "kind": "task.created", "taskId": "Tk1buildAAAA", "connectionId": "c-ide-123456"}
    done = {**ev, "seq": 8, "kind": "task.status", "by": "host:c-ide-123456", "data": {"status": "cancelled"}}
    assert subject_of(ev, names.get) == "task Tk1build · host research-agent · python in ~/src/api"
    assert subject_of(done, names.get).endswith("cancelled · by research-agent · python in ~/src/api")
    # A host the console does not know (yet) keeps its short id; an operator stays as they are.
    assert subject_of({**ev, "connectionId": "c-other-999"}, names.get) == "task Tk1build · host c-other-"
    assert subject_of({"by": "operator:olga"}, names.get) == "by operator:olga"
    log = EventLog()
    log.add([_ev(1, connectionId="c-ide-123456"), _ev(2, connectionId="c-other-999")])
    assert [r.seq for r in log.shown("research-agent", host_name=names.get)] == [1]
    assert [r.seq for r in log.shown("c-ide-1234", host_name=names.get)] == [1]  # the id behind the name


def test_an_upstreams_left_out_tools_show_with_why_in_its_row_and_in_mcpx_status() -> None:
    from console.views.upstreams import upstream_row
    from mcpx.cli.text_format import upstream_lines

    u = {
        "name": "remote",
        "transport": "http",
        "state": "ready",
        "era": "modern",
        "revision": "2026-07-28",
        "tools": 3,
        "restarts": 0,
        "lastError": None,
        "leftOutTools": [{"name": "bad", "reason": "x-mcp-header 'A' on a: only a string, integer or boolean ..."}],
    }
    key, cells = upstream_row(u)
    assert (
        key == "remote"
        and str(cells[-1]) == "left out bad: x-mcp-header 'A' on a: only a string, integer or boolean ..."
    )
    assert str(upstream_row({**u, "lastError": "boom"})[1][-1]) == "boom"  # an error comes first
    assert "      left out bad: x-mcp-header 'A' on a: only a string, integer or boolean ..." in upstream_lines(u)

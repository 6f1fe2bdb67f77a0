"""Operator commands over `/v1`: `mcpx tasks ls|show|cancel|watch`, `mcpx audit`, `mcpx stop`."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, TypeAlias

import anyio

from ..client.daemon_client import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_WAITING,
    Api,
    ApiError,
    CliError,
    resolve_id,
    running_daemon,
)
from ..config import state_files
from ..config.model import state_dir
from . import text_format as fmt


def _now_ms() -> int:
    return int(time.time() * 1000)


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def default_by() -> str | None:
    """The operator's name for the audit log when `--by` is not given: the login name."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None


def _api(args: argparse.Namespace) -> Api:
    return Api.open(state_dir(args.state_dir))


def _not_found(exc: ApiError, what: str) -> CliError:
    return CliError(f"no {what}: {exc.error}" if exc.status == 404 else str(exc))


# ---- tasks -------------------------------------------------------------------------------------
def cmd_tasks_ls(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {
        "connection": args.connection,
        "status": args.status or None,
        "tool": args.tool,
        "q": args.grep,
        "limit": args.limit,
    }
    tasks: list[dict[str, Any]] = []
    with _api(args) as api:
        while True:
            page = api.get("/v1/tasks", params)
            tasks.extend(page["tasks"])
            cursor = page.get("nextCursor")
            if not (args.all_pages and cursor):
                break
            params["cursor"] = cursor
    if args.json:
        _print_json({"tasks": tasks, "nextCursor": cursor})
        return EXIT_OK
    print(fmt.task_table(tasks, _now_ms()) if tasks else "no tasks")
    if cursor:
        print(f"(more tasks: --all-pages, or a larger --limit than {args.limit})", file=sys.stderr)
    return EXIT_OK


def cmd_tasks_show(args: argparse.Namespace) -> int:
    with _api(args) as api:
        try:
            task = api.get(f"/v1/tasks/{resolve_id(api, 'task', args.id)}")
        except ApiError as exc:
            raise _not_found(exc, "such task") from None
    if args.json:
        _print_json(task)
    else:
        print(fmt.task_detail(task))
    waiting = task.get("status") == "input_required" or task.get("needsInput")
    return EXIT_WAITING if waiting else EXIT_OK


def cmd_tasks_cancel(args: argparse.Namespace) -> int:
    with _api(args) as api:
        try:
            task = api.post(f"/v1/tasks/{resolve_id(api, 'task', args.id)}/cancel", {"by": args.by})
        except ApiError as exc:
            if exc.status == 409:
                raise CliError(f"too late to cancel: {exc.error}") from None
            raise _not_found(exc, "such task") from None
    if args.json:
        _print_json(task)
    else:
        message = f": {task['statusMessage']}" if task.get("statusMessage") else ""
        print(f"task {task['id']} {task['status']}{message}")
    return EXIT_OK


def cmd_tasks_watch(args: argparse.Namespace) -> int:
    subscribe: dict[str, Any] = {"kinds": args.kind or []}
    if args.since is not None:
        subscribe["since"] = args.since
    last = args.since or 0
    with _api(args) as api:
        subscribe["tasks"] = [resolve_id(api, "task", t, known=False) for t in args.task or []]
        try:
            for message in api.feed(subscribe):
                last = _show_feed_message(message, args.json, last)
        except KeyboardInterrupt:
            return EXIT_OK
        except CliError as exc:
            why = str(exc)
        else:
            why = "the event feed ended (the daemon stopped?)"
    raise CliError(f"{why}; resume with --since {last}")


def _show_feed_message(message: dict[str, Any], as_json: bool, last: int) -> int:
    kind = message.get("type")
    if kind == "heartbeat":
        return last
    if as_json:
        print(json.dumps(message, ensure_ascii=False), flush=True)
    elif kind == "event":
        print(fmt.event_line(message), flush=True)
    elif kind == "snapshot":
        print(fmt.snapshot_line(message), flush=True)
    elif kind == "gap":
        print(f"-- gap: this watcher fell behind after #{message.get('after')}; catching up from the log", flush=True)
    elif kind == "reset":
        print(f"-- reset: {message.get('reason')}; a fresh snapshot follows", flush=True)
    seq = message.get("seq")
    return seq if kind in ("event", "snapshot") and isinstance(seq, int) else last


# ---- audit -------------------------------------------------------------------------------------
def cmd_audit(args: argparse.Namespace) -> int:
    with _api(args) as api:
        task = resolve_id(api, "task", args.task, known=False) if args.task else None
        params = {"since": args.since, "limit": args.limit, "task": task, "kind": args.kind or None}
        page = api.get("/v1/events", params)
    events = page["events"]
    if args.json:
        _print_json(page)
        return EXIT_OK
    for e in events:
        print(fmt.event_line(e))
    if not events:
        print(f"no events after #{args.since} (the newest is #{page['lastSeq']})")
    elif len(events) == args.limit:
        print(f"(more events: --since {events[-1]['seq']})", file=sys.stderr)
    return EXIT_OK


# ---- stop --------------------------------------------------------------------------------------
def _gone(pid: int) -> bool:
    """The process ended (a zombie its parent has not reaped yet counts as ended)."""
    if not state_files.pid_alive(pid):
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def left_keepers(folder: Path) -> list[dict[str, Any]]:
    """Keepers (and their servers) that still run for `folder`: with no daemon running, a crashed
    daemon left them. Each as `{server, keeperPid, serverPid}`."""
    from ..upstream.stdio import keeper_wire

    return [
        {"server": r.server, "keeperPid": r.keeper_pid, "serverPid": r.server_pid}
        for r in keeper_wire.all_records(folder / keeper_wire.FOLDER)
        if keeper_wire.still_running(r)
    ]


def left_keepers_text(left: list[dict[str, Any]]) -> str:
    """What `mcpx status` says of them, and what can be done."""
    each = ", ".join(f"{k['server']} (keeper pid {k['keeperPid']}, server pid {k['serverPid']})" for k in left)
    return (
        f"mcpx: {len(left)} upstream keeper(s) left by a daemon that is gone still run: {each}. A daemon started"
        " within their grace period (keepers.graceS) takes them over; `mcpx stop` stops them now."
    )


def _stop_orphan_keepers(folder: Path) -> None:
    """Keepers a crashed daemon left (they would end after their grace period anyway)."""
    from ..upstream.stdio import keeper_transport, keeper_wire

    records = keeper_wire.all_records(folder / keeper_wire.FOLDER)
    for record in records:
        anyio.run(keeper_transport.retire, folder / keeper_wire.FOLDER, record)
    if records:
        print(f"mcpx: stopped {len(records)} upstream keeper(s) left by a daemon that is gone")


def cmd_stop(args: argparse.Namespace) -> int:
    folder = state_dir(args.state_dir)
    info = running_daemon(folder)
    if info is None or _gone(int(info["pid"])):
        print(f"mcpx: no daemon running for {folder}")
        if not args.keep_upstreams:
            _stop_orphan_keepers(folder)
        return EXIT_OK
    pid = int(info["pid"])
    try:
        os.kill(pid, signal.SIGUSR1 if args.keep_upstreams else signal.SIGTERM)
    except ProcessLookupError:
        print(f"mcpx: no daemon running for {folder}")
        return EXIT_OK
    except PermissionError:
        raise CliError(f"not allowed to signal the daemon (pid {pid})") from None
    started = time.monotonic()
    while time.monotonic() - started < args.timeout:
        if _gone(pid):
            print(f"mcpx: stopped the daemon (pid {pid}) in {time.monotonic() - started:.1f} s")
            return EXIT_OK
        time.sleep(0.05)
    print(
        f"mcpx: the daemon (pid {pid}) did not stop within {args.timeout:g} s of SIGTERM; `kill -KILL {pid}` forces it",
        file=sys.stderr,
    )
    return EXIT_ERROR


# ---- the parsers -------------------------------------------------------------------------------
# What `add_subparsers` returns; argparse names the class private, but typeshed types it so.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def epilog(text: str) -> dict[str, Any]:
    return {"epilog": text, "formatter_class": argparse.RawDescriptionHelpFormatter}


def base_options(sp: argparse.ArgumentParser, json_flag: bool = True) -> None:
    """--state-dir (and --json), which every operator command takes."""
    sp.add_argument(
        "--state-dir",
        metavar="DIR",
        help="state folder of the daemon (default: MCPX_STATE_DIR or $XDG_STATE_HOME/mcpx)",
    )
    if json_flag:
        sp.add_argument("--json", action="store_true", help="print the API's JSON instead of text")


def add_tasks_parser(sub: Subcommands) -> None:
    t = sub.add_parser("tasks", help="list, show, cancel and watch tasks", **epilog(TASKS_EPILOG))
    tsub = t.add_subparsers(dest="tasks_command", required=True, metavar="{ls,show,cancel,watch}")

    ls = tsub.add_parser("ls", help="tasks, newest first", **epilog(TASKS_LS_EPILOG))
    ls.add_argument("--connection", metavar="ID", help="only this host connection's tasks")
    ls.add_argument(
        "--status", nargs="+", action="extend", choices=fmt.TASK_STATUSES, metavar="S", help="only these statuses"
    )
    ls.add_argument("--tool", metavar="T", help="only this tool (the upstream's own name)")
    ls.add_argument("--grep", metavar="TEXT", help="text in the id, tool, upstream or status message")
    ls.add_argument("--limit", type=int, default=100, metavar="N", help="tasks per page (1-1000, default 100)")
    ls.add_argument("--all-pages", action="store_true", help="follow nextCursor to the oldest task")
    base_options(ls)
    ls.set_defaults(func=cmd_tasks_ls)

    show = tsub.add_parser(
        "show", help="one task: arguments, result, input requests, timeline", **epilog(TASKS_SHOW_EPILOG)
    )
    show.add_argument("id", metavar="ID")
    base_options(show)
    show.set_defaults(func=cmd_tasks_show)

    cancel = tsub.add_parser("cancel", help="cancel a task (its upstream work stops too)", **epilog(CANCEL_EPILOG))
    cancel.add_argument("id", metavar="ID")
    cancel.add_argument(
        "--by", metavar="NAME", default=default_by(), help="your name in the audit log (default: $USER)"
    )
    base_options(cancel)
    cancel.set_defaults(func=cmd_tasks_cancel)

    watch = tsub.add_parser("watch", help="stream the event feed as lines (Ctrl-C stops)", **epilog(WATCH_EPILOG))
    watch.add_argument("--task", nargs="+", action="extend", metavar="ID", help="only these tasks' events")
    watch.add_argument(
        "--kind", nargs="+", action="extend", choices=fmt.EVENT_KINDS, metavar="K", help="only these kinds"
    )
    watch.add_argument("--since", type=int, metavar="N", help="replay every event after #N first (no snapshot)")
    base_options(watch)
    watch.set_defaults(func=cmd_tasks_watch)


def add_audit_parser(sub: Subcommands) -> None:
    a = sub.add_parser("audit", help="the event log (who created, cancelled, answered what)", **epilog(AUDIT_EPILOG))
    a.add_argument("--since", type=int, default=0, metavar="N", help="events after #N (default 0: from the oldest)")
    a.add_argument("--limit", type=int, default=500, metavar="N", help="at most N events (1-5000, default 500)")
    a.add_argument("--task", metavar="ID", help="only this task's events")
    a.add_argument("--kind", nargs="+", action="extend", choices=fmt.EVENT_KINDS, metavar="K", help="only these kinds")
    base_options(a)
    a.set_defaults(func=cmd_audit)


def add_stop_parser(sub: Subcommands) -> None:
    s = sub.add_parser("stop", help="stop the running daemon (SIGTERM, then wait)", **epilog(STOP_EPILOG))
    s.add_argument("--timeout", type=float, default=15.0, metavar="S", help="seconds to wait (default 15)")
    s.add_argument(
        "--keep-upstreams",
        action="store_true",
        help="leave the stdio upstreams (and the calls they run) to the next daemon, as for an upgrade",
    )
    base_options(s, json_flag=False)
    s.set_defaults(func=cmd_stop)


TASKS_EPILOG = """\
exit codes: 0 ok, 1 error (daemon not running, API error), 2 usage, 75 `show` of a task that waits for input
examples:
  mcpx tasks ls --status working input_required
  mcpx tasks show TASK_ID                # exit code 75 when it waits for input
  mcpx tasks cancel TASK_ID --by alice
  mcpx tasks watch --kind task.status question.opened
"""
TASKS_SHOW_EPILOG = """\
The task's status and message, tool and arguments, owner connection, times, result or error, the
questions it waits for (answer them with `mcpx questions answer`), and its event timeline.
exit codes: 0 shown, 1 error (no such task, daemon not running), 75 the task waits for input
(status input_required, or one of its questions is open): scripts can poll on it
"""
CANCEL_EPILOG = """\
The cancel is written to the audit log as operator:NAME.
exit codes: 0 cancelled, 1 error (no such task; it already ended: HTTP 409; daemon not running)
"""
STOP_EPILOG = """\
Sends SIGTERM to the pid in <state>/daemon.json and waits until the process is gone; the daemon
stops its upstreams, keepers included. With --keep-upstreams it sends SIGUSR1 instead: the daemon
stops but its stdio upstreams' keepers stay (for the keepers' grace period, config keepers.graceS),
so a daemon started next carries on their sessions and collects the calls they were running.
With no daemon running, keepers a crashed daemon left are stopped (not with --keep-upstreams).
exit codes: 0 stopped, or no daemon was running (it says so); 1 it did not stop within --timeout
"""
TASKS_LS_EPILOG = """\
STATUS shows "(needs input)" when a question of the task is open.
exit codes: 0 listed, 1 error (daemon not running, API error), 2 usage
"""
WATCH_EPILOG = """\
Each line: time, #sequence number, kind, short task id, what happened (and by whom).
Without --since the feed starts with a snapshot summary line. Heartbeats are not shown;
"-- gap" and "-- reset" lines say the feed caught up or restarted.
exit codes: 0 after Ctrl-C, 1 the feed could not open or ended (it says which --since resumes)
"""
AUDIT_EPILOG = """\
examples:
  mcpx audit --kind task.cancel_requested question.answered
  mcpx audit --task TASK_ID --json
exit codes: 0 listed, 1 error (daemon not running, API error), 2 usage
"""

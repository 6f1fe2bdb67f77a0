"""`mcpx` command line: daemon, status, stop, serve, demo, config-reference, and the operator commands
(tasks, questions, audit: mcpx/cli_ops.py, mcpx/cli_questions.py) over `/v1`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import anyio

from .. import __version__
from ..client.daemon_client import EXIT_NOT_RUNNING, EXIT_OK, Api, CliError, running_daemon
from ..config.model import Config, ConfigError, find_config, load_config, state_dir
from ..daemon import state_folder
from .allowance_commands import add_allowances_parser
from .autostart import ensure_daemon
from .console_command import add_console_parser
from .install_host import add_install_host_parser
from .log_setup import add_log_options, setup_logging
from .login_commands import add_login_parsers
from .operator_commands import (
    add_audit_parser,
    add_stop_parser,
    add_tasks_parser,
    left_keepers,
    left_keepers_text,
)
from .question_commands import add_questions_parser
from .reload_command import add_reload_parser
from .text_format import status_text

__all__ = ["build_parser", "main", "running_daemon"]


def _load(args: argparse.Namespace) -> tuple[Config, Path | None]:
    path = find_config(args.config)
    if path is None:
        return Config(), None
    return load_config(path), path


def cmd_daemon(args: argparse.Namespace) -> int:
    from ..daemon.root import Daemon

    setup_logging("debug" if args.verbose else args.log_level, args.log_format)
    try:
        config, path = _load(args)
    except ConfigError as exc:
        print(f"mcpx: bad config: {exc}", file=sys.stderr)
        return 2
    folder = state_dir(args.state_dir)
    from ..daemon.background import Background
    from ..store import StoreError, faults
    from ..upstream.stdio import send_fault

    daemon = Daemon(
        config,
        path,
        folder,
        args.port,
        before_commit=faults.from_env(),
        before_send=send_fault.from_env(),
        background_faults=Background.fault_folder_from_env(),
    )
    try:
        anyio.run(daemon.run, backend_options={"use_uvloop": _has_uvloop()})
    except state_folder.AlreadyRunning as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mcpx: cannot listen on 127.0.0.1:{daemon.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    except BaseExceptionGroup as group:  # the store could not be opened (unreachable, refused): said in one line
        unopened = group.subgroup(StoreError)
        if unopened is None:
            raise
        print(f"mcpx: {_innermost(unopened)}", file=sys.stderr)
        return 1
    return 0


def _innermost(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _has_uvloop() -> bool:
    if os.environ.get("MCPX_LOOP") == "asyncio":
        return False
    try:
        import uvloop  # noqa: F401 - imported only to learn whether it is installed
    except ImportError:
        return False
    return True


def cmd_status(args: argparse.Namespace) -> int:
    folder = state_dir(args.state_dir)
    info = running_daemon(folder)
    if info is None:
        left = left_keepers(folder)
        if args.json:
            print(json.dumps({"running": False, "stateDir": str(folder), "leftKeepers": left}))
        else:
            print(f"mcpx: no daemon running for {folder}")
            if left:
                print(left_keepers_text(left))
        return EXIT_NOT_RUNNING
    with Api(folder, info, timeout=5) as api:
        status = api.get("/v1/status")
    status.update({"running": True, "url": info.get("url"), "stateDir": str(folder)})
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(status_text(status, str(folder)))
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import relay

    folder = state_dir(args.state_dir)
    info = ensure_daemon(args, folder)
    serving = info.get("config")
    if args.config and not _same_file(serving, args.config):
        # Said in the host's log: the servers of --config are not the ones this host gets.
        print(
            f"mcpx serve: the daemon already running for {folder} reads {serving or 'no config file'}, not"
            f" {args.config}; its servers are the ones served (mcpx stop, and the next mcpx serve starts one"
            " that reads this one)",
            file=sys.stderr,
        )
    return relay(folder)


def _same_file(a: object, b: str) -> bool:
    try:
        return isinstance(a, str) and Path(a).samefile(b)
    except OSError:
        return False


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo.run_once import run_demo

    setup_logging(args.log_level, args.log_format)
    return run_demo(once=args.once, port=args.port)


def cmd_config_reference(args: argparse.Namespace) -> int:
    from ..config.reference import render

    print(render())
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpx",
        description="MCP gateway daemon with durable tasks.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"mcpx {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--config",
            help="config file (default: MCPX_CONFIG, ./.mcpx.json, ./.mcp.json, $XDG_CONFIG_HOME/mcpx/config.json)",
        )
        sp.add_argument("--state-dir", help="state folder (default: MCPX_STATE_DIR or $XDG_STATE_HOME/mcpx)")

    d = sub.add_parser("daemon", help="run the gateway daemon in the foreground")
    common(d)
    d.add_argument("--port", type=int, help="listen port on 127.0.0.1 (0 = pick a free one)")
    d.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level debug")
    add_log_options(d)
    d.set_defaults(func=cmd_daemon)

    s = sub.add_parser("status", help="report the running daemon", epilog=STATUS_EPILOG)
    common(s)
    s.add_argument("--json", action="store_true", help="print the API's JSON (with running, url, stateDir)")
    s.set_defaults(func=cmd_status)
    add_stop_parser(sub)
    add_tasks_parser(sub)
    add_questions_parser(sub)
    add_audit_parser(sub)
    add_allowances_parser(sub)
    add_reload_parser(sub)
    add_login_parsers(sub)
    add_console_parser(sub)
    add_install_host_parser(sub)

    sv = sub.add_parser("serve", help="stdio MCP server for hosts that spawn processes (relays to the daemon)")
    common(sv)
    sv.set_defaults(func=cmd_serve)

    dm = sub.add_parser("demo", help="run the daemon with a bundled example upstream and call it as a host")
    dm.add_argument("--once", action="store_true", help="exit after the demo calls instead of serving on")
    dm.add_argument("--port", type=int, default=0)
    add_log_options(dm, default_level="warning")
    dm.set_defaults(func=cmd_demo)

    cr = sub.add_parser("config-reference", help="print the config reference (Markdown)")
    cr.set_defaults(func=cmd_config_reference)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


STATUS_EPILOG = "exit codes: 0 running, 1 the daemon does not answer, 3 no daemon runs for the state folder"
EPILOG = """\
operator commands (over the daemon's /v1 API, with the token of the state folder):
  mcpx tasks ls|show|cancel|watch   tasks of every host, and the live event feed
  mcpx questions ls|show|answer     questions upstreams ask (elicitation, sampling, roots)
  mcpx audit                        the event log: who created, cancelled, answered what
  mcpx stop                         stop the running daemon
  mcpx reload                       read the config file again (as SIGHUP does)
  mcpx login NAME | logout NAME     sign in to (or out of) an HTTP upstream that wants OAuth
  mcpx console [--demo]             the operator console (live tasks, answers, cancel)
Every one takes --state-dir; most take --json. See docs/cli.md.

exit codes:
  0   ok
  1   error: no daemon running, the API refused (404, 409, 422: the message says why)
  2   usage: bad options or values
  3   `mcpx status`: no daemon runs for the state folder
  75  `mcpx tasks show`: the task waits for input (input_required, or a question open)
  130 interrupted (Ctrl-C; `mcpx tasks watch` exits 0 instead)
"""


if __name__ == "__main__":
    sys.exit(main())

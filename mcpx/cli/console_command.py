"""`mcpx console`: attach the operator console to the state folder's daemon (or a private demo)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from ..client.daemon_client import running_daemon
from ..config.model import state_dir
from .autostart import ensure_daemon
from .operator_commands import Subcommands

CONSOLE_EPILOG = """\
The console talks to the daemon only through /v1 and /v1/events, with the state folder's token.
  mcpx console                 attach to the running daemon (--state-dir picks which)
  mcpx console --start         start one first if none runs (with --config)
  mcpx console --demo          a private daemon with a demo upstream and three demo hosts
  mcpx console --read-only     watch a shared daemon: no cancel, no answers
exit codes: 0 closed, 1 no daemon runs (and no --start or --demo), 2 usage
"""


def add_console_parser(sub: Subcommands) -> None:
    c = sub.add_parser(
        "console",
        help="the operator console: every host's tasks live, questions answered here",
        epilog=CONSOLE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("--state-dir", help="state folder (default: MCPX_STATE_DIR or $XDG_STATE_HOME/mcpx)")
    c.add_argument("--config", help="with --start: the config the new daemon uses")
    c.add_argument("--start", action="store_true", help="start the daemon if none runs")
    c.add_argument("--demo", action="store_true", help="a private demo daemon, upstream and hosts (nothing to set up)")
    c.add_argument("--operator", default=None, help="your name in the audit log (default: your login name)")
    c.add_argument("--no-bell", action="store_true", help="no terminal bell when something needs input (b toggles)")
    c.add_argument("--no-toasts", action="store_true", help="no toast when something needs input")
    c.add_argument(
        "--read-only",
        action="store_true",
        help="watch only: no cancel, no answers, not counted as an attached operator",
    )
    c.set_defaults(func=cmd_console)


def _operator(name: str | None) -> str:
    if name:
        return name
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "operator"


def run_console(folder: Path, operator: str, args: argparse.Namespace) -> int:
    from console.app import ConsoleApp
    from console.client import DaemonClient, locate_in

    client = DaemonClient(locate_in(folder), operator, attach_as_operator=not args.read_only)
    bell, toasts = not args.no_bell, not args.no_toasts
    ConsoleApp(client, bell=bell, toasts=toasts, read_only=args.read_only).run()
    return 0


def cmd_console(args: argparse.Namespace) -> int:
    operator = _operator(args.operator)
    if args.demo:
        from ..demo.console_world import start_demo

        demo = start_demo()
        try:
            return run_console(demo.state_dir, operator, args)
        finally:
            demo.leave()  # stopped in the background: the terminal is back at once
    folder = state_dir(args.state_dir)
    if running_daemon(folder) is None:
        if not args.start:
            print(
                f"mcpx console: no daemon is running for {folder}.\n"
                "  start one:   mcpx daemon --config FILE   (or: mcpx console --start --config FILE)\n"
                "  or try it:   mcpx console --demo",
                file=sys.stderr,
            )
            return 1
        ensure_daemon(args, folder)
    return run_console(folder, operator, args)

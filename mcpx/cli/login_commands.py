"""`mcpx login NAME` and `mcpx logout NAME`: an HTTP upstream's OAuth sign-in, over /v1.

`login` asks the daemon to start a sign-in, prints the authorization URL and opens it with Python's
`webbrowser` (so `$BROWSER` picks the program), then waits until the browser comes back to the
daemon and the sign-in completes, or fails, or `--timeout` passes. The browser must run on the
daemon's machine: the redirect back is to the daemon's loopback listener.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import webbrowser
from typing import Any
from urllib.parse import quote

from ..client.daemon_client import EXIT_ERROR, EXIT_OK, Api, ApiError, CliError, running_daemon
from ..config.model import state_dir
from .operator_commands import Subcommands, base_options, default_by

WAIT_STEP_S = 30.0


def _api(args: argparse.Namespace) -> Api:
    folder = state_dir(args.state_dir)
    info = running_daemon(folder)
    if info is None:
        raise CliError(f"no daemon running for {folder} (start one with `mcpx daemon`)")
    return Api(folder, info, timeout=WAIT_STEP_S + 15)


def _path(name: str, what: str) -> str:
    return f"/v1/upstreams/{quote(name, safe='')}/{what}"


def cmd_login(args: argparse.Namespace) -> int:
    with _api(args) as api:
        try:
            started: dict[str, Any] = api.post(_path(args.name, "login"), {"by": args.by})
        except ApiError as exc:
            raise CliError(f"cannot sign in to {args.name!r}: {exc.error}") from None
        url = started.get("authorizationUrl")
        if url is None:  # client credentials: done already
            if started.get("signedIn"):
                print(f"mcpx: {args.name}: signed in (client credentials)")
                return EXIT_OK
            raise CliError(f"{args.name}: sign-in failed: {started.get('error')}")
        print(f"Sign in to {args.name} in a browser on this machine:\n\n  {url}\n", flush=True)
        if not args.no_browser:
            try:
                opened = webbrowser.open(url)
            except webbrowser.Error:
                opened = False
            if not opened:
                print("(no browser could be opened here: open the URL above yourself)", file=sys.stderr, flush=True)
        deadline = time.monotonic() + args.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CliError(f"{args.name}: the sign-in did not come back within {args.timeout:g} s")
            state: dict[str, Any] = api.get(_path(args.name, "auth"), {"waitS": min(WAIT_STEP_S, max(left, 0.1))})
            if state["state"] == "signed in":
                if args.json:
                    print(json.dumps(state, indent=2, ensure_ascii=False))
                else:
                    scopes = " ".join((state.get("auth") or {}).get("scopes") or []) or "none named"
                    print(f"mcpx: {args.name}: signed in (scopes: {scopes})")
                return EXIT_OK
            if state["state"] == "failed":
                raise CliError(f"{args.name}: sign-in failed: {state.get('error')}")
            if state["state"] == "none":
                raise CliError(f"{args.name}: the sign-in was dropped (another one started?)")


def cmd_logout(args: argparse.Namespace) -> int:
    with _api(args) as api:
        try:
            row = api.post(_path(args.name, "logout"), {"by": args.by})
        except ApiError as exc:
            raise CliError(f"cannot sign out of {args.name!r}: {exc.error}") from None
    print(json.dumps(row, indent=2) if args.json else f"mcpx: {args.name}: signed out (its tokens are forgotten)")
    return EXIT_OK if row else EXIT_ERROR


LOGIN_EPILOG = """\
The daemon discovers the server's authorization server, registers with it if needed, and gives the
authorization URL; this prints it and opens it with the `webbrowser` module ($BROWSER picks the
program). The browser must run on the daemon's machine: the sign-in comes back to the daemon on
loopback (its /oauth/callback, or http://localhost:<oauth.callbackPort>/callback). With
`grantType: client_credentials` no browser is needed: the token is fetched at once.

exit codes: 0 signed in, 1 the sign-in failed or timed out (the reason is printed)
"""


def add_login_parsers(sub: Subcommands) -> None:
    lg = sub.add_parser(
        "login",
        help="sign in to an HTTP upstream that wants OAuth (opens the browser)",
        epilog=LOGIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lg.add_argument("name", help="the upstream's key in mcpServers")
    lg.add_argument("--no-browser", action="store_true", help="only print the URL")
    lg.add_argument("--timeout", type=float, default=300.0, metavar="S", help="give up after this long (default 300)")
    lg.add_argument("--by", metavar="NAME", default=default_by(), help="your name in the event log (default: $USER)")
    base_options(lg)
    lg.set_defaults(func=cmd_login)

    lo = sub.add_parser("logout", help="forget an HTTP upstream's OAuth tokens")
    lo.add_argument("name", help="the upstream's key in mcpServers")
    lo.add_argument("--by", metavar="NAME", default=default_by(), help="your name in the event log (default: $USER)")
    base_options(lo)
    lo.set_defaults(func=cmd_logout)

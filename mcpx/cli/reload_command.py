"""`mcpx reload`: the daemon reads its config file again and applies it, as SIGHUP does (over /v1)."""

from __future__ import annotations

import argparse
import json

from ..client.daemon_client import EXIT_ERROR, EXIT_OK
from .operator_commands import Subcommands, _api, base_options, default_by
from .text_format import reload_text


def cmd_reload(args: argparse.Namespace) -> int:
    with _api(args) as api:
        outcome = api.post("/v1/config/reload", {"by": args.by})
    print(json.dumps(outcome, indent=2, ensure_ascii=False) if args.json else reload_text(outcome))
    return EXIT_OK if outcome["result"] == "applied" else EXIT_ERROR


def add_reload_parser(sub: Subcommands) -> None:
    r = sub.add_parser(
        "reload",
        help="read the config file again: start added servers, stop removed ones, restart changed ones",
        epilog="exit codes: 0 applied, 1 refused (the daemon keeps the config it had; the reason is printed)",
    )
    r.add_argument("--by", metavar="NAME", default=default_by(), help="your name in the event log (default: $USER)")
    base_options(r)
    r.set_defaults(func=cmd_reload)

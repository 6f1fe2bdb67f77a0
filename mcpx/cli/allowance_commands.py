"""`mcpx allowances ls|revoke`: the approval allowances operators granted (docs/approvals.md)."""

from __future__ import annotations

import argparse
import json

from ..client.daemon_client import EXIT_OK, ApiError
from .operator_commands import Subcommands, _api, _not_found, base_options
from .text_format import stamp, table


def cmd_allowances_ls(args: argparse.Namespace) -> int:
    with _api(args) as api:
        allowances = api.get("/v1/allowances")["allowances"]
    if args.json:
        print(json.dumps(allowances, indent=2, ensure_ascii=False))
    elif not allowances:
        print("no allowances in force")
    else:
        rows = [
            [a["id"], a["connectionId"], f"{a['upstream']}/{a['tool']}", stamp(a["untilMs"]), a["by"]]
            for a in allowances
        ]
        print(table(["ID", "CONNECTION", "TOOL", "UNTIL", "BY"], rows))
    return EXIT_OK


def cmd_allowances_revoke(args: argparse.Namespace) -> int:
    with _api(args) as api:
        try:
            revoked = api.delete(f"/v1/allowances/{args.id}")
        except ApiError as exc:
            raise _not_found(exc, "such allowance") from None
    print(f"revoked: {revoked['upstream']}/{revoked['tool']} for {revoked['connectionId']}")
    return EXIT_OK


def add_allowances_parser(sub: Subcommands) -> None:
    a = sub.add_parser("allowances", help="list and revoke approval allowances (approval gates)")
    asub = a.add_subparsers(dest="allowances_command", required=True, metavar="{ls,revoke}")
    ls = asub.add_parser("ls", help="the allowances in force: who may call which gated tool unasked, until when")
    base_options(ls)
    ls.set_defaults(func=cmd_allowances_ls)
    rv = asub.add_parser("revoke", help="end an allowance now: the host's next call is asked again")
    rv.add_argument("id", help="the allowance's id (from `mcpx allowances ls`)")
    base_options(rv, json_flag=False)
    rv.set_defaults(func=cmd_allowances_revoke)

"""`mcpx` command line: daemon, status, serve, demo, config-reference."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from . import __version__, state
from .config import Config, ConfigError, find_config, load_config, state_dir


def _load(args: argparse.Namespace) -> tuple[Config, Path | None]:
    path = find_config(args.config)
    if path is None:
        return Config(), None
    return load_config(path), path


def cmd_daemon(args: argparse.Namespace) -> int:
    from .daemon import Daemon

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        config, path = _load(args)
    except ConfigError as exc:
        print(f"mcpx: bad config: {exc}", file=sys.stderr)
        return 2
    folder = state_dir(args.state_dir)
    daemon = Daemon(config, path, folder, args.port)
    try:
        anyio.run(daemon.run, backend_options={"use_uvloop": _has_uvloop()})
    except state.AlreadyRunning as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mcpx: cannot listen on 127.0.0.1:{daemon.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def _has_uvloop() -> bool:
    if os.environ.get("MCPX_LOOP") == "asyncio":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def running_daemon(folder: Path) -> dict[str, Any] | None:
    info = state.read_info(folder)
    if info is None or not state.pid_alive(info.get("pid")):
        return None
    return info


def cmd_status(args: argparse.Namespace) -> int:
    folder = state_dir(args.state_dir)
    info = running_daemon(folder)
    if info is None:
        print(
            json.dumps({"running": False, "stateDir": str(folder)})
            if args.json
            else f"mcpx: no daemon running for {folder}"
        )
        return 3
    token = state.api_token(folder)
    try:
        resp = httpx.get(
            f"http://127.0.0.1:{info['port']}/v1/status", headers={"Authorization": f"Bearer {token}"}, timeout=5
        )
        status = resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        print(f"mcpx: daemon pid {info.get('pid')} does not answer on port {info.get('port')}: {exc}", file=sys.stderr)
        return 1
    status.update({"running": True, "url": info.get("url"), "stateDir": str(folder)})
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"mcpx {status['version']} running: pid {status['pid']}, {info.get('url')}, up {status['uptimeS']:.0f} s")
    print(f"config: {status.get('config') or '(none)'}; state: {folder}")
    for u in status["upstreams"]:
        err = f" — {u['lastError']}" if u.get("lastError") else ""
        print(
            f"  {u['name']:<20} {u['transport']:<5} {u['state']:<10} {u.get('revision') or '-':<11} {u['tools']} tools, {u['restarts']} restarts{err}"
        )
    print(f"host connections: {len(status['connections'])}")
    return 0


def ensure_daemon(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The running daemon's info, starting one in the background if none runs."""
    info = running_daemon(folder)
    if info is not None:
        return info
    state.prepare(folder)
    cmd = [sys.executable, "-m", "mcpx", "daemon", "--state-dir", str(folder)]
    if args.config:
        cmd += ["--config", args.config]
    log_path = folder / "daemon.log"
    with open(log_path, "ab") as log_fh:
        offset = log_fh.tell()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log_fh, stderr=log_fh, start_new_session=True, env=os.environ.copy()
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = running_daemon(folder)
        if info is not None:
            return info
        if proc.poll() is not None:
            # It exited without serving (bad config, port taken): say why now, not after the deadline,
            # so the host's log shows the reason. Losing a start race to another shim's daemon is
            # fine: that one is about to write its info file, so keep waiting for it.
            with open(log_path, "rb") as fh:
                fh.seek(offset)
                why = fh.read().decode(errors="replace").strip()
            if "already running" not in why:
                raise SystemExit(
                    f"mcpx serve: the daemon exited with code {proc.returncode} before serving: {why or '(no output)'}\n(log: {log_path})"
                )
        time.sleep(0.05)
    raise SystemExit(f"mcpx serve: the daemon did not start; see {log_path}")


def cmd_serve(args: argparse.Namespace) -> int:
    from .host.stdio import relay

    folder = state_dir(args.state_dir)
    info = ensure_daemon(args, folder)
    token = state.api_token(folder)
    return anyio.run(relay, int(info["port"]), token)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(once=args.once, port=args.port)


def cmd_config_reference(args: argparse.Namespace) -> int:
    from .config_reference import render

    print(render())
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mcpx", description="MCP gateway daemon with durable tasks.")
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
    d.add_argument("-v", "--verbose", action="store_true")
    d.set_defaults(func=cmd_daemon)

    s = sub.add_parser("status", help="report the running daemon")
    common(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)

    sv = sub.add_parser("serve", help="stdio MCP server for hosts that spawn processes (relays to the daemon)")
    common(sv)
    sv.set_defaults(func=cmd_serve)

    dm = sub.add_parser("demo", help="run the daemon with a bundled example upstream and call it as a host")
    dm.add_argument("--once", action="store_true", help="exit after the demo calls instead of serving on")
    dm.add_argument("--port", type=int, default=0)
    dm.set_defaults(func=cmd_demo)

    cr = sub.add_parser("config-reference", help="print the config reference (Markdown)")
    cr.set_defaults(func=cmd_config_reference)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

"""`mcpx install-host HOST`: put mcpx in front of a host. The host's servers move from its file into
mcpx's config (so mcpx serves them, once), and the host keeps one entry, `mcpx`: `mcpx serve --config
<that config>` run by this very mcpx (never a `PATH` lookup), or with `--http` the running daemon's
`/mcp`. Each file changed is backed up first (`<file>.bak`), what moved (and what stayed, and why) is
said, a second run changes nothing, and `--undo` puts the host's file back. Places and shapes per
host: docs/hosts.md (with the hosts' docs cited)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..client.daemon_client import running_daemon
from ..config.model import DaemonConfig, state_dir
from .host_files import ENTRY_NAME, HOSTS, mcpx_config_for, render_entry, user_file
from .host_moves import McpxConfig, Outcome, install, undo

DEFAULT_PORT = DaemonConfig().port


def invoked_mcpx() -> tuple[list[str], dict[str, str]]:
    """The command (and environment) that runs the mcpx running now: the `mcpx` script it was started
    as, else this interpreter with `-m mcpx` (and `PYTHONPATH`, when this mcpx is a checkout that
    interpreter would not find from another folder)."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name in ("mcpx", "mcpx.exe"):
        resolved = script.resolve()
        if resolved.is_file() and os.access(resolved, os.X_OK):
            return [str(resolved)], {}
    return [sys.executable, "-m", "mcpx"], _pythonpath_for_this_mcpx()


def _pythonpath_for_this_mcpx() -> dict[str, str]:
    ours = Path(__file__).resolve().parents[1] / "__init__.py"
    try:
        found = subprocess.run(
            [sys.executable, "-c", "import mcpx, sys; sys.stdout.write(mcpx.__file__)"],
            cwd="/", env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            capture_output=True, text=True, timeout=30, check=False,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        found = ""
    return {} if found and Path(found).resolve() == ours else {"PYTHONPATH": str(ours.parent.parent)}


def entry_for(host: str, *, url: str | None = None, config: Path | None = None) -> dict[str, Any]:
    """The host's `mcpx` entry: the daemon's `url`, or `mcpx serve --config <config>` over stdio."""
    typed = HOSTS[host].typed
    if url is not None:
        return {"type": "http", "url": url} if typed else {"url": url}
    command, env = invoked_mcpx()
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], "serve", "--config", str(config)]}
    if env:
        entry["env"] = env
    return {"type": "stdio", **entry} if typed else entry


def _http_port(args: argparse.Namespace, info: dict[str, Any] | None, config: McpxConfig) -> tuple[int | None, str]:
    """The port for `--http`: `--port`, else the running daemon's, else the config's; and what to say."""
    if args.port is not None:
        return args.port, ""
    if info is not None:
        return int(info["port"]), ""
    daemon = config.data.get("daemon")
    port = daemon.get("port", DEFAULT_PORT) if isinstance(daemon, dict) else DEFAULT_PORT
    start = f"start it: mcpx daemon --config {config.path}"
    if not isinstance(port, int) or port == 0:
        return None, f"no daemon is running, and {config.path} lets it pick a free port: {start}, then run this again"
    return port, f"no daemon is running: wrote the port it will listen on ({port}); {start}"


def _daemon_note(info: dict[str, Any] | None, config_path: Path, http: bool) -> str | None:
    if info is None:
        return None
    reads = info.get("config")
    if reads and Path(reads).resolve() == config_path.resolve():
        return f"the running daemon (port {info.get('port')}) reads {config_path} and takes the change at once"
    restart = (
        f"mcpx stop; mcpx daemon --config {config_path}"
        if http
        else "mcpx stop (the host's next `mcpx serve` starts one)"
    )
    return (
        f"note: the running daemon (port {info.get('port')}) reads {reads or 'no config file'}, not {config_path}:"
        f" the moved servers reach the host once a daemon reads it: {restart}"
    )


def report(
    host: str, path: Path, config_path: Path, entry: dict[str, Any], out: Outcome, undo_command: str
) -> list[str]:
    if not out.host_changed:
        return [f"{path}: already points {host} at mcpx; unchanged"]
    reach = entry.get("url") or " ".join([entry["command"], *entry["args"]])
    lines = [f"{path}: {host} now reaches mcpx as {ENTRY_NAME!r} ({reach})"]
    if out.moved:
        lines.append(f"moved to {config_path} (mcpx serves them now): {', '.join(out.moved)}")
        lines += [f"  {name}: {note}" for name, notes in out.moved.items() for note in notes]
    for name, why in out.stayed.items():
        lines.append(f"left in {path.name} (the host still runs it itself): {name}: {why}")
    if out.dropped:
        lines.append(f"removed from {path.name}: {', '.join(out.dropped)} (reached mcpx too; {ENTRY_NAME!r} does)")
    if out.backups:
        lines.append("backups: " + ", ".join(str(b) for b in out.backups))
    lines.append(f"undo: {undo_command}")
    return lines


def _undo_command(args: argparse.Namespace) -> str:
    words = ["mcpx", "install-host", args.host, "--undo"]
    if args.scope != "project":
        words += ["--scope", args.scope]
    if args.file:
        words += ["--file", args.file]
    if args.config:
        words += ["--config", args.config]
    return " ".join(words)


def cmd_install_host(args: argparse.Namespace) -> int:
    spec = HOSTS[args.host]
    if args.http and not spec.takes_url:
        print(f"mcpx: {args.host}'s config file takes stdio servers only; leave out --http", file=sys.stderr)
        return 2
    if args.file:
        path = Path(args.file).absolute()
    elif args.scope == "project" and spec.project is not None:
        path = Path.cwd() / spec.project
    elif args.scope == "project":
        print(f"mcpx: {args.host} has no project file; use --scope user", file=sys.stderr)
        return 2
    else:
        path = user_file(args.host, Path.home())
    config_path = mcpx_config_for(args.scope, args.config, Path.cwd())
    if config_path.resolve() == path.resolve():
        print(f"mcpx: {path} is {args.host}'s own file; give mcpx's config another place (--config)", file=sys.stderr)
        return 2
    try:
        if args.undo:
            print("\n".join(undo(args.host, path, config_path)))
            return 0
        config = McpxConfig.read(config_path)
        problem = config.problem_with(config.data) if config.old is not None else None
        if problem is not None:
            print(f"mcpx: mcpx's config does not load as it is; fix it first:\n{problem}", file=sys.stderr)
            return 1
        info = running_daemon(state_dir(args.state_dir))
        said = None
        if args.http:
            port, said = _http_port(args, info, config)
            if port is None:
                print(f"mcpx: {said}", file=sys.stderr)
                return 1
            entry = entry_for(args.host, url=f"http://127.0.0.1:{port}/mcp")
        else:
            entry = entry_for(args.host, config=config_path)
        if args.print:
            print(render_entry(args.host, entry), end="")
            return 0
        out = install(args.host, path, entry, config)
    except ValueError as exc:  # bad JSON, or TOML (tomlkit's ParseError is a ValueError)
        print(f"mcpx: {path}: cannot merge into it: {exc}", file=sys.stderr)
        return 1
    lines = report(args.host, path, config_path, entry, out, _undo_command(args))
    if said:
        lines.append(said)
    if out.moved and (note := _daemon_note(info, config_path, args.http)):
        lines.append(note)
    print("\n".join(lines))
    return 0


def add_install_host_parser(sub: Any) -> None:
    p = sub.add_parser(
        "install-host",
        help="put mcpx in front of a host (Claude Code, Cursor, VS Code, Codex, Claude Desktop): its servers move"
        " into mcpx's config",
    )
    p.add_argument("host", choices=sorted(HOSTS))
    p.add_argument("--print", action="store_true", help="print the entry instead of writing anything")
    p.add_argument("--http", action="store_true", help="the daemon's /mcp URL instead of `mcpx serve` (stdio)")
    p.add_argument("--port", type=int, help="the port for --http (default: the running daemon's)")
    p.add_argument("--scope", choices=("project", "user"), default="project", help="the host's project or user file")
    p.add_argument("--file", help="the host's file to change instead of its usual one")
    p.add_argument(
        "--config",
        help="mcpx's config, where the host's servers go (default: MCPX_CONFIG, else ./.mcpx.json for a project,"
        " $XDG_CONFIG_HOME/mcpx/config.json for the user)",
    )
    p.add_argument("--state-dir", help="the state folder of the daemon to ask for its port (default: MCPX_STATE_DIR)")
    p.add_argument(
        "--undo", action="store_true", help="put the host's file back from its .bak, and un-move the servers"
    )
    p.set_defaults(func=cmd_install_host)

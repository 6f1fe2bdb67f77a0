"""The forkserver side of `daemon_launcher`: an interpreter that imports the daemon's modules once,
then forks one child per request, and reports each child's exit status.

Requests arrive on stdin as JSON lines {"argv", "env", "cwd", "stderr"}; the answers on stdout are
{"started": pid} and later {"exit": pid, "code": n} (`subprocess.Popen.returncode`'s meaning:
negative when a signal ended it). A forked child leaves `serve()` with its request and becomes
`python -m mcpx <argv>` (`become`): same arguments, environment, working folder and file
descriptors, and the interpreter's own shutdown when it exits. Single-threaded on purpose (a fork
copies one thread). Standard library only, besides the preloaded daemon."""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Any

PRELOAD = ("mcpx.cli.main", "mcpx.daemon.root")


def _send(message: dict[str, Any]) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _reap(children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        _send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def serve() -> dict[str, Any] | None:
    """The server loop. Returns in a forked child only (with its request); when the test process
    closes our stdin, kills what is left (a test that forgot a daemon) and returns None."""
    for name in PRELOAD:
        __import__(name)
    children: set[int] = set()
    pending = b""
    while True:
        readable, _, _ = select.select([0], [], [], 0.05)
        _reap(children)
        if not readable:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            return None
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                return dict(request)
            children.add(pid)
            _send({"started": pid})


def become(request: dict[str, Any]) -> None:
    """In the child: /dev/null on stdin and stdout, stderr appended to its file, then the CLI."""
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(err, 2)
    os.close(null)
    os.close(err)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]  # what `python -m` puts first, where this script's folder was
    import mcpx.cli.main

    sys.argv = [os.path.join(os.path.dirname(mcpx.__file__), "__main__.py"), *request["argv"]]
    sys.exit(mcpx.cli.main.main(request["argv"]))


if __name__ == "__main__":
    child_request = serve()
    if child_request is not None:
        become(child_request)

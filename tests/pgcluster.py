"""A throwaway PostgreSQL cluster for tests and benches: initdb in a temporary folder owned by the
`postgres` user (initdb refuses root, and tests run as root), started on a free 127.0.0.1 port with
its socket in that folder, a fresh database per test made from a template, stopped and removed at
the end. Nothing listens on any address but 127.0.0.1."""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

PG_USER = "postgres"
# Durability is not what a test measures; these make a cluster start and CREATE DATABASE cheap.
_FAST = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"


def available() -> bool:
    """initdb and pg_ctl on the PATH and a `postgres` user to run them as."""
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        return False
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        return False
    return True


def _as_pg(*args: str) -> list[str]:
    # runuser needs root; a developer who is not root but owns the cluster runs the tools directly.
    return ["runuser", "-u", PG_USER, "--", *args] if os.geteuid() == 0 else list(args)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One running cluster; `database()` makes a fresh empty database and returns its URL."""

    def __init__(self, folder: Path, port: int, *, durable: bool = False) -> None:
        self.folder = folder
        self.port = port
        self.durable = durable
        self._names = itertools.count(1)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        pg_user = pwd.getpwnam(PG_USER)
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chown(self.folder, pg_user.pw_uid, pg_user.pw_gid)
        subprocess.run(
            _as_pg("initdb", "-D", str(self.data), "-A", "trust", "-U", PG_USER, "--no-sync"),
            check=True,
            capture_output=True,
        )
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        if not self.durable:
            options += f" {_FAST}"
        else:
            options += " -c max_connections=200"
        subprocess.run(
            _as_pg("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start"),
            check=True,
            capture_output=True,
        )

    def stop(self) -> None:
        subprocess.run(_as_pg("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop"), capture_output=True)

    def psql(self, sql: str, database: str = "postgres") -> str:
        done = subprocess.run(
            ["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql, self.url(database)],
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout

    def database(self) -> str:
        """A new empty database (from template0 nothing is copied but the catalogue: milliseconds)."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.psql(f"CREATE DATABASE {name} TEMPLATE template0")
        return self.url(name)


@contextlib.contextmanager
def running(*, durable: bool = False) -> Iterator[Cluster]:
    """A started cluster in a new temporary folder; stopped and removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix="mcpx-pg-"))
    folder.chmod(0o755)  # mkdtemp's 0700 would keep the postgres user out of its own cluster folder
    cluster = Cluster(folder / "pg", _free_port(), durable=durable)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)

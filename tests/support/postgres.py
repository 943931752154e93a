"""A real PostgreSQL server for the tests: one per pytest process, in a temporary directory.

The binaries come from, in order: `$TRIO_AGENTS_PG_BIN`; the `pgserver` wheel that the test
extra installs (PostgreSQL 16 built for manylinux, so `pip install -e '.[test]'` brings a
server to a fresh machine); the system's `/usr/lib/postgresql/<n>/bin` (Debian's package).
None found is an error, never a skip (design D322).

`initdb` refuses to run as root, which is how tests run here: then the server runs as
`nobody`, with its directory chowned to it. It is started by `pg_ctl`, which returns once
the server accepts connections and leaves the postmaster reparented away from the test
process, so that the tests which look for leftover descendants of the test process do not
find the server. It listens on a Unix socket in its directory only (no port to collide on),
with `fsync=off`: the tests kill clients, never the server.

Because the postmaster is not the test process's child, a test process killed outright
(a hard-killed xdist worker) cannot stop it. Each server's directory names the process that
started it (`owner`), and every `start_server` first stops and removes the servers whose
owner has died.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from .unprivileged import open_to_nobody, sweep_dead_copies

__all__ = ["PgServer", "find_binaries", "start_server", "sweep_orphans"]


def find_binaries() -> pathlib.Path:
    """The directory holding initdb, pg_ctl and postgres; AssertionError naming where it
    looked if there is none."""
    tried: list[str] = []
    explicit = os.environ.get("TRIO_AGENTS_PG_BIN")
    candidates: list[pathlib.Path] = [pathlib.Path(explicit)] if explicit else []
    spec = importlib.util.find_spec("pgserver")  # located, not imported: it has side effects
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidates.append(pathlib.Path(location) / "pginstall" / "bin")
    system = sorted(
        pathlib.Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates.extend(system)
    for candidate in candidates:
        tried.append(str(candidate))
        if all((candidate / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return candidate
    raise AssertionError(
        "no PostgreSQL server binaries found (tried: "
        + (", ".join(tried) or "nothing")
        + "); install the test extra (pip install -e '.[test]', which brings pgserver), "
        "or set TRIO_AGENTS_PG_BIN"
    )


@dataclass
class PgServer:
    """A running server. `dsn(db)` connects to database `db` on its socket."""

    bindir: pathlib.Path
    root: pathlib.Path
    version: str
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    options: str = ""

    @property
    def socket_dir(self) -> pathlib.Path:
        return self.root

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@/{dbname}?host={self.root}"

    def new_database(self) -> str:
        """A new empty database's DSN, so that no two tests share tables or claims."""
        import psycopg
        from psycopg import sql

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def restart(self) -> None:
        """Stop at once (`immediate`: as a crash would, every connection cut) and start
        again on the same directory and socket; returns once it accepts connections."""
        stop = [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate"]
        stopped = _run_as(self, [*stop, "-w"])
        if stopped.returncode != 0:
            raise AssertionError(f"the PostgreSQL server did not stop: {stopped.stderr}")
        _start(self)

    def stop(self) -> None:
        """Stop at once and remove the directory. `immediate`, not `fast`: a fast shutdown
        first checkpoints every database the tests made (seconds, for data thrown away)."""
        argv = [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate"]
        _run_as(self, [*argv, "-w"])
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def data(self) -> pathlib.Path:
        return self.root / "data"


def _user() -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def _run_as(server: PgServer, argv: list[str]) -> subprocess.CompletedProcess[str]:
    user = _user()
    result = subprocess.run(
        argv,
        user=None if user is None else user[0],
        group=None if user is None else user[1],
        extra_groups=[] if user is not None else None,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=server.root,
        check=False,
    )
    return result


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans(bindir: pathlib.Path) -> list[pathlib.Path]:
    """Stop and remove the servers whose starting process has died, and the copies it
    made for nobody; the servers' directories removed. A directory with no `owner` yet is
    another process's server being made."""
    swept: list[pathlib.Path] = []
    for root in pathlib.Path(tempfile.gettempdir()).glob("trio-agents-pg-*"):
        try:
            owner = int((root / "owner").read_text())
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        orphan = PgServer(bindir, root, version="")
        if (orphan.data / "postmaster.pid").exists():
            orphan.stop()
        else:
            shutil.rmtree(root, ignore_errors=True)
        swept.append(root)
    # Then the copies such a process made for nobody (D380), its server's binaries included.
    sweep_dead_copies()
    return swept


def _open_to_nobody(bindir: pathlib.Path) -> pathlib.Path:
    """`bindir`, or, from a checkout closed to others, a copy nobody can run: of the
    install's tree (bin, lib, share: PostgreSQL finds the rest relative to bin), and for
    the pgserver wheel also of the libraries beside its package (`pgserver.libs`, which its
    binaries find by the relative path `$ORIGIN/../../../pgserver.libs`)."""
    install = bindir.parent
    if install.name == "pginstall" and install.parent.name == "pgserver":
        packages = install.parent.parent
        members = ["pgserver/pginstall"]
        if (packages / "pgserver.libs").is_dir():
            members.append("pgserver.libs")
        return open_to_nobody(packages, members, "pgserver/pginstall/bin/initdb") / (
            "pgserver/pginstall/bin"
        )
    return open_to_nobody(install, ["."], f"{bindir.name}/initdb") / bindir.name


def start_server(*, fsync: bool = False) -> PgServer:
    """initdb and start a server in a new temporary directory (not under pytest's, whose
    parents are private to root), after stopping the servers of processes that died.
    `fsync=True` keeps the server's durable defaults (for benchmarks/store_appends.py); the
    tests turn it off."""
    bindir = find_binaries()
    if _user() is not None:
        bindir = _open_to_nobody(bindir)
    sweep_orphans(bindir)
    root = pathlib.Path(tempfile.mkdtemp(prefix="trio-agents-pg-"))
    (root / "owner").write_text(str(os.getpid()))
    user = _user()
    if user is not None:
        os.chown(root, *user)
    server = PgServer(bindir, root, version="")
    init = _run_as(
        server,
        [
            str(bindir / "initdb"), "-D", str(server.data), "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--locale=C", "--no-sync",
        ],
    )  # fmt: skip
    if init.returncode != 0:
        raise AssertionError(f"initdb failed ({bindir}): {init.stderr.strip()[-2000:]}")
    durability = "" if fsync else "-c fsync=off -c full_page_writes=off "
    server.options = f"-k {root} -c listen_addresses= {durability}-c max_connections=200"
    _start(server)
    version = subprocess.run(
        [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    server.version = version
    return server


def _start(server: PgServer) -> None:
    start = _run_as(
        server,
        [
            str(server.bindir / "pg_ctl"), "start", "-D", str(server.data), "-l",
            str(server.root / "log"), "-w", "-t", "60", "-o", server.options,
        ],
    )  # fmt: skip
    if start.returncode != 0:
        log = server.root / "log"
        text = log.read_text(errors="replace") if log.exists() else ""
        raise AssertionError(f"the PostgreSQL server did not start: {start.stderr}{text[-2000:]}")


def user_tables(dsn: str) -> list[str]:
    """The tables of the database at `dsn` outside PostgreSQL's own schemas, sorted: what a
    test looks at to see that nothing was created."""
    # Imported here as in `new_database`: this module also serves processes without psycopg.
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname NOT IN "
            "('pg_catalog', 'information_schema') ORDER BY tablename"
        ).fetchall()
    return [str(row[0]) for row in rows]

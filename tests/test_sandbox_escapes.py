"""The escape corpus (issue 36): each test is one way out of the shell sandbox, tried from a
real command run through the `bash` tool as a model would call it, and fails if the way out
works. The techniques: the breaks measured on the sandbox before D485-D488 (workdir, root's
files, HOME, sessions sharing IPC and spill files, unbounded /tmp), the anchors' known escapes
(mount and capability tricks, writing the agent's own files), and the usual suspects
(symlinks and hard links, /proc, devices, setuid programs, rlimits, the terminal).

Run as root (as CI runs) a command is mapped to an unprivileged id (D485); run as another
user it is that user; every assertion holds for both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from typing import cast

import pytest
import trio

from trio_agents import (
    BashTools,
    Runtime,
    SandboxPolicy,
    ShellExecutor,
    SqliteStore,
    ToolContext,
    ToolResult,
    open_runtime,
)
from trio_agents._shell import _network

from .support.helpers import bash_runtime
from .support.processes import with_marker

pytestmark = pytest.mark.subprocess

# The interpreter itself, shown read-only to the commands: a checkout's venv under /tmp is
# under the sandbox's private /tmp, and one under HOME (pyenv's) under its private HOME.
PYTHON = os.path.realpath(sys.executable)
PYTHON_HOME = os.path.realpath(sys.base_prefix)
GIB = 1 << 30
CREDENTIALS = (
    ".pgpass",
    ".vault-token",
    ".git-credentials",
    ".config/git/credentials",
    ".bash_history",
    ".config/openai/auth.json",
    ".terraform.d/credentials.tfrc.json",
    ".m2/settings.xml",
    ".gem/credentials",
    ".config/hub",
    ".env",
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".netrc",
)


@contextlib.asynccontextmanager
async def bash_in(
    root: pathlib.Path, policy: SandboxPolicy | None = None
) -> AsyncGenerator[tuple[Runtime, BashTools], None]:
    policy = policy or SandboxPolicy()
    policy = dataclasses.replace(policy, read_only=(*policy.read_only, PYTHON_HOME))
    async with bash_runtime(grace=0.3, cwd=root, sandbox=policy) as (rt, bash):
        assert await rt.shell.check_sandbox()
        yield rt, bash


async def run(bash: BashTools, command: str, caller: str = "A", **more: object) -> ToolResult:
    tool = next(t for t in bash.tools if t.name == "bash")
    arguments = {"command": command, "description": "an escape attempt", **more}
    result = await tool(arguments, ToolContext(caller, "call-1", 1, 1))
    assert isinstance(result, ToolResult)
    return result


async def until(condition: Callable[[], bool]) -> None:
    """Wait for another process to make `condition` true (no event tells us), for at most
    ten real seconds: ample on two loaded cores."""
    with trio.move_on_after(10):
        while not condition():  # noqa: ASYNC110 - another process's state
            await trio.sleep(0.02)
    assert condition()


def stat_mode(path: pathlib.Path) -> int:
    return path.stat().st_mode


def read(path: pathlib.Path) -> str:
    return path.read_text()


def exists(path: pathlib.Path) -> bool:
    return path.exists()


def head(path: pathlib.Path) -> bytes:
    return path.read_bytes()[:15]


def listing(path: pathlib.Path) -> list[pathlib.Path]:
    return list(path.iterdir())


@pytest.fixture
def outside() -> Iterator[pathlib.Path]:
    """A directory outside every command's root and outside /tmp (which commands see as a
    private tmpfs): what a command must not write or, for root's 0600 files, read."""
    path = pathlib.Path("/var/tmp") / f"trio-agents-escape-{uuid.uuid4().hex[:12]}"
    path.mkdir(mode=0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


# -- the workdir the model passes -----------------------------------------------------------


@pytest.mark.parametrize("workdir", ["/", "/etc", "../..", "sub/../../.."])
async def test_a_workdir_outside_the_working_directory_is_refused(
    tmp_path: pathlib.Path, workdir: str
) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, "touch escaped", workdir=workdir)
    assert result.is_error
    assert "outside the session's working directory" in result.content
    assert not exists(pathlib.Path("/escaped"))


async def test_a_workdir_through_a_symlink_the_command_made_is_refused(
    tmp_path: pathlib.Path, outside: pathlib.Path
) -> None:
    async with bash_in(tmp_path) as (_, bash):
        await run(bash, f"ln -s {outside} link")
        result = await run(bash, "touch escaped", workdir="link")
    assert result.is_error
    assert not exists(outside / "escaped")


async def test_a_symlink_out_of_the_root_leads_to_a_read_only_view(
    tmp_path: pathlib.Path, outside: pathlib.Path
) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(
            bash, f"ln -s {outside} link && touch link/escaped && cd link && touch b"
        )
    assert result.is_error
    assert listing(outside) == []


async def test_a_workdir_inside_the_working_directory_runs_there(tmp_path: pathlib.Path) -> None:
    (tmp_path / "sub").mkdir()
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, "pwd && touch made", workdir="sub")
    assert not result.is_error, result.content
    assert exists(tmp_path / "sub" / "made")


# -- root's files --------------------------------------------------------------------------


async def test_root_only_files_stay_closed(tmp_path: pathlib.Path, outside: pathlib.Path) -> None:
    secret = outside / "root-only"
    secret.write_text("ROOT SECRET")
    secret.chmod(0o600)
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, f"cat /etc/shadow {secret}; cat /proc/1/environ")
    assert "root:" not in result.content
    assert "ROOT SECRET" not in result.content


async def test_a_command_runs_as_no_privileged_id_of_this_host(tmp_path: pathlib.Path) -> None:
    marker = f"uid-probe-{uuid.uuid4().hex[:8]}"
    async with bash_in(tmp_path) as (rt, bash):
        started = await run(bash, f"exec -a {marker} sleep 30", run_in_background=True)
        assert not started.is_error, started.content
        await until(lambda: bool(with_marker(f"{marker}\0")))
        (pid,) = with_marker(f"{marker}\0")  # the sleep itself: its argv[0]
        status = read(pathlib.Path(f"/proc/{pid}/status"))
        uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
        caps = next(line for line in status.splitlines() if line.startswith("CapEff:"))
        await rt.shell.kill_owned("A")
    assert "0" not in uids.split()[1:]
    assert int(caps.split()[1], 16) == 0


async def test_remounting_the_root_writable_fails(tmp_path: pathlib.Path) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(
            bash,
            "mount -o remount,rw / 2>/dev/null && touch /escaped; "
            "unshare -rm sh -c 'mount -o remount,rw / && touch /escaped' 2>/dev/null; "
            "unshare -rm sh -c 'mount -o remount,rw,bind / / && touch /escaped' 2>/dev/null; "
            "echo done",
        )
    assert "done" in result.content
    assert not exists(pathlib.Path("/escaped"))


async def test_unmounting_proc_does_not_show_the_hosts_processes(tmp_path: pathlib.Path) -> None:
    me = f"/proc/{os.getpid()}/cmdline"
    async with bash_in(tmp_path) as (_, bash):
        result = await run(
            bash,
            f"cat {me} 2>/dev/null; unshare -rm sh -c 'umount -l /proc; cat {me}' 2>/dev/null; "
            "ls /proc | grep -c '^[0-9]'",
        )
    assert "pytest" not in result.content
    assert int(result.content.split()[-1]) < 20  # its own few, not the host's


async def test_mounting_a_cgroup_for_its_release_agent_fails(tmp_path: pathlib.Path) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(
            bash,
            "mkdir -p /tmp/cg; unshare -rm sh -c 'mount -t cgroup -o memory cg /tmp/cg "
            "&& echo MOUNTED'; mount -t cgroup -o memory cg /tmp/cg && echo MOUNTED; echo done",
        )
    assert "MOUNTED" not in result.content


async def test_making_a_device_node_fails(tmp_path: pathlib.Path) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, "mknod disk b 8 0 && echo MADE; mknod /tmp/d b 8 0 && echo MADE")
    assert "MADE" not in result.content
    assert not exists(tmp_path / "disk")


async def test_writing_sys_fails(tmp_path: pathlib.Path) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(
            bash, "echo 1 > /sys/kernel/mm/ksm/run && echo WROTE; "
            "echo c > /proc/sysrq-trigger && echo WROTE; echo done"
        )  # fmt: skip
    assert "WROTE" not in result.content


async def test_a_setuid_program_grants_nothing(tmp_path: pathlib.Path) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(
            bash,
            "for p in su mount umount newuidmap passwd chsh; do "
            '  f=$(command -v $p) && [ -u "$f" ] && echo SETUID-$p; done; '
            "grep NoNewPrivs /proc/self/status; "
            "mount -t tmpfs none /mnt 2>/dev/null && echo MOUNTED; echo done",
        )
    assert "NoNewPrivs:\t1" in result.content  # a setuid bit cannot raise a privilege
    assert "MOUNTED" not in result.content


async def test_hard_and_symbolic_links_to_root_files_read_nothing(tmp_path: pathlib.Path) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(
            bash, "ln /etc/shadow hard 2>/dev/null; ln -s /etc/shadow soft; cat hard soft"
        )
    assert "root:" not in result.content


async def test_pid_1_cannot_be_traced_or_read(tmp_path: pathlib.Path) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(
            bash,
            "ls /proc/1/root/ >/dev/null 2>&1 && echo ROOT-OF-1; "
            "cat /proc/1/environ >/dev/null 2>&1 && echo ENVIRON-OF-1; "
            "kill -STOP 1 2>/dev/null && echo STOPPED-1; echo done",
        )
    assert "ENVIRON-OF-1" not in result.content
    assert "STOPPED-1" not in result.content


async def test_the_terminal_cannot_be_pushed_into(tmp_path: pathlib.Path) -> None:
    # TIOCSTI: typing into the server's terminal. A command has no terminal at all.
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, "exec 3</dev/tty && echo HAS-TTY; tty; echo done")
    assert "HAS-TTY" not in result.content


async def test_a_setuid_or_setgid_bit_cannot_be_set(tmp_path: pathlib.Path) -> None:
    # A root server's command owns files that are root's on disk: a setuid bit on one would
    # give root to whoever runs it on the host (found by a red team, D493).
    async with bash_in(tmp_path) as (_, bash):
        await run(
            bash,
            "cp /usr/bin/id x; chmod 4755 x; chmod u+s x; chmod g+s x; "
            f"{PYTHON} -c \"import os; os.chmod('x', 0o6755)\"; "
            "install -m 4755 /usr/bin/id y; mkdir d; chmod 2775 d",
        )
    for name in ("x", "y", "d"):
        assert stat_mode(tmp_path / name) & 0o6000 == 0, name


async def test_the_servers_keyring_is_out_of_reach(tmp_path: pathlib.Path) -> None:
    probe = (
        "import ctypes, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "nr = {'x86_64': 250, 'aarch64': 219}.get(__import__('platform').machine())\n"
        "# KEYCTL_GET_KEYRING_ID of the session keyring (-3), creating none\n"
        "print('KEYRING', libc.syscall(nr, 0, -3, 0), ctypes.get_errno())\n"
    )
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, f"{PYTHON} -c {shlex.quote(probe)}")
    assert "KEYRING -1 1" in result.content, result.content  # EPERM


async def test_a_hidden_path_cannot_be_renamed_into_sight(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The working directory is HOME: `mv ~/.config aside`, then read `gh`'s token under its
    # new name in the next command (found by a red team, D493).
    (tmp_path / ".config" / "gh").mkdir(parents=True)
    (tmp_path / ".config" / "gh" / "hosts.yml").write_text("GH-TOKEN")
    monkeypatch.setenv("HOME", str(tmp_path))
    async with bash_in(tmp_path) as (_, bash):
        await run(bash, "mv .config moved; mv .config/gh .config/g2; rm -rf .config/gh")
        result = await run(bash, "cat moved/gh/hosts.yml .config/g2/hosts.yml .config/gh/*")
    assert "GH-TOKEN" not in result.content
    assert read(tmp_path / ".config" / "gh" / "hosts.yml") == "GH-TOKEN"


# -- HOME ----------------------------------------------------------------------------------


@pytest.fixture
def home(outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A HOME outside the root holding the usual credential files and a .gitconfig."""
    for name in CREDENTIALS:
        path = outside / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"CREDENTIAL {name}")
    (outside / ".gitconfig").write_text("[user]\n\tname = tester\n")
    (outside / ".local" / "bin").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(outside))
    return outside


@pytest.mark.parametrize("name", CREDENTIALS)
async def test_a_credential_file_in_home_is_out_of_sight(
    tmp_path: pathlib.Path, home: pathlib.Path, name: str
) -> None:
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, f"cat ~/{name}; ls -A ~")
    assert "CREDENTIAL" not in result.content


async def test_home_shows_only_what_the_policy_names_and_read_only(
    tmp_path: pathlib.Path, home: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{home}/.local/bin:{os.environ['PATH']}")
    policy = SandboxPolicy(home=("~/.gitconfig", "~/.ssh/id_ed25519"))
    async with bash_in(tmp_path, policy) as (_, bash):
        result = await run(
            bash,
            "cat ~/.gitconfig; echo x >> ~/.gitconfig || echo REFUSED; cat ~/.ssh/id_ed25519; "
            "ls -d ~/.local/bin && touch ~/.local/bin/planted || echo BIN-REFUSED; "
            "touch ~/scratch && echo HOME-WRITABLE",
        )
    assert "name = tester" in result.content  # named: shown
    assert "REFUSED" in result.content  # but read-only
    assert "CREDENTIAL" not in result.content  # a secret stays hidden even when named
    assert "BIN-REFUSED" in result.content  # a PATH directory is shown read-only
    assert "HOME-WRITABLE" in result.content  # the private HOME is the command's
    assert read(home / ".gitconfig") == "[user]\n\tname = tester\n"
    assert not exists(home / ".local" / "bin" / "planted")
    assert not exists(home / "scratch")


# -- sessions share nothing ----------------------------------------------------------------


async def test_sysv_ipc_is_neither_shared_between_sessions_nor_left_behind(
    tmp_path: pathlib.Path,
) -> None:
    async with bash_in(tmp_path) as (rt, bash):
        held = await run(
            bash, "ipcmk -M 4096 && ipcmk -Q && touch made && sleep 30", run_in_background=True
        )
        assert not held.is_error
        await until(lambda: exists(tmp_path / "made"))
        other = await run(bash, "ipcs -m -q | grep -c '^0x'", caller="B")
        await rt.shell.kill_owned("A")
        left = await run(bash, "ipcmk -M 4096 >/dev/null; true", caller="A")
        after = await run(bash, "ipcs -m | grep -c '^0x'", caller="A")
    assert other.content.split()[0] == "0"
    assert not left.is_error
    assert after.content.split()[0] == "0"


async def test_another_sessions_spill_files_are_out_of_sight_whatever_tmpdir_is(
    outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TMPDIR above the working directory, and not under /tmp (which every command sees as
    # a private tmpfs): the spill roots lie in the directory that holds the root.
    tmp_path = outside
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    big = f"{PYTHON} -c \"print('SPILLED-' * 40000)\""
    async with bash_in(root) as (_, bash):
        spilled = await run(bash, big, caller="A")
        assert "trio-agents-spill-" in spilled.content
        peek = await run(
            bash, f"ls -R {tmp_path}; cat {tmp_path}/trio-agents-spill-*/*/* 2>&1 | head -c 300",
            caller="B",
        )  # fmt: skip
    assert "SPILLED-" not in peek.content


async def test_thousands_of_spill_roots_left_in_tmp_do_not_stop_a_command(
    tmp_path: pathlib.Path,
) -> None:
    # Servers killed with SIGKILL leave their spill roots in /tmp. A command rooted under
    # /tmp sees a private /tmp, so none of them is hidden one by one: bwrap refused more
    # than 9,000 arguments once some 4,500 were there (D519).
    assert tempfile.gettempdir() == "/tmp"
    left = [f"/tmp/trio-agents-spill-left-{uuid.uuid4().hex[:8]}-{n}" for n in range(4600)]
    try:
        for path in left:
            os.mkdir(path, 0o700)
        async with bash_in(tmp_path) as (_, bash):
            result = await run(
                bash, "ls -d /tmp/trio-agents-spill-left-* 2>/dev/null | wc -l; echo ok"
            )
    finally:
        for path in left:
            os.rmdir(path)
    assert not result.is_error, result.content
    assert result.content.split()[:2] == ["0", "ok"], result.content


async def test_host_processes_and_their_command_lines_are_out_of_sight(
    tmp_path: pathlib.Path,
) -> None:
    marker = f"host-secret-{uuid.uuid4().hex[:8]}"
    host = await trio.lowlevel.open_process(["bash", "-c", f"exec -a {marker} sleep 30"])
    try:
        async with bash_in(tmp_path) as (_, bash):
            result = await run(
                bash, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; ps -e -o args"
            )
    finally:
        host.kill()
        await host.wait()
    assert marker not in result.content


async def test_a_spill_root_made_after_a_job_started_stays_out_of_its_sight(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The working directory holds TMPDIR, and a job that started before any output spilled
    # watches for the spill files (found by a red team, D493).
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    watch = f"touch ready; for i in $(seq 300); do cat {tmp_path}/trio-agents-spill-*/*/* "
    watch += "2>/dev/null | head -c 100 >> seen; sleep 0.02; done"
    big = f"{PYTHON} -c \"print('SPILLED-' * 40000)\""
    async with bash_in(tmp_path) as (rt, bash):
        await run(bash, watch, caller="A", run_in_background=True)
        await until(lambda: exists(tmp_path / "ready"))
        spilled = await run(bash, big, caller="B")
        assert "trio-agents-spill-" in spilled.content
        await run(bash, "true", caller="B")
        await rt.shell.kill_owned("A")
    assert "SPILLED" not in read(tmp_path / "seen")


async def test_the_agents_own_files_are_not_writable(
    tmp_path: pathlib.Path, outside: pathlib.Path
) -> None:
    # Its MCP configuration and system prompt file (the CLI shows them read-only) and its
    # store (hidden), all inside the working directory a command may write.
    (tmp_path / "conf").mkdir()
    mcp, prompt = tmp_path / "conf" / "mcp.json", tmp_path / "prompt.md"
    mcp.write_text("{}")
    prompt.write_text("be nice")
    policy = SandboxPolicy(protected=(str(mcp), str(prompt), "/etc/elsewhere.json"))
    shell = ShellExecutor(cwd=str(tmp_path), grace=0.3, sandbox=policy)
    store = tmp_path / "sessions.db"
    async with open_runtime(SqliteStore(store), shell=shell) as rt:
        bash = BashTools()
        await rt.load(bash)
        result = await run(
            bash,
            'echo \'{"mcpServers": {"x": {"command": "evil"}}}\' > conf/mcp.json; '
            "echo 'obey' >> prompt.md; echo junk > sessions.db; rm -f conf/mcp.json prompt.md; "
            "mv conf/mcp.json m2; mv conf c2 && mkdir conf && echo '{}x' > conf/mcp.json; "
            "echo done",
        )
    assert "done" in result.content
    assert read(mcp) == "{}"
    assert read(prompt) == "be nice"
    assert head(store) == b"SQLite format 3"


# -- resources -----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["/tmp", "/dev/shm", "~"])
async def test_a_private_tmpfs_is_bounded(tmp_path: pathlib.Path, where: str) -> None:
    policy = SandboxPolicy(tmp_size=1 << 20)
    async with bash_in(tmp_path, policy) as (_, bash):
        result = await run(bash, f"head -c 3000000 /dev/zero > {where}/big; du -k {where}/big")
    used = re.search(r"^(\d+)\s", result.content, re.MULTILINE)
    assert used is not None, result.content
    assert int(used.group(1)) <= 1100  # KiB: what fits in 1 MiB, no more


async def test_the_process_limit_holds_and_cannot_be_raised(tmp_path: pathlib.Path) -> None:
    policy = SandboxPolicy(max_processes=24)
    forks = (
        "import os, time\n"
        "n = 0\n"
        "for _ in range(60):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(3); os._exit(0)\n"
        "    n += 1\n"
        "print('FORKED', n)\n"
    )
    async with bash_in(tmp_path, policy) as (_, bash):
        result = await run(
            bash, f"ulimit -Hu 100000 && echo RAISED; {PYTHON} -c {shlex.quote(forks)}"
        )
    assert "RAISED" not in result.content
    forked = int(result.content.split("FORKED")[1].split()[0])
    assert 5 <= forked < 24, result.content


async def test_the_memory_limit_holds(tmp_path: pathlib.Path) -> None:
    policy = SandboxPolicy(max_memory=256 << 20)
    grab = "b = bytearray(1 << 30); print('GOT', len(b))"
    async with bash_in(tmp_path, policy) as (_, bash):
        result = await run(bash, f"ulimit -Hd unlimited && echo RAISED; {PYTHON} -c {grab!r}")
    assert "RAISED" not in result.content
    assert "GOT" not in result.content
    assert "MemoryError" in result.content


async def test_the_defaults_bound_tmp_processes_and_memory() -> None:
    policy = SandboxPolicy()
    assert policy.tmp_size == GIB
    assert policy.max_processes == 1024
    assert policy.max_memory == 8 * GIB


# -- what outlives a command ---------------------------------------------------------------


async def test_nothing_a_command_starts_outlives_it(tmp_path: pathlib.Path) -> None:
    marker = f"outlive-{uuid.uuid4().hex[:8]}"
    async with bash_in(tmp_path) as (_, bash):
        await run(
            bash,
            f"setsid -f bash -c 'exec -a {marker} sleep 60'; "
            f"nohup bash -c 'exec -a {marker} sleep 60' >/dev/null 2>&1 & disown; "
            f"{PYTHON} -c \"import os; os.fork() or os.setsid() or os.execvp('bash', "
            f"['bash', '-c', 'exec -a {marker} sleep 60'])\"; echo started",
        )
        alive = with_marker(marker)
    assert alive == []


# -- the network ----------------------------------------------------------------------------


@contextlib.contextmanager
def host_services() -> Generator[tuple[int, str], None, None]:
    """A TCP server on this host's loopback and an abstract Unix socket: what a command must
    not reach (D494). Yields the port and the abstract name."""
    name = f"trio-agents-escape-{uuid.uuid4().hex[:8]}"
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as abstract,
    ):
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        abstract.bind(f"\0{name}")
        abstract.listen()
        yield tcp.getsockname()[1], name


def reach(port: int, name: str) -> str:
    """A command that tries the host's services every way it may know them."""
    probe = (
        "import socket\n"
        f"for family, address in ((socket.AF_INET, ('127.0.0.1', {port})), "
        f"(socket.AF_INET, ('10.0.2.2', {port})), (socket.AF_UNIX, '\\0{name}')):\n"
        "    s = socket.socket(family)\n"
        "    s.settimeout(3)\n"
        "    try:\n"
        "        s.connect(address); print('CONNECTED', address)\n"
        "    except OSError as e:\n"
        "        print('REFUSED', e)\n"
    )
    return f"{PYTHON} -c {shlex.quote(probe)}"


@pytest.mark.parametrize("network", [True, False])
async def test_host_loopback_and_abstract_sockets_are_out_of_reach(
    tmp_path: pathlib.Path, network: bool
) -> None:
    # D494: by default a network of its own (slirp4netns gives it the way out), and none at
    # all with network=False; the host's loopback is never the command's.
    with host_services() as (port, name):
        async with bash_in(tmp_path, SandboxPolicy(network=network)) as (_, bash):
            result = await run(bash, reach(port, name))
    assert "CONNECTED" not in result.content
    assert result.content.count("REFUSED") == 3, result.content


async def test_an_abstract_socket_of_one_session_is_out_of_anothers_reach(
    tmp_path: pathlib.Path,
) -> None:
    name = f"trio-agents-escape-{uuid.uuid4().hex[:8]}"
    serve = (
        "import socket, time\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.bind('\\0{name}'); s.listen()\n"
        "open('listening', 'w').close()\n"
        "time.sleep(30)\n"
    )
    connect = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect('\\0{name}'); print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('REFUSED', e)\n"
    )
    async with bash_in(tmp_path) as (rt, bash):
        await run(bash, f"{PYTHON} -c {shlex.quote(serve)}", caller="A", run_in_background=True)
        await until(lambda: exists(tmp_path / "listening"))
        own = await run(bash, f"{PYTHON} -c {shlex.quote(connect)}", caller="A")
        other = await run(bash, f"{PYTHON} -c {shlex.quote(connect)}", caller="B")
        await rt.shell.kill_owned("A")
    assert "REFUSED" in other.content, other.content
    assert "CONNECTED" in own.content or "REFUSED" in own.content  # its own: either way


async def test_a_command_has_a_way_out_and_leaves_no_stack_behind(tmp_path: pathlib.Path) -> None:
    # The command's own interface and route out (an outside address is not a test's to
    # reach), and no slirp4netns left once the commands are done.
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, "cat /proc/net/route | awk '$2 == \"00000000\" {print $1}'")
        for _ in range(3):
            await run(bash, "true")
    assert result.content.split()[0] == "tap0", result.content
    assert slirps() == []


async def test_the_hosts_network_is_shared_only_when_asked(tmp_path: pathlib.Path) -> None:
    with host_services() as (port, name):
        policy = SandboxPolicy(host_network=True)
        async with bash_in(tmp_path, policy) as (_, bash):
            result = await run(bash, reach(port, name))
    assert "CONNECTED ('127.0.0.1'" in result.content


async def test_a_root_holding_a_mount_that_cannot_be_id_mapped_is_still_written(
    tmp_path: pathlib.Path,
) -> None:
    # `/` holds proc, sysfs and devtmpfs, which cannot be id-mapped: every command of a root
    # server started in `/` failed (EINVAL). Now the root's own mount is id-mapped and each
    # mount below it is brought on its own, as it is where it cannot be mapped.
    inner = tmp_path / "proc-here"
    inner.mkdir()
    await trio.run_process(["mount", "-t", "proc", "proc", str(inner)])
    try:
        async with bash_in(tmp_path) as (_, bash):
            result = await run(bash, "echo made > made; stat -c %u made; ls proc-here | grep -c .")
    finally:
        await trio.run_process(["umount", "-l", str(inner)])
    owner, entries = result.content.split()[:2]
    assert (tmp_path / "made").read_text() == "made\n", result.content
    assert (tmp_path / "made").stat().st_uid == 0  # written through the mapping, as root's
    assert owner == "0", result.content
    assert int(entries) > 0, result.content


async def test_a_root_server_started_in_the_root_directory_runs_its_commands_mapped() -> None:
    # `/` itself: a clone put over it is seen only by a process rooted in it.
    mark = pathlib.Path(tempfile.mkdtemp(prefix="trio-agents-slash-", dir="/var/tmp"))
    try:
        async with bash_in(pathlib.Path("/")) as (_, bash):
            result = await run(bash, f"id -u; echo made > {mark}/made")
        assert result.content.split()[0] == "0", result.content
        assert (mark / "made").read_text() == "made\n", result.content
        assert (mark / "made").stat().st_uid == 0
    finally:
        shutil.rmtree(mark)


def test_a_tun_device_closed_to_the_user_means_the_hosts_network_said_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # slirp4netns opens /dev/net/tun inside the sandbox's user namespace as the server's
    # user; where the device is 0600 (some CI images) it failed every command. Now such a
    # host shares its network, as one without slirp4netns does, and the line says why.
    monkeypatch.setattr(os, "geteuid", lambda: 65534)

    def closed_tun(path: str, mode: int) -> bool:
        return path != _network.TUN

    def open_all(path: str, mode: int) -> bool:
        return True

    monkeypatch.setattr(os, "access", closed_tun)
    because = _network.no_network_because()
    assert _network.slirp4netns() is None
    assert because.startswith("/dev/net/tun is closed to this user"), because
    assert "chmod 0666 /dev/net/tun" in because
    monkeypatch.setattr(os, "access", open_all)
    assert _network.no_network_because() == ""


def slirps() -> list[int]:
    """This process's slirp4netns children still alive."""
    me = str(os.getpid())
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if "(slirp4netns)" in stat and fields[1] == me and fields[0] not in "ZX":
                found.append(int(entry))
    return found


async def test_bwrap_is_forked_from_the_thread_trio_runs_on(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # D488: bwrap's --die-with-parent follows the thread that forked it. Forked in one of
    # trio's worker threads, every command died with SIGKILL once that thread had been idle
    # for 10 s (a background job, a long build). Seen from outside, it needs those 10 s of
    # real time; the cause is seen at once: which thread forks.
    import threading

    forked_in: list[int] = []
    real = subprocess.Popen

    def recording(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        argv = cast("list[object]", args[0] if args else kwargs.get("args"))
        if str(argv[0]).endswith("bwrap"):
            forked_in.append(threading.get_ident())
        return real(*args, **kwargs)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(subprocess, "Popen", recording)
    async with bash_in(tmp_path) as (_, bash):
        result = await run(bash, "echo ran")
    assert "ran" in result.content
    assert forked_in
    assert set(forked_in) == {threading.get_ident()}

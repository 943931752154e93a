"""Whether this machine can sandbox commands with bubblewrap, found out once per process, and
the argv of one sandboxed command.

The check runs bwrap once with the options every command gets (a PID namespace, the root
read-only, a fresh /proc): a missing executable, a kernel or container that refuses user or
PID namespaces, or a bwrap too old for an option all show up there, as bwrap's own words.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import trio

from .._errors import SandboxUnavailableError
from ._network import NetworkHandshake, SlirpHelper, no_network_because, slirp4netns
from ._sandbox_policy import (
    SandboxPolicy,
    bwrap_argv,
    expand_home,
    hidden_targets,
    path_homes,
)
from ._seccomp import program
from ._userns import idmapped_tree, make_userns, mount_in_private

__all__ = [
    "SandboxVerdict",
    "SandboxedCommand",
    "check_sandbox",
    "fallback",
    "maps_root",
    "mark_warned",
    "probe",
    "probe_now",
    "root_mapping",
    "sandboxed_command",
    "sandboxed_status",
    "spill_roots",
    "unavailable",
]

logger = logging.getLogger("trio_agents.shell")

PROBE_TIMEOUT = 10.0  # seconds; bwrap starts in milliseconds, a hung one is a refusal


@dataclass(frozen=True, slots=True)
class SandboxVerdict:
    """`bwrap` is the executable to use, or None with `reason` saying what is missing."""

    bwrap: str | None
    reason: str


_verdicts: dict[str, SandboxVerdict] = {}  # by the bwrap asked for: one probe per process
_warned = False


async def probe(bwrap: str | None) -> SandboxVerdict:
    """`probe_now` in a worker thread, unless its verdict is cached. A checkpoint."""
    cached = _verdicts.get(bwrap or "")
    if cached is not None:
        await trio.lowlevel.checkpoint()
        return cached
    return await trio.to_thread.run_sync(probe_now, bwrap)


def probe_now(bwrap: str | None) -> SandboxVerdict:
    """Run bwrap once with the sandbox's options around `true`, blocking (for at most
    PROBE_TIMEOUT real seconds, whatever clock trio runs on); cached per executable, for the
    life of the process."""
    key = bwrap or ""
    cached = _verdicts.get(key)
    if cached is not None:
        return cached
    found = shutil.which(bwrap or "bwrap")
    if found is None:
        verdict = SandboxVerdict(None, f"{bwrap or 'bwrap'} (bubblewrap) is not installed")
    else:
        verdict = _try(found)
    return _verdicts.setdefault(key, verdict)


def _try(found: str) -> SandboxVerdict:
    """Run one command the way every command will run: as root, mapped to an unprivileged
    id in an id-mapped directory (D485), else as root without capabilities (said once)."""
    with tempfile.TemporaryDirectory(prefix="trio-agents-probe-") as where:
        try:
            # The network handshake needs trio; whether slirp4netns works is found out by
            # the first command that asks for it (and said in its error result).
            policy = SandboxPolicy(host_network=True)
            prepared = sandboxed_command(found, policy, ["true"], where, probe=True)
        except OSError as exc:
            return SandboxVerdict(None, f"{found} cannot make a sandbox here: {exc}")
        try:
            done = subprocess.run(
                prepared.argv, stdin=subprocess.DEVNULL, capture_output=True,
                timeout=PROBE_TIMEOUT, check=False, preexec_fn=prepared.preexec,
                pass_fds=prepared.pass_fds,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            return SandboxVerdict(None, f"{found} could not be run ({exc})")
        finally:
            prepared.close()
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    if done.returncode == 0:
        return SandboxVerdict(found, "")
    why = said[-1] if said else f"exit status {done.returncode}"
    return SandboxVerdict(None, f"{found} cannot make a sandbox here: {why}")


async def check_sandbox(policy: SandboxPolicy) -> str | None:
    """The bwrap executable to sandbox commands with, or None when the policy allows running
    them unsandboxed and the machine cannot sandbox (logged once per process). A checkpoint.

    Raises SandboxUnavailableError when the machine cannot sandbox and the policy does not
    allow the fallback.
    """
    global _warned
    verdict = await probe(policy.bwrap)
    if verdict.bwrap is not None:
        if _root_mapping is not None and not _warned:
            _warned = True
            logger.warning("%s", _root_mapping)
        return verdict.bwrap
    if not policy.allow_unsandboxed:
        raise SandboxUnavailableError(unavailable(verdict.reason))
    if not _warned:
        _warned = True
        logger.warning("%s", fallback(verdict.reason))
    return None


def unavailable(reason: str) -> str:
    """The one line that says the machine cannot sandbox, and what to do."""
    return (
        f"cannot sandbox shell commands: {reason}; install bubblewrap "
        "(e.g. `apt-get install bubblewrap`), or allow unsandboxed commands "
        "(--allow-unsandboxed, or SandboxPolicy(allow_unsandboxed=True))"
    )


def fallback(reason: str) -> str:
    """The one line that says commands run unsandboxed, and why."""
    return f"shell commands run WITHOUT a sandbox: {reason}"


def mark_warned() -> None:
    """The fallback has been announced (by the command line, on stderr): do not log it."""
    global _warned
    _warned = True


SPILL_PREFIX = "trio-agents-spill-"


def spill_roots(root: str, shown: Iterable[str] = ()) -> tuple[str, ...]:
    """What to hide so that no command sees any spilled output, whatever TMPDIR is, for a
    command that may write `root` and is shown the paths `shown` (binds made after the
    private /tmp): this process's temporary directory when TMPDIR puts it outside /tmp, and
    when that directory holds `root` (so it cannot be hidden whole, D131) and the command
    would see it, every spill root in it, this server's and any other's (D487). /tmp is a
    tmpfs of the command's own: what is in the host's stays out of sight unless the
    command is shown /tmp itself (D519)."""
    parent = os.path.realpath(tempfile.gettempdir())
    paths = [] if parent == "/tmp" else [parent]
    # A root of / is bound before the private /tmp, which then covers the host's.
    if parent == "/tmp" and root != "/tmp" and not any(p in ("/", "/tmp") for p in shown):
        return ()
    if root == parent or root.startswith(parent.rstrip("/") + "/"):
        try:
            with os.scandir(parent) as entries:
                paths += [e.path for e in entries if e.name.startswith(SPILL_PREFIX)]
        except OSError:
            pass
    return tuple(paths)


_SIGNALS = frozenset(int(s) for s in signal.Signals)


def sandboxed_status(code: int) -> int:
    """A sandboxed command's returncode as if it were bash's own: bwrap reports a command
    killed by signal N as exit status 128 + N (as a shell does), -N again here."""
    return 128 - code if code > 128 and code - 128 in _SIGNALS else code


def _kinds(paths: Iterable[str]) -> dict[str, bool]:
    """The paths that exist, each mapped to whether it is a directory."""
    kinds: dict[str, bool] = {}
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # missing (or unreadable even to us): nothing to hide
        kinds[path] = stat.S_ISDIR(mode)
    return kinds


@dataclass(slots=True)
class SandboxedCommand:
    """What spawns one sandboxed command: its argv, and for a root server's the id-mapped
    clones of its directories and the function that attaches them between fork and exec.
    `close()` once it is spawned (or not)."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    preexec: Callable[[], None] | None = None
    owned: tuple[int, ...] = ()
    network: NetworkHandshake | None = None
    userns: bool = False  # bwrap makes a user namespace of its own (run unprivileged)
    helper: SlirpHelper | None = None  # the command's network, once it is set up

    def close(self) -> None:
        """Close what only the child needed (the clones, the child's ends of the pipes)."""
        owned, self.owned = self.owned, ()
        for fd in owned:
            os.close(fd)


_userns: int | None = None  # the namespace a root server's mounts are id-mapped by (D485)
_root_mapping: str | None = None  # why a root server's commands cannot be mapped, once known


def _mapping_namespace() -> int:
    """The user namespace that id-maps a root server's mounts, made on first use (about
    20 ms: a fork), kept for the life of the process. Raises OSError."""
    global _userns
    if _userns is None:
        _userns = make_userns()
    return _userns


def sandboxed_command(
    bwrap: str,
    policy: SandboxPolicy,
    command: Sequence[str],
    workdir: str,
    *,
    root: str | None = None,
    hidden: Iterable[str] = (),
    exposed: Iterable[str] = (),
    probe: bool = False,
    netns: int | None = None,
) -> SandboxedCommand:
    """How to spawn one command: the policy's hidden paths, plus `hidden`, as they are on
    disk now (a secret created later is hidden from the next command), the home paths the
    policy shows that exist, and as root, the command's writable paths id-mapped to its
    unprivileged id (D485). Raises OSError when a root server's command cannot be mapped:
    a file system that cannot be id-mapped under the working directory, say."""
    global _root_mapping
    home = os.environ.get("HOME") or None
    home = os.path.normpath(home) if home and os.path.isabs(home) else None
    targets = hidden_targets(policy, hidden, home)
    # Absolute: bwrap would take a relative one from the workdir it is started in.
    workdir = os.path.abspath(workdir)
    root = os.path.abspath(root) if root is not None else workdir
    shown = [p for p in (expand_home(h, home) for h in policy.home) if p is not None]
    if policy.home_from_path:
        shown += path_homes(os.environ.get("PATH", ""), home)
    shown = list(dict.fromkeys(shown))
    home_shown = [p for p in shown if os.path.lexists(p)]
    private_home = home if home is not None and os.path.isdir(home) else None
    exposed = tuple(exposed)
    as_root = _as_root()
    userns: int | None = None
    clones: list[tuple[int, str]] = []
    if as_root and (probe or _root_mapping is None):
        try:
            userns = _mapping_namespace()
            writable = dict.fromkeys((root, *policy.writable))
            for path in writable:
                clones += idmapped_tree(path, userns)
            for path in (*policy.read_only, *home_shown, *exposed):
                clones += idmapped_tree(path, userns, read_only=True)
        except OSError as exc:
            for fd, _ in clones:
                os.close(fd)
            if probe:
                # Root's commands then run as root, without capabilities, as before D485;
                # said once, by the caller of the probe.
                _root_mapping = (
                    f"commands run as root: cannot map them to an unprivileged id ({exc})"
                )
                clones, userns = [], None
            else:
                raise OSError(
                    exc.errno,
                    f"cannot give the command its directories under an unprivileged id: {exc}",
                ) from None
    owned = [fd for fd, _ in clones]
    seccomp = _filter()
    if seccomp is not None:
        owned.append(seccomp)
    handshake: NetworkHandshake | None = None
    child_ends: tuple[int, int] | None = None
    resolv: int | None = None
    own_network = policy.network and not policy.host_network
    slirp = slirp4netns() if own_network and netns is None else None
    if own_network and netns is not None and userns is not None:
        resolv = _resolv()  # the session's network, entered between fork and exec
        if resolv is not None:
            owned.append(resolv)
    elif slirp is not None:
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        for fd in (info_r, block_w):
            os.set_inheritable(fd, False)
        handshake = NetworkHandshake(info_r, block_w, block_r, slirp)
        child_ends = (info_w, block_r)
        owned += child_ends
        resolv = _resolv()
        if resolv is not None:
            owned.append(resolv)
    elif own_network and netns is None:
        _say_once(
            "commands share this host's network (loopback services included): "
            + no_network_because()
        )
    argv = bwrap_argv(
        bwrap,
        policy,
        command=command,
        workdir=workdir,
        root=root,
        hidden=_kinds(targets),
        exposed=exposed,
        home=private_home,
        home_shown=home_shown,
        as_root=as_root,
        mapped=userns is not None,
        tools=_tools(),
        seccomp=seccomp,
        network=child_ends,
        resolv=resolv,
    )
    passed = [fd for fd in (seccomp, resolv) if fd is not None] + list(child_ends or ())
    return SandboxedCommand(
        argv,
        pass_fds=tuple(passed),
        preexec=mount_in_private(clones, netns) if userns is not None else None,
        owned=tuple(owned),
        network=handshake,
        userns=not as_root,
    )


_said: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _said:
        _said.add(line)
        logger.warning("%s", line)


def _resolv() -> int | None:
    """A resolv.conf for a command with a network of its own, when the host's names only
    loopback servers (systemd-resolved's 127.0.0.53, a local dnsmasq): those are not in
    its reach, slirp4netns' forwarder (10.0.2.3) is. None: the host's serves as it is."""
    try:
        with open("/etc/resolv.conf", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    servers = [ln.split()[1] for ln in lines if ln.startswith("nameserver") and len(ln.split()) > 1]
    if servers and not all(a.startswith("127.") or a == "::1" for a in servers):
        return None
    kept = [ln for ln in lines if not ln.startswith("nameserver")]
    fd = os.memfd_create("trio-agents-resolv", os.MFD_CLOEXEC)
    os.write(fd, "\n".join(["nameserver 10.0.2.3", *kept, ""]).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _filter() -> int | None:
    """A new descriptor holding the seccomp filter, for one command's bwrap to read (each
    its own: a shared one would be read to its end by the first); None where the
    architecture has none."""
    code = program()
    if code is None:
        return None
    fd = os.memfd_create("trio-agents-seccomp", os.MFD_CLOEXEC)
    os.write(fd, code)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


_found_tools: dict[str, str] = {}


def _tools() -> dict[str, str]:
    """The absolute paths of what runs before each command in its sandbox, looked up once on
    this host's PATH (a name not found stays a name, and the command fails saying so)."""
    if not _found_tools:
        for name in ("bash", "chown", "setpriv", "unshare"):
            found = shutil.which(name)
            _found_tools[name] = os.path.realpath(found) if found else name
    return _found_tools


def maps_root() -> bool:
    """Whether this process's commands run mapped to an unprivileged id (it runs as root,
    and the probe found id-mapped mounts work)."""
    return _as_root() and _root_mapping is None


def root_mapping() -> str | None:
    """Why a root server's commands run as root (known after the probe), or None."""
    return _root_mapping


def _as_root() -> bool:
    return os.geteuid() == 0

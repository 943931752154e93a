"""A sandboxed command's own network: a network namespace of its own (bwrap's
`--unshare-net`), given outbound access by slirp4netns, a user-mode TCP/IP stack, so that
the host's loopback services and abstract Unix sockets are out of its reach (D494).

The handshake, per command: bwrap is started with `--info-fd` (it writes the pid of its
sandbox's first process there) and `--block-fd` (that process waits for a byte on it after
its own set-up, before the command runs). Once that process is waiting, its namespaces are
complete (bwrap's loopback set-up races with slirp4netns' otherwise), slirp4netns attaches
a `tap0` device to them and says it is ready, and the byte releases the command.

slirp4netns leads a process group of its own and is given the read end of a pipe whose write
end only this process holds (`--exit-fd`): it exits when that end is closed, by `release`
once the command's group is dead, or by the kernel when this process dies, SIGKILL
included. It is also killed outright if it has not gone within a grace.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import threading
from dataclasses import dataclass

import trio

from ._userns import netns_in_this_thread

__all__ = [
    "NetworkHandshake",
    "SessionNetwork",
    "SlirpHelper",
    "attach",
    "make_netns",
    "no_network_because",
    "session_network",
    "slirp4netns",
]

_READ: dict[str, int] = {"x86_64": 0, "amd64": 0, "aarch64": 63, "arm64": 63}
SETUP_BOUND = 10.0  # seconds bwrap's set-up and slirp4netns' may take on two loaded cores
POLL = 0.001  # seconds between looks at /proc/PID/syscall


TUN = "/dev/net/tun"


def slirp4netns() -> str | None:
    """The slirp4netns executable on PATH, or None when there is none or it could not work
    here (`no_network_because` says why)."""
    found = shutil.which("slirp4netns")
    return None if found is None or _tun_closed() else found


def no_network_because() -> str:
    """Why commands cannot have a network of their own here, or "" when they can."""
    if shutil.which("slirp4netns") is None:
        return "slirp4netns is not installed (apt-get install slirp4netns)"
    return _tun_closed()


def _tun_closed() -> str:
    """Why the tun device is closed to this process's user, or "". slirp4netns opens it
    inside the sandbox's user namespace, as the user who started it: a host whose device is
    closed to that user (mode 0600) refuses it there; root opens it whatever its mode."""
    if os.geteuid() == 0 or os.access(TUN, os.R_OK | os.W_OK):
        return ""
    try:
        mode = f"mode {os.stat(TUN).st_mode & 0o777:04o}"
    except OSError:
        mode = "not there"
    return f"{TUN} is closed to this user ({mode}; `chmod 0666 {TUN}` opens it)"


@dataclass(slots=True)
class NetworkHandshake:
    """The parent's ends of the two pipes bwrap was given: it reads the sandbox's pid from
    `info` and writes the byte that releases the command to `block`; `block_child` is the
    descriptor number bwrap waits on, as bwrap sees it."""

    info: int
    block: int
    block_child: int
    slirp: str

    def close(self) -> None:
        for fd in (self.info, self.block):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.info = self.block = -1


@dataclass(slots=True)
class SlirpHelper:
    """The slirp4netns of one command, and the pipe end that keeps it alive."""

    process: trio.Process
    exit_w: int

    async def release(self, grace: float = 2.0) -> None:
        """Let it exit (close the pipe end), and reap it; SIGKILL it past `grace`. A
        checkpoint; shielded, so that it is never left half released."""
        with trio.CancelScope(shield=True):
            if self.exit_w >= 0:
                os.close(self.exit_w)
                self.exit_w = -1
            with trio.move_on_after(grace):
                await self.process.wait()
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()


def _setup_failed(why: str) -> OSError:
    """The command's network could not be set up; the command did not run. An OSError, as
    any other failure to start a command is, and its text is `why` alone."""
    return OSError(why)


async def _sandbox_pid(info: int) -> int:
    """The pid bwrap writes to its info descriptor (JSON), read to its end or to a whole
    object."""
    data = b""
    stream = trio.lowlevel.FdStream(info)
    try:
        while True:
            chunk = await stream.receive_some(4096)
            data += chunk
            try:
                pid = json.loads(data)["child-pid"]
            except ValueError:
                if not chunk:
                    raise _setup_failed(
                        f"bwrap said nothing of its sandbox ({data[:200]!r})"
                    ) from None
                continue
            if not isinstance(pid, int):
                raise _setup_failed(f"bwrap gave no pid ({data[:200]!r})")
            return pid
    finally:
        await stream.aclose()


async def _parked(pid: int, fd: int) -> None:
    """Wait until process `pid` blocks in read(fd): bwrap at its --block-fd, its set-up
    done. No event says so; /proc/PID/syscall does (a bounded poll)."""
    number = _READ.get(platform.machine())
    if number is None:
        raise _setup_failed(f"no network namespace on {platform.machine()} yet")
    want = f"{number} 0x{fd:x} "
    with trio.move_on_after(SETUP_BOUND):
        while not _in_syscall(pid, want):  # noqa: ASYNC110 - another process's state
            await trio.sleep(POLL)
        return
    raise _setup_failed(f"the sandbox was not set up within {SETUP_BOUND:g} s")


def _in_syscall(pid: int, want: str) -> bool:
    """Whether /proc/PID/syscall starts with `want` (procfs: never blocks)."""
    try:
        with open(f"/proc/{pid}/syscall") as handle:
            return handle.read().startswith(want)
    except OSError as exc:
        raise _setup_failed(f"the sandbox ended while it was set up ({exc})") from None


async def attach(handshake: NetworkHandshake, *, userns: bool) -> SlirpHelper:
    """Give the sandbox bwrap was started with `handshake` its network and release its
    command; the helper to `release` once the command's group is dead. `userns`: the
    sandbox has a user namespace of its own (bwrap run unprivileged), which slirp4netns must
    enter to configure its network. Raises an OSError (the caller kills the
    sandbox)."""
    pid = await _sandbox_pid(handshake.info)
    handshake.info = -1  # closed by _sandbox_pid's stream
    await _parked(pid, handshake.block_child)
    if not userns:
        helper = await _start_slirp(handshake.slirp, [str(pid)])
    else:
        # The user namespace that owns the sandbox's network namespace, which slirp4netns
        # must enter to join it: not the one its process is in, where bwrap makes a /dev
        # (it mounts devpts as root of a first namespace, then nests a second one).
        owner = _owning_userns(pid)
        try:
            target = [f"--userns-path=/proc/self/fd/{owner}", str(pid)]
            helper = await _start_slirp(handshake.slirp, target, keep=(owner,))
        finally:
            os.close(owner)
    os.write(handshake.block, b"x")  # the command runs now
    return helper


_NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1), linux/nsfs.h


def _owning_userns(pid: int) -> int:
    """A descriptor of the user namespace that owns process `pid`'s network namespace."""
    try:
        netns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            return fcntl.ioctl(netns, _NS_GET_USERNS)
        finally:
            os.close(netns)
    except OSError as exc:
        raise _setup_failed(f"cannot find the sandbox's user namespace ({exc})") from None


async def _start_slirp(slirp: str, target: list[str], keep: tuple[int, ...] = ()) -> SlirpHelper:
    """slirp4netns attached to `target` (its arguments naming the namespace; `keep`, the
    descriptors they name) and ready: the helper to release. Raises an OSError when it does
    not say it is ready."""
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    argv = [
        slirp,
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        f"--ready-fd={ready_w}",
        f"--exit-fd={exit_r}",
        *target,
        "tap0",
    ]
    try:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # it narrates every packet it forwards
            start_new_session=True,
            pass_fds=(ready_w, exit_r, *keep),
        )
    except BaseException:
        for fd in (ready_r, exit_w):
            os.close(fd)
        raise
    finally:
        os.close(ready_w)
        os.close(exit_r)
    helper = SlirpHelper(process, exit_w)
    try:
        stream = trio.lowlevel.FdStream(ready_r)
        try:
            with trio.move_on_after(SETUP_BOUND):
                if await stream.receive_some(1):
                    return helper
            raise _setup_failed(
                f"slirp4netns did not set up the network (status {process.returncode})"
            )
        finally:
            await stream.aclose()
    except BaseException:
        await helper.release()
        raise


_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def _loopback_up() -> None:  # pragma: no cover - runs in the forked child only
    """Bring `lo` up in the calling process's network namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b""))


async def make_netns() -> int:
    """A descriptor (close-on-exec) of a new network namespace with its loopback up. Needs
    root. Raises OSError. Made in a thread started for it, which ends with it (see
    `netns_in_this_thread`): about 3 ms, where a fork of this process took 10 to 20 ms. The
    wait is shielded: it is short, and a descriptor must not be lost to a cancellation."""
    done = trio.Event()
    token = trio.lowlevel.current_trio_token()
    made: list[int] = []
    failed: list[OSError] = []

    def work() -> None:
        try:
            made.append(netns_in_this_thread(_loopback_up))
        except OSError as exc:
            failed.append(exc)
        finally:
            token.run_sync_soon(done.set)

    threading.Thread(target=work, name="trio-agents netns", daemon=True).start()
    with trio.CancelScope(shield=True):
        await done.wait()
    if failed:
        raise failed[0]
    return made[0]


@dataclass(slots=True)
class SessionNetwork:
    """One owner's network namespace, shared by all its commands, and its slirp4netns
    (a root server's: its commands enter it between fork and exec, D494)."""

    netns: int
    helper: SlirpHelper

    async def release(self) -> None:
        """Stop its slirp4netns and let the namespace go. A checkpoint; shielded."""
        try:
            await self.helper.release()
        finally:
            if self.netns >= 0:
                os.close(self.netns)
                self.netns = -1


async def session_network(slirp: str) -> SessionNetwork:
    """A new network namespace with slirp4netns attached and ready. Raises
    an OSError."""
    netns = await make_netns()
    try:
        helper = await _start_slirp(slirp, ["--netns-type=path", f"/proc/{os.getpid()}/fd/{netns}"])
    except BaseException:
        os.close(netns)
        raise
    return SessionNetwork(netns, helper)

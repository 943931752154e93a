"""What a server run as root needs so that its commands do not run as root: id-mapped mounts
that give the command, run as an unprivileged id, the directories it may write (D485).
Linux only, through the new mount API (`open_tree`, `mount_setattr`, `move_mount`, kernel
5.12 or later); no trio import.

A mount is id-mapped through a user namespace; this one maps, for uids and gids alike,

    0 <-> UNPRIVILEGED (an id no one of the host has), and every other id to itself

so in the command's working directory and the other directories it may write, each an
id-mapped clone, what root owns on disk shows as the command's, and what the command
creates is written as root's. Everywhere else root's files are another user's to it:
`/etc/shadow` is closed, a root-owned 0600 file unreadable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import select
from collections.abc import Callable, Sequence
from typing import Final

from ._sandbox_policy import UNPRIVILEGED

__all__ = [
    "IdMapped",
    "idmapped_clone",
    "idmapped_tree",
    "make_userns",
    "mount_in_private",
    "mounts_below",
    "netns_in_this_thread",
]
_MAX_ID: Final = 4294967295  # (uid_t)-1 is never an id

_CLONE_NEWUSER: Final = 0x10000000
_CLONE_NEWNS: Final = 0x00020000
_CLONE_NEWNET: Final = 0x40000000
_MS_REC: Final = 0x4000
_MS_PRIVATE: Final = 0x40000
# The same numbers on every architecture: they came after the syscall tables were unified.
_SYS_OPEN_TREE: Final = 428
_SYS_MOVE_MOUNT: Final = 429
_SYS_MOUNT_SETATTR: Final = 442
_OPEN_TREE_CLONE: Final = 1
_OPEN_TREE_CLOEXEC: Final = os.O_CLOEXEC
_AT_FDCWD: Final = -100
_AT_EMPTY_PATH: Final = 0x1000
_AT_RECURSIVE: Final = 0x8000
_MOUNT_ATTR_RDONLY: Final = 0x1
_MOUNT_ATTR_IDMAP: Final = 0x00100000
_MOVE_MOUNT_F_EMPTY_PATH: Final = 0x4

_libc = ctypes.CDLL(None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _failed(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")


def id_map(unprivileged: int = UNPRIVILEGED) -> str:
    """The uid_map (and gid_map) text described above."""
    u = unprivileged
    return f"0 {u} 1\n1 1 {u - 1}\n{u} 0 1\n{u + 1} {u + 1} {_MAX_ID - u - 1}\n"


def netns_in_this_thread(setup: Callable[[], None]) -> int:
    """A descriptor (close-on-exec) of a new network namespace, made by the calling thread,
    which runs `setup` in it and goes back to its own (a network namespace is a thread's:
    the rest of the process never leaves its own). Call it from a thread that ends after
    it: one whose way back failed must run nothing else. Needs root. Raises OSError."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.unshare(_CLONE_NEWNET) != 0:
            raise _failed("cannot make a network namespace here")
        try:
            setup()
            return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            if _libc.setns(own, _CLONE_NEWNET) != 0:
                raise _failed("cannot return to this process's network namespace")
    finally:
        os.close(own)


def make_userns(unprivileged: int = UNPRIVILEGED) -> int:
    """A descriptor (close-on-exec) of a new user namespace with the mapping above. Needs
    root. A child process makes the namespace and waits while its maps are written, then
    exits: the descriptor keeps the namespace. Raises OSError."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only unshares and waits
        try:
            os.close(ready_r)
            os.close(go_w)
            ok = _libc.unshare(_CLONE_NEWUSER) == 0
            os.write(ready_w, b"1" if ok else b"0")
            os.read(go_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(go_r)
    try:
        select.select([ready_r], [], [], 10.0)
        if os.read(ready_r, 1) != b"1":
            raise OSError(0, "cannot make a user namespace (unshare(CLONE_NEWUSER) refused)")
        text = id_map(unprivileged)
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as handle:
                handle.write(text)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(go_w)  # lets the child exit
        os.waitpid(pid, 0)


def idmapped_clone(
    path: str, userns: int | None, *, read_only: bool = False, recursive: bool = True
) -> int:
    """A detached, id-mapped clone of the mount tree at `path` (a descriptor, close-on-exec),
    mapped through the namespace `userns` (None: not id-mapped); nothing is attached
    anywhere yet. `recursive=False` clones the mount at `path` without those below it.
    Raises OSError (e.g. EINVAL from a file system that cannot be id-mapped)."""
    deep = _AT_RECURSIVE if recursive else 0
    fd: int = _libc.syscall(
        _SYS_OPEN_TREE, _AT_FDCWD, os.fsencode(path), _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | deep
    )
    if fd < 0:
        raise _failed(f"cannot clone the mount at {path}")
    flags = (_MOUNT_ATTR_IDMAP if userns is not None else 0) | (
        _MOUNT_ATTR_RDONLY if read_only else 0
    )
    if not flags:
        return fd
    attr = _MountAttr(flags, 0, 0, userns or 0)
    done = _libc.syscall(
        _SYS_MOUNT_SETATTR, fd, b"", _AT_EMPTY_PATH | deep, ctypes.byref(attr), ctypes.sizeof(attr)
    )
    if done < 0:
        error = _failed(f"cannot id-map {path}")
        os.close(fd)
        raise error
    return fd


def idmapped_tree(path: str, userns: int, *, read_only: bool = False) -> list[IdMapped]:
    """The clones that give `path` id-mapped, in the order to attach them: one, or, where a
    mount below `path` cannot be id-mapped (proc, sysfs, devtmpfs below `/`), `path`'s own
    mount and each mount below it on its own: id-mapped where it can be, else as it is (the
    host's ids; the command writes there only what its unprivileged id may). Raises OSError."""
    try:
        return [(idmapped_clone(path, userns, read_only=read_only), path)]
    except OSError as exc:
        below = mounts_below(path)
        if exc.errno != errno.EINVAL or not below:
            raise
    clones: list[IdMapped] = []
    try:
        clones.append((idmapped_clone(path, userns, read_only=read_only, recursive=False), path))
        for mount in below:
            try:
                fd = idmapped_clone(mount, userns, read_only=read_only)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                fd = idmapped_clone(mount, None, read_only=read_only)
            clones.append((fd, mount))
    except BaseException:
        for fd, _ in clones:
            os.close(fd)
        raise
    return clones


def mounts_below(path: str, mountinfo: str | None = None) -> list[str]:
    """The mount points strictly below `path`, outermost only (each brings those below it),
    from /proc/self/mountinfo (or the text `mountinfo`)."""
    if mountinfo is None:
        with open("/proc/self/mountinfo") as handle:
            mountinfo = handle.read()
    prefix = path.rstrip("/") + "/"
    found: list[str] = []
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            point = _unescape(fields[4])
            if point.startswith(prefix) and point != prefix and point not in found:
                found.append(point)
    found.sort(key=lambda p: p.count("/"))
    outermost: list[str] = []
    for point in found:
        if not any(point.startswith(o.rstrip("/") + "/") for o in outermost):
            outermost.append(point)
    return outermost


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


IdMapped = tuple[int, str]
"""A detached id-mapped clone's descriptor, and the path it goes over."""


def mount_in_private(clones: Sequence[IdMapped], netns: int | None = None) -> Callable[[], None]:
    """The function a command's child runs between fork and exec (`preexec_fn`): a mount
    namespace of its own, nothing propagated back, and each clone attached over its path,
    so that bwrap binds the id-mapped directories where the command expects them; and with
    `netns`, that network namespace entered (its session's, D494). Only ctypes calls:
    nothing that takes a lock another thread could hold at the fork."""
    encoded = [(fd, os.fsencode(path)) for fd, path in clones]

    def attach() -> None:
        if _libc.unshare(_CLONE_NEWNS) != 0:
            raise _failed("unshare(CLONE_NEWNS)")
        if _libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            raise _failed("making / private")
        for fd, target in encoded:
            moved = _libc.syscall(
                _SYS_MOVE_MOUNT, fd, b"", _AT_FDCWD, target, _MOVE_MOUNT_F_EMPTY_PATH
            )
            if moved < 0:
                raise _failed("move_mount")
            # A mount put over `/` hides the old root only from a process rooted in it
            # (lookups start at the root, below what is stacked on it); rooted there, the
            # process is not chrooted as the kernel sees it, so bwrap may still unshare.
            if target == b"/" and (_libc.fchdir(fd) != 0 or _libc.chroot(b".") != 0):
                raise _failed("entering the clone of /")
        if netns is not None and _libc.setns(netns, _CLONE_NEWNET) != 0:
            raise _failed("setns(_CLONE_NEWNET)")

    return attach

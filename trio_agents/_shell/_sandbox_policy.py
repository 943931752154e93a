"""What a sandboxed command may see, and the `bwrap` command line that enforces it. Pure: no
trio, no file system access (the caller says which paths exist and which are directories).

bubblewrap applies its mount options in order and a later mount over the same path wins, so
the order below is the policy: the whole file system read-only, a fresh /proc and /dev, a
private /tmp and a private, empty HOME (each a tmpfs of bounded size), the home paths the
policy shows (read-only), then the writable directories (the command's root first, which may
lie under /tmp or HOME), then the exposed read-only paths, and the hidden paths last, so a
secret inside the root is hidden too. A hidden directory that contains the root is not
hidden as a whole (that would hide the root); the paths inside it that must be hidden are
listed on their own.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .._secret_paths import DEFAULT_SECRET_PATHS, expand_home
from .._util import check_bool, check_number, check_strings

__all__ = [
    "DEFAULT_SECRET_PATHS",
    "GIB",
    "UNPRIVILEGED",
    "SandboxPolicy",
    "bwrap_argv",
    "command_prefix",
    "expand_home",
    "hidden_targets",
    "path_homes",
]

GIB = 1 << 30
UNPRIVILEGED = 2147483632
"""The id a root server's commands run as, outside their own user namespace: one no user or
daemon of a host has (not `nobody`, whose processes could reach into a command's files
through /proc, D493)."""


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """How the shell executor confines each command in a bubblewrap (`bwrap`) sandbox.

    secret_paths: files and directories hidden from commands (`~` is the user's home);
        a directory becomes an empty tmpfs, a file reads as empty. Missing ones are skipped.
    hidden: more paths hidden the same way (the runtime adds its store's directory).
    writable: directories commands may write to, besides their workdir.
    read_only: paths re-exposed read-only after the hiding of /tmp (e.g. a tool cache).
    network: False cuts commands off the network (`--unshare-net`). True (the default)
        gives each command a network of its own with outbound access through slirp4netns,
        a user-mode stack: the host's loopback services and abstract Unix sockets are out
        of its reach (D494).
    host_network: with `network`, share this host's network instead, loopback services
        and abstract sockets included (as before D494; also what happens where
        slirp4netns is missing, said once).
    home: paths of the user's home (`~/...`) shown to commands, read-only, in the private
        HOME every command gets; the rest of the real HOME is out of sight. `("~",)` shows
        all of it (the secret paths stay hidden). Name one in `writable` to let commands
        write it (`writable` takes absolute paths).
    protected: files and directories commands must not change, whatever directory they may
        write (the agent's own configuration: its MCP configuration, its system prompt
        file): bound read-only where they lie in one, and left as they are elsewhere.
    home_from_path: also show, read-only, each directory of the home that holds an entry of
        PATH (`~/.local` for `~/.local/bin`, `~/.pyenv` for its shims): the tools the user
        installed there and put on the commands' PATH.
    tmp_size: bytes each private tmpfs (/tmp, the private HOME) may hold.
    max_processes: processes (and threads) a command may have at once, counted in its own
        sandbox (None: no limit of ours).
    max_memory: bytes of data (heap and private writable mappings) each process of a command
        may have (RLIMIT_DATA; None: no limit of ours).
    allow_unsandboxed: when bwrap is missing or namespaces are refused, run commands without
        a sandbox (saying so once in the log) instead of raising SandboxUnavailableError.
    bwrap: the bwrap executable (None: `bwrap` on PATH).
    """

    secret_paths: tuple[str, ...] = DEFAULT_SECRET_PATHS
    hidden: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    network: bool = True
    host_network: bool = False
    allow_unsandboxed: bool = False
    bwrap: str | None = None
    home: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    home_from_path: bool = True
    tmp_size: int = GIB
    max_processes: int | None = 1024
    max_memory: int | None = 8 * GIB

    def __post_init__(self) -> None:
        # Checked here, since a mistake weakens the sandbox without a word: a str is read
        # as its characters (`writable="//"` binds `/` writable), `network="no"` is true,
        # and a relative hidden path used to be skipped (D383).
        for name in ("secret_paths", "hidden", "writable", "read_only", "home", "protected"):
            paths = check_strings(f"SandboxPolicy {name}", getattr(self, name))
            home_ok = name in ("secret_paths", "hidden", "home")
            for path in paths:
                tilde = path == "~" or path.startswith("~/")
                if name == "home" and not tilde:
                    raise ValueError(
                        f"SandboxPolicy home: {path!r} must start with ~/ (a path of the "
                        "user's home); show other paths with read_only"
                    )
                if not (os.path.isabs(path) or (home_ok and tilde)):
                    start = "absolute or start with ~/" if home_ok else "absolute"
                    raise ValueError(f"SandboxPolicy {name}: {path!r} must be {start}")
                if "\0" in path:
                    raise ValueError(f"SandboxPolicy {name}: {path!r} holds a NUL")
            object.__setattr__(self, name, paths)
        check_number("SandboxPolicy tmp_size", self.tmp_size, integer=True)
        for name in ("max_processes", "max_memory"):
            if getattr(self, name) is not None:
                check_number(f"SandboxPolicy {name}", getattr(self, name), integer=True)
        check_bool("SandboxPolicy network", self.network)
        check_bool("SandboxPolicy allow_unsandboxed", self.allow_unsandboxed)
        check_bool("SandboxPolicy home_from_path", self.home_from_path)
        check_bool("SandboxPolicy host_network", self.host_network)
        if self.bwrap is not None and not (isinstance(self.bwrap, str) and self.bwrap):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"SandboxPolicy bwrap must be a path or None, got {self.bwrap!r}")


def _inside(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or below it (both absolute and normalised)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def path_homes(path: str, home: str | None) -> tuple[str, ...]:
    """The directories directly in `home` that hold an entry of `path` (a PATH value), in
    order, each once: what `home_from_path` shows."""
    if not home or home == "/":
        return ()
    found: dict[str, None] = {}
    for entry in path.split(os.pathsep):
        if not os.path.isabs(entry):
            continue
        entry = os.path.normpath(entry)
        if _inside(entry, home) and entry != home:
            first = entry[len(home.rstrip("/")) + 1 :].split("/", 1)[0]
            found.setdefault(os.path.join(home, first), None)
    return tuple(found)


def hidden_targets(
    policy: SandboxPolicy, extra: Iterable[str], home: str | None
) -> tuple[str, ...]:
    """Every path the policy hides, absolute and normalised, `~` expanded with `home` (a
    `~` path is dropped when there is no home), duplicates removed, in order."""
    seen: dict[str, None] = {}
    for raw in (*policy.secret_paths, *policy.hidden, *extra):
        path = expand_home(raw, home)
        if path is not None:
            seen.setdefault(path, None)
    return tuple(seen)


def command_prefix(
    policy: SandboxPolicy,
    *,
    mapped_home: str | None,
    mapped: bool,
    tools: Mapping[str, str] | None = None,
) -> list[str]:
    """What runs each command inside the sandbox, before the command's own argv: hard and
    soft limits set where the command cannot raise them, then the command. RLIMIT_NPROC
    counts a uid's processes per user namespace, and every command runs in one of its own,
    so the process limit is the command's alone.

    `mapped` (a root server's command, D485): the prefix starts as root with the few
    capabilities bwrap kept for it, gives the private HOME (`mapped_home`) to the
    unprivileged id, drops to that id for good (`setpriv`), and enters a user namespace of
    its own where that id is root (without capabilities), as a root server's commands
    were before. `tools` are the
    absolute paths of bash, chown, setpriv and unshare, looked up on the host: never through
    the command's PATH, which may name its writable directory; and bash runs privileged
    (`-p`), so that neither BASH_ENV nor functions from the environment run with the
    capabilities."""
    tool = dict(tools or {}).get
    bash, chown = tool("bash", "bash"), tool("chown", "chown")
    setpriv, unshare = tool("setpriv", "setpriv"), tool("unshare", "unshare")
    limits: list[str] = []
    if policy.max_processes is not None:
        limits.append(f"-u {policy.max_processes}")
    if policy.max_memory is not None:
        limits.append(f"-d {max(1, policy.max_memory // 1024)}")
    inner = (f"ulimit -S -H {' '.join(limits)} || exit 125\n" if limits else "") + 'exec "$@"'
    if not mapped:
        return [bash, "-c", inner, "trio-agents-sandbox"]
    q, me = shlex.quote, UNPRIVILEGED
    outer = [
        *([f"{q(chown)} {me}:{me} -- {q(mapped_home)} || exit 125"] if mapped_home else []),
        f"exec {q(setpriv)} --reuid={me} --regid={me} --clear-groups --inh-caps=-all "
        f"--bounding-set=-all --no-new-privs -- {q(unshare)} --user --map-user=0 "
        f"--map-group=0 -- {q(setpriv)} --bounding-set=-all --inh-caps=-all -- "
        f'{q(bash)} -c {q(inner)} trio-agents-sandbox "$@"',
    ]
    return [bash, "-p", "-c", "\n".join(outer), "trio-agents-sandbox"]


def bwrap_argv(
    bwrap: str,
    policy: SandboxPolicy,
    *,
    command: Sequence[str],
    workdir: str,
    hidden: Mapping[str, bool],
    exposed: Iterable[str] = (),
    root: str | None = None,
    home: str | None = None,
    home_shown: Iterable[str] = (),
    as_root: bool = False,
    mapped: bool = False,
    tools: Mapping[str, str] | None = None,
    seccomp: int | None = None,
    network: tuple[int, int] | None = None,
    resolv: int | None = None,
) -> list[str]:
    """The argv that runs `command` in `workdir` under `policy`.

    `root` is the directory the command may write (the session's working directory; None:
    the workdir), which holds `workdir`. `hidden` maps each existing path to hide to whether
    it is a directory (the caller has looked; bwrap cannot mount over a path that does not
    exist). `exposed` are paths shown read-only for this command only (e.g. its own
    session's spill directory). `home` is the user's home, replaced by a private one (None:
    no private home), and `home_shown` the existing paths of the policy's `home`, shown in
    it. `as_root`: this process runs as root, whose capabilities bwrap keeps in the sandbox
    unless told; `mapped` (the caller has id-mapped the writable paths, `_userns`): the
    command runs as an unprivileged id (D485). `seccomp`: a descriptor bwrap reads the
    filter of `_seccomp.program()` from (D493). `network`: the info and block descriptors
    of the handshake that gives the command a network of its own (`_network`, D494), and
    `resolv` one holding the resolv.conf it sees then.
    """
    workdir = os.path.normpath(workdir)
    root = os.path.normpath(root) if root is not None else workdir
    if as_root and mapped:
        # bwrap sets up as root and keeps only what it needs to enter the command's
        # directory (where root's files now show as the command's) and the prefix needs to
        # give the private HOME away and drop to the command's id for good (D485).
        identity = ["--cap-drop", "ALL"]
        for cap in ("CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID", "SETPCAP"):
            identity += ["--cap-add", f"CAP_{cap}"]
    elif as_root:
        # Run by root, bwrap leaves the command every capability: with CAP_SYS_ADMIN it can
        # remount / writable, unmount /proc to see the host's, or mount a cgroup whose
        # release_agent the kernel runs outside every namespace, which nothing here would
        # own (D384). Unprivileged, bwrap drops them itself (and a setuid bwrap refuses
        # the option from a user who is not root).
        identity = ["--cap-drop", "ALL"]
    else:
        identity = ["--unshare-user"]
    private_home = home if home and home != "/" else None
    writable = list(dict.fromkeys((root, *policy.writable)))
    # The private mounts and the writable binds, outermost first: a working directory of
    # `/` or `/home` is bound before the fresh /proc, the private /tmp and HOME, so that it
    # does not bring the host's back over them (D485); one under /tmp or HOME after them,
    # so that it shows through.
    layered: list[tuple[str, list[str]]] = [
        # bwrap's /dev is a tmpfs of its own, whose /dev/shm would be as large as half the
        # host's memory: bounded like /tmp (D487).
        (
            "/dev",
            [
                "--dev",
                "/dev",
                *("--size", str(policy.tmp_size), "--perms", "1777"),
                "--tmpfs",
                "/dev/shm",
            ],
        ),
        ("/proc", ["--proc", "/proc"]),
        ("/tmp", ["--size", str(policy.tmp_size), "--perms", "1777", "--tmpfs", "/tmp"]),
    ]
    if private_home is not None:
        home_tmpfs = ["--size", str(policy.tmp_size), "--perms", "0700", "--tmpfs", private_home]
        layered.append((private_home, home_tmpfs))
    layered += [(path, ["--bind", path, path]) for path in writable]
    layered.sort(key=lambda item: 0 if item[0] == "/" else item[0].count("/"))
    argv = [
        bwrap,
        *identity,
        # A PID namespace of its own: nothing inside sees or signals a process outside, and
        # when its first process (bwrap's init) dies the kernel kills everything inside, so
        # `setsid` and daemons cannot escape. --die-with-parent ties that init to us.
        "--unshare-pid",
        # SysV IPC and POSIX message queues of its own: nothing shared between sessions,
        # nothing left behind for the next command (D486).
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        *(("--seccomp", str(seccomp)) if seccomp is not None else ()),
        *("--ro-bind", "/", "/"),
        *("--setenv", "TMPDIR", "/tmp"),
    ]
    if not policy.network:
        argv.append("--unshare-net")
    elif network is not None:
        info, block = network
        argv += ["--unshare-net", "--info-fd", str(info), "--block-fd", str(block)]
    if resolv is not None and policy.network:
        argv += ["--ro-bind-data", str(resolv), "/etc/resolv.conf"]
    for _, options in layered:
        argv += options
    home_paths = [os.path.normpath(p) for p in home_shown]
    # Every directory between a writable one and what is hidden or read-only inside it is
    # bound onto itself first: a mount point cannot be renamed, so a command cannot move
    # `~/.config` aside and read `gh`'s token under the new name in its next command, nor
    # move the agent's store or configuration away and put its own in their place (D493).
    # Never one that is or holds a private mount, nor one in a private mount that the
    # writable directory is not in: its host copy would cover the private one.
    privates = ["/tmp", *((private_home,) if private_home else ())]

    def pinnable(directory: str, top: str) -> bool:
        return not any(
            _inside(m, directory) or (_inside(directory, m) and not _inside(top, m))
            for m in privates
        )

    guarded = [
        os.path.normpath(p) for p in policy.protected if any(_inside(p, w) for w in writable)
    ]
    pinned: dict[str, None] = {}
    for path in (*hidden, *policy.read_only, *guarded, *home_paths, *exposed):
        for top in writable:
            if path != top and _inside(path, top):
                parent = os.path.dirname(path)
                while parent != top and _inside(parent, top):
                    if pinnable(parent, top):
                        pinned.setdefault(parent, None)
                    parent = os.path.dirname(parent)
    for directory in sorted(pinned, key=lambda d: d.count("/")):
        argv += ["--bind", directory, directory]
    # After the writable binds: a home path shown read-only stays so in a writable HOME.
    for path in home_paths:
        if path not in writable:
            argv += ["--ro-bind", path, path]
    for path in (*policy.read_only, *guarded):
        argv += ["--ro-bind", path, path]
    shown = (*writable, *policy.read_only, *home_paths)
    for path, is_dir in hidden.items():
        if is_dir and _inside(root, path):
            continue  # hiding it would hide the root; its secrets are listed on their own
        if private_home is not None and _inside(path, private_home) and not _near(path, shown):
            continue  # already out of sight: do not make a mount point in the private HOME
        argv += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
    # Last, so a hidden directory that holds one (the spill root holds every session's
    # directory) still shows this command its own.
    for path in exposed:
        argv += ["--ro-bind", path, path]
    # The directories bwrap made in a private tmpfs to bind a path below it are root's and
    # closed (0700) when bwrap runs as root: a command run as another id could not reach
    # its own working directory under /tmp (D485).
    # Never one that is, or is in, a bound directory: that would change the host's.
    made: dict[str, None] = {}
    tmpfs = ["/tmp", *((private_home,) if private_home else ())]
    bound = (*writable, *home_paths, *exposed, *policy.read_only)
    for path in bound:
        for top in tmpfs:
            if path != top and _inside(path, top):
                parent = os.path.dirname(path)
                while parent != top and _inside(parent, top):
                    if not any(_inside(parent, b) for b in bound):
                        made.setdefault(parent, None)
                    parent = os.path.dirname(parent)
    for directory in sorted(made, key=lambda d: d.count("/")):
        argv += ["--chmod", "0755", directory]
    prefix = command_prefix(
        policy, mapped_home=private_home, mapped=as_root and mapped, tools=tools
    )
    argv += ["--chdir", workdir, "--", *prefix, *command]
    return argv


def _near(path: str, shown: Iterable[str]) -> bool:
    """Whether `path` is inside one of `shown`, or holds one."""
    return any(_inside(path, s) or _inside(s, path) for s in shown)

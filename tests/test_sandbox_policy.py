"""The bwrap command line a policy makes (pure: no process, no file system). bubblewrap mounts
in order and a later mount wins, so the order is the policy (D131)."""

from __future__ import annotations

import pytest

from trio_agents._shell._sandbox_policy import (
    UNPRIVILEGED,
    SandboxPolicy,
    bwrap_argv,
    command_prefix,
    hidden_targets,
)


def mounts(argv: list[str]) -> list[tuple[str, ...]]:
    """The mount options, in order, each with its arguments."""
    arity = {"--ro-bind": 2, "--bind": 2, "--tmpfs": 1, "--dev": 1, "--proc": 1}
    found: list[tuple[str, ...]] = []
    i = 0
    while i < len(argv) and argv[i] != "--":
        n = arity.get(argv[i])
        if n is not None:
            found.append(tuple(argv[i : i + n + 1]))
            i += n + 1
        else:
            i += 1
    return found


def test_the_workdir_under_tmp_is_bound_after_the_private_tmp() -> None:
    argv = bwrap_argv(
        "bwrap", SandboxPolicy(), command=["bash", "-c", "x"], workdir="/tmp/w/", hidden={}
    )
    order = mounts(argv)
    assert order.index(("--tmpfs", "/tmp")) < order.index(("--bind", "/tmp/w", "/tmp/w"))
    assert order[0] == ("--ro-bind", "/", "/")
    assert argv[:2] == ["bwrap", "--unshare-user"]
    assert {"--unshare-pid", "--unshare-ipc", "--die-with-parent"} <= set(argv)
    assert argv[argv.index("--chdir") + 1] == "/tmp/w"
    assert argv[-3:] == ["bash", "-c", "x"]
    assert "--unshare-net" not in argv  # the network is on by default


def test_hidden_paths_come_last_so_a_secret_inside_the_workdir_is_hidden_too() -> None:
    argv = bwrap_argv(
        "bwrap",
        SandboxPolicy(network=False, writable=("/data",), read_only=("/opt/cache",)),
        command=["true"],
        workdir="/home/u/project",
        hidden={"/home/u/project/.env": False, "/home/u/.ssh": True, "/home/u": True},
    )
    order = mounts(argv)
    assert order.index(("--bind", "/home/u/project", "/home/u/project")) < order.index(
        ("--ro-bind", "/dev/null", "/home/u/project/.env")
    )
    assert ("--tmpfs", "/home/u/.ssh") in order  # a directory: an empty tmpfs
    assert ("--bind", "/data", "/data") in order
    assert ("--ro-bind", "/opt/cache", "/opt/cache") in order
    # A hidden directory holding the workdir would hide the workdir: not hidden as a whole.
    assert ("--tmpfs", "/home/u") not in order
    assert "--unshare-net" in argv


def test_hidden_targets_expand_home_normalise_and_drop_duplicates() -> None:
    # (A relative path is refused by the policy itself, D383.)
    policy = SandboxPolicy(secret_paths=("~/.ssh", "~"), hidden=("/s//x/../y",))
    assert hidden_targets(policy, ["/s/y", "~/.aws"], "/home/u") == (
        "/home/u/.ssh",
        "/home/u",
        "/s/y",
        "/home/u/.aws",
    )
    assert hidden_targets(policy, [], None) == ("/s/y",)  # no home: no `~` paths


def test_a_commands_own_spill_directory_shows_through_the_hidden_spill_root() -> None:
    # The spill root holds every owner's directory and is hidden; the command's own owner's
    # directory is bound read-only after it, so the full output it is told about is readable.
    argv = bwrap_argv(
        "bwrap",
        SandboxPolicy(),
        command=["true"],
        workdir="/home/u/project",
        hidden={"/var/tmp/spill": True},
        exposed=("/var/tmp/spill/A",),
    )
    order = mounts(argv)
    assert order.index(("--tmpfs", "/var/tmp/spill")) < order.index(
        ("--ro-bind", "/var/tmp/spill/A", "/var/tmp/spill/A")
    )


def test_run_by_root_the_command_is_given_no_capabilities() -> None:
    # D384: bwrap keeps root's capabilities unless told; unprivileged it drops them itself.
    as_root = bwrap_argv(
        "bwrap", SandboxPolicy(), command=["true"], workdir="/w", hidden={}, as_root=True
    )
    assert as_root[1:3] == ["--cap-drop", "ALL"]
    plain = bwrap_argv("bwrap", SandboxPolicy(), command=["true"], workdir="/w", hidden={})
    assert "--cap-drop" not in plain


def test_a_working_directory_holding_proc_or_tmp_does_not_bring_the_hosts_back() -> None:
    # D485: a writable `/` bound after the fresh /proc and private /tmp covered them with
    # the host's; it is bound before them now.
    argv = bwrap_argv("bwrap", SandboxPolicy(), command=["true"], workdir="/", hidden={})
    order = mounts(argv)
    bind = order.index(("--bind", "/", "/"))
    assert bind < order.index(("--proc", "/proc"))
    assert bind < order.index(("--tmpfs", "/tmp"))


def test_home_is_private_and_shows_only_what_the_policy_names() -> None:
    # D486: an empty tmpfs over HOME, the named paths bound read-only into it, the workdir
    # (under HOME) bound after, and a secret outside every shown path not mounted at all.
    argv = bwrap_argv(
        "bwrap",
        SandboxPolicy(home=("~/.gitconfig",)),
        command=["true"],
        workdir="/home/u/project",
        hidden={"/home/u/.ssh": True, "/home/u/project/.env": False},
        home="/home/u",
        home_shown=("/home/u/.gitconfig",),
    )
    order = mounts(argv)
    home = order.index(("--tmpfs", "/home/u"))
    assert home < order.index(("--ro-bind", "/home/u/.gitconfig", "/home/u/.gitconfig"))
    assert home < order.index(("--bind", "/home/u/project", "/home/u/project"))
    assert ("--tmpfs", "/home/u/.ssh") not in order  # out of sight already
    assert ("--ro-bind", "/dev/null", "/home/u/project/.env") in order
    sizes = [argv[i + 1] for i, a in enumerate(argv) if a == "--size"]
    assert sizes == [str(SandboxPolicy().tmp_size)] * 3  # /dev/shm, /tmp, HOME: bounded


def test_limits_are_set_hard_inside_the_sandbox() -> None:
    prefix = command_prefix(
        SandboxPolicy(max_processes=64, max_memory=1 << 30), mapped_home=None, mapped=False
    )
    assert prefix[:2] == ["bash", "-c"]
    assert "ulimit -S -H -u 64 -d 1048576 || exit 125" in prefix[2]
    bare = command_prefix(
        SandboxPolicy(max_processes=None, max_memory=None), mapped_home=None, mapped=False
    )
    assert "ulimit" not in bare[2]


def test_a_root_servers_command_drops_to_an_unprivileged_id_through_host_tools() -> None:
    # D485: the tools come from the host's paths, never the command's PATH, and bash runs
    # privileged so that BASH_ENV cannot run with the capabilities.
    tools = {"bash": "/usr/bin/bash", "chown": "/usr/bin/chown", "setpriv": "/sp",
             "unshare": "/us"}  # fmt: skip
    argv = bwrap_argv(
        "bwrap", SandboxPolicy(), command=["true"], workdir="/w", hidden={},
        home="/root", as_root=True, mapped=True, tools=tools,
    )  # fmt: skip
    assert argv[1:3] == ["--cap-drop", "ALL"]
    caps = [argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"]
    assert caps == ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]
    start = argv.index("--") + 1
    assert argv[start : start + 3] == ["/usr/bin/bash", "-p", "-c"]
    script = argv[start + 3]
    me = UNPRIVILEGED
    assert me not in (0, 65534)  # not root, and not nobody, whose processes a host has
    assert script.startswith(f"/usr/bin/chown {me}:{me} -- /root")
    assert f"exec /sp --reuid={me} --regid={me} --clear-groups" in script
    assert "/us --user --map-user=0 --map-group=0" in script


@pytest.mark.parametrize(
    ("field", "value"),
    [("home", ("/etc",)), ("tmp_size", 0), ("max_processes", -1), ("max_memory", "1G"),
     ("home", "~/.gitconfig")],
)  # fmt: skip
def test_a_bad_policy_field_is_named(field: str, value: object) -> None:
    with pytest.raises((TypeError, ValueError), match=f"SandboxPolicy {field}"):
        SandboxPolicy(**{field: value})  # type: ignore[arg-type]


def test_what_is_hidden_or_read_only_in_the_root_has_its_parents_pinned() -> None:
    # D493: a directory between the root and a hidden or read-only path is a mount point,
    # which cannot be renamed; bound before the read-only path, never over a private mount.
    argv = bwrap_argv(
        "bwrap",
        SandboxPolicy(read_only=("/home/u/p/conf/mcp.json",)),
        command=["true"],
        workdir="/home/u/p",
        hidden={"/home/u/p/.local/share/s.db": False},
        home="/home/u",
    )
    order = mounts(argv)
    for pinned in ("/home/u/p/conf", "/home/u/p/.local", "/home/u/p/.local/share"):
        assert ("--bind", pinned, pinned) in order
    assert order.index(("--bind", "/home/u/p/conf", "/home/u/p/conf")) < order.index(
        ("--ro-bind", "/home/u/p/conf/mcp.json", "/home/u/p/conf/mcp.json")
    )
    around = bwrap_argv(
        "bwrap", SandboxPolicy(), command=["true"], workdir="/home", home="/home/u",
        hidden={"/home/u/.ssh/id": False, "/home/v/.ssh/id": False},
    )  # fmt: skip
    binds = [m for m in mounts(around) if m[0] == "--bind"]
    assert ("--bind", "/home/u", "/home/u") not in binds  # would bring the real HOME back
    assert ("--bind", "/home/v/.ssh", "/home/v/.ssh") in binds


def test_the_seccomp_filter_is_loaded_from_the_descriptor_given() -> None:
    argv = bwrap_argv("bwrap", SandboxPolicy(), command=["true"], workdir="/w", hidden={},
                      seccomp=7)  # fmt: skip
    assert argv[argv.index("--seccomp") + 1] == "7"

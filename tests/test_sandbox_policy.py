"""The bwrap command line a policy makes (pure: no process, no file system). bubblewrap mounts
in order and a later mount wins, so the order is the policy (D131)."""

from __future__ import annotations

from trio_agents._shell._sandbox_policy import SandboxPolicy, bwrap_argv, hidden_targets


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
    assert argv[:3] == ["bwrap", "--unshare-pid", "--die-with-parent"]
    assert argv[argv.index("--chdir") + 1] == "/tmp/w"
    assert argv[-4:] == ["--", "bash", "-c", "x"]
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

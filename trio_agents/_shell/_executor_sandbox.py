"""One shell executor's sandbox: its policy, the bwrap it found (once), the paths it hides
besides the policy's, and which processes it started. `_shell/_sandbox.py` knows how to sandbox a
command; this is what one executor remembers of doing it.

A sandboxed command is bwrap leading the process group: its own PID namespace, a fresh /proc,
the file system read-only but its workdir and a private /tmp, the store and the user's secrets
hidden. Its processes are killed (bwrap spared the SIGTERM, D132) and decoded (bwrap's exit
status is the command's, shifted) differently, so the executor asks `confines(process)`.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable, Sequence

import trio

from .._secret_paths import home_directory
from ._network import SessionNetwork, SlirpHelper, session_network, slirp4netns
from ._sandbox import (
    SandboxedCommand,
    check_sandbox,
    maps_root,
    sandboxed_command,
    spill_roots,
)
from ._sandbox_policy import SandboxPolicy, hidden_targets
from ._types import ShellSpec

__all__ = ["ShellSandbox"]


class ShellSandbox:
    """The sandbox state of one executor; `policy` None runs every command unsandboxed."""

    __slots__ = ("_bwrap", "_checked", "_helpers", "_hidden", "_networks", "_started", "policy")

    def __init__(self, policy: SandboxPolicy | None) -> None:
        self.policy = policy
        self._bwrap: str | None = None
        self._checked = policy is None
        self._hidden: list[str] = []
        # By identity, and forgotten with the process: it only matters while one is handled.
        self._started: weakref.WeakSet[trio.Process] = weakref.WeakSet()
        # Each networked command's slirp4netns, until its group is dead (by identity).
        self._helpers: dict[int, SlirpHelper] = {}
        # A root server's: each owner's network namespace, shared by its commands (D494).
        self._networks: dict[str | None, SessionNetwork] = {}

    @property
    def active(self) -> bool:
        """Whether commands run in the sandbox (False until the check, and for the fallback)."""
        return self._bwrap is not None

    def hide(self, paths: Iterable[str]) -> None:
        """Hide `paths` from every later command, besides the policy's own."""
        self._hidden.extend(os.path.abspath(p) for p in paths)

    def hidden_paths(self, root: str) -> tuple[str, ...]:
        """What a command rooted at `root` would have hidden (`ShellExecutor.hidden_paths`)."""
        policy = self.policy if self.policy is not None else SandboxPolicy()
        extra = (*self._hidden, *self._spill_roots(policy, os.path.abspath(root)))
        return hidden_targets(policy, extra, home_directory())

    @staticmethod
    def _spill_roots(policy: SandboxPolicy, root: str) -> tuple[str, ...]:
        """The spill roots a command rooted at `root` would see, so has hidden (D519)."""
        return spill_roots(root, (*policy.writable, *policy.read_only))

    async def check(self) -> bool:
        """Find out (once) whether commands can be sandboxed; return `active`. A checkpoint.
        Raises SandboxUnavailableError as `_sandbox.check_sandbox` does (and checks again at
        the next call)."""
        if self._checked or self.policy is None:
            await trio.lowlevel.checkpoint()
            return self.active
        self._bwrap = await check_sandbox(self.policy)
        self._checked = True
        return self.active

    async def network_for(self, owner: str | None) -> int | None:
        """The network namespace `owner`'s commands enter, made with its slirp4netns on the
        first command (a root server's whose commands are mapped; None otherwise: each
        command then gets one of its own from bwrap). Raises OSError."""
        policy = self.policy
        if (
            policy is None
            or not policy.network
            or policy.host_network
            or not maps_root()
            or (slirp := slirp4netns()) is None
        ):
            await trio.lowlevel.checkpoint()
            return None
        network = self._networks.get(owner)
        if network is None:
            network = await session_network(slirp)
            if owner in self._networks:  # made meanwhile by another command of the owner
                await network.release()
                network = self._networks[owner]
            else:
                self._networks[owner] = network
        else:
            await trio.lowlevel.checkpoint()
        return network.netns

    async def release_network(self, owner: str | None) -> None:
        """Let `owner`'s network go (its commands are dead). A checkpoint."""
        network = self._networks.pop(owner, None)
        if network is None:
            await trio.lowlevel.checkpoint()
            return
        await network.release()

    async def release_networks(self) -> None:
        """Let every owner's network go (the executor closes). A checkpoint."""
        for owner in list(self._networks):
            await self.release_network(owner)
        await trio.lowlevel.checkpoint()

    def command(
        self,
        spec: ShellSpec,
        *,
        exposed: Sequence[str],
        spill: str | None,
        netns: int | None = None,
    ) -> SandboxedCommand:
        """How to spawn `spec` in the sandbox (once `active`), showing it `exposed` besides
        the policy's view, and hiding `spill` (this executor's spill root) whatever TMPDIR
        is. Raises OSError when a root server's command cannot be mapped (D485)."""
        bwrap, policy = self._bwrap, self.policy
        assert bwrap is not None, "commands run unsandboxed"
        assert policy is not None
        root = os.path.abspath(spec.root or spec.workdir)
        return sandboxed_command(
            bwrap,
            policy,
            ["bash", "-c", spec.command],
            spec.workdir,
            root=root,
            hidden=(
                *self._hidden,
                *self._spill_roots(policy, root),
                *((spill,) if spill else ()),
            ),
            exposed=exposed,
            netns=netns,
        )

    def started(self, process: trio.Process, helper: SlirpHelper | None = None) -> trio.Process:
        """Remember that `process` runs under bwrap, with `helper` its network; return it."""
        self._started.add(process)
        if helper is not None:
            self._helpers[id(process)] = helper
        return process

    async def release(self, process: trio.Process) -> None:
        """Let the network of `process` go, once its group is dead. Idempotent; a checkpoint."""
        helper = self._helpers.pop(id(process), None)
        if helper is None:
            await trio.lowlevel.checkpoint()
            return
        await helper.release()

    def confines(self, process: trio.Process) -> bool:
        """Whether `process` was started under bwrap."""
        return process in self._started

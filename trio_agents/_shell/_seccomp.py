"""The seccomp filter every sandboxed command runs under (D493), as the classic BPF program
bwrap loads with `--seccomp FD`. Pure: it only assembles bytes.

It refuses (EPERM), and allows everything else:

- `chmod`, `fchmod`, `fchmodat` and `fchmodat2` with a set-user-ID or set-group-ID bit in
  the mode: a root server's command owns, through its id-mapped working directory, files
  that are root's on disk, and a setuid bit on one of them would give root to any user of
  the host who runs it (the kernel clears those bits when such a file is written, not when
  it is chmodded);
- `keyctl`, `add_key` and `request_key`: the kernel keyrings are not namespaced, and the
  server's session keyring (its tokens, its Kerberos tickets) is inherited by every child.

Syscall numbers differ by architecture, so the filter checks the architecture first: x86-64
(with its x32 numbering and the i386 entry points a 32-bit program on it uses) and aarch64.
On any other architecture `program()` returns None and no filter is loaded (said in
`docs/design.md`).
"""

from __future__ import annotations

import errno
import platform
import struct
from typing import Final, NamedTuple

__all__ = ["program"]

_LD_W_ABS: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET_K: Final = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_AND_K: Final = 0x54  # BPF_ALU | BPF_AND | BPF_K
_RET_K: Final = 0x06  # BPF_RET | BPF_K
_RET_ALLOW: Final = 0x7FFF0000
_RET_EPERM: Final = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO

_ARCH_X86_64: Final = 0xC000003E
_ARCH_I386: Final = 0x40000003
_ARCH_AARCH64: Final = 0xC00000B7
_X32_BIT: Final = 0x40000000
_SETID_BITS: Final = 0o6000

# Per architecture: the syscalls refused outright, and those whose argument N (a mode) is
# checked for the set-ID bits.
_Table = tuple[tuple[int, ...], tuple[tuple[int, int], ...]]
_X86_64: Final[_Table] = ((250, 248, 249), ((90, 1), (91, 1), (268, 2), (452, 2)))
_I386: Final[_Table] = ((288, 286, 287), ((15, 1), (94, 1), (306, 2), (452, 2)))
_AARCH64: Final[_Table] = ((219, 217, 218), ((52, 1), (53, 2), (452, 2)))


class _Op(NamedTuple):
    code: int
    k: int
    true: str | None = None  # a label to jump to when the test holds
    false: str | None = None  # and when it does not (None: the next instruction)


def _arch_block(arch: str, table: _Table, *, x32: bool = False) -> list[_Op | str]:
    refused, checked = table
    ops: list[_Op | str] = [arch, _Op(_LD_W_ABS, 0)]  # the syscall number
    if x32:
        ops.append(_Op(_AND_K, ~_X32_BIT & 0xFFFFFFFF))
    ops += [_Op(_JEQ_K, nr, true="deny") for nr in refused]
    ops += [_Op(_JEQ_K, nr, true=f"mode{argument}") for nr, argument in checked]
    ops.append(_Op(_RET_K, _RET_ALLOW))
    return ops


def _assemble(ops: list[_Op | str]) -> bytes:
    labels: dict[str, int] = {}
    code: list[_Op] = []
    for op in ops:
        if isinstance(op, str):
            labels[op] = len(code)
        else:
            code.append(op)
    out = bytearray()
    for at, op in enumerate(code):
        jt = labels[op.true] - at - 1 if op.true else 0
        jf = labels[op.false] - at - 1 if op.false else 0
        assert 0 <= jt < 256, "a jump past what BPF can reach"
        assert 0 <= jf < 256, "a jump past what BPF can reach"
        out += struct.pack("=HBBI", op.code, jt, jf, op.k & 0xFFFFFFFF)
    return bytes(out)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture (`platform.machine()` unless given), as
    the `struct sock_filter` array bwrap reads; None where the numbers are not known."""
    machine = machine or platform.machine()
    head: list[_Op | str] = [_Op(_LD_W_ABS, 4)]  # seccomp_data.arch
    if machine in ("x86_64", "amd64"):
        head += [
            _Op(_JEQ_K, _ARCH_X86_64, true="x86_64"),
            _Op(_JEQ_K, _ARCH_I386, true="i386"),
            _Op(_RET_K, _RET_ALLOW),
        ]
        blocks = [*_arch_block("x86_64", _X86_64, x32=True), *_arch_block("i386", _I386)]
    elif machine in ("aarch64", "arm64"):
        head += [_Op(_JEQ_K, _ARCH_AARCH64, true="aarch64"), _Op(_RET_K, _RET_ALLOW)]
        blocks = _arch_block("aarch64", _AARCH64)
    else:
        return None
    # seccomp_data.args[N] is at 16 + 8 * N; its low 32 bits first on these little-endian
    # machines, and a mode is 32 bits.
    tail: list[_Op | str] = []
    for argument in (1, 2):
        tail += [
            f"mode{argument}",
            _Op(_LD_W_ABS, 16 + 8 * argument),
            _Op(_JSET_K, _SETID_BITS, true="deny"),
            _Op(_RET_K, _RET_ALLOW),
        ]
    tail += ["deny", _Op(_RET_K, _RET_EPERM)]
    return _assemble([*head, *blocks, *tail])

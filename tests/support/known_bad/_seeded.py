"""The record of one seeded defect: which machine must catch it, and by which property."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Seeded:
    """A seeded defect: `target` is the factory handed to `machine` (`agent`, `lifecycle`,
    `durable`, `shell`), which must fail with a `ContractViolation` of `property`.
    `name` is its id in docs/conformance.md (`a-queued-prompt-batched`). `also`: other
    properties of the same machine that the one defect also breaks and may trip first, when
    which one comes first depends on real time (real files, real processes), usually of the
    same rule (a store that loses its last batch breaks L6 and, when the batch holds a
    step's tool calls, L7's write-ahead); the catalogue lists `property`."""

    name: str
    target: Callable[..., Any]
    machine: str
    property: str
    also: tuple[str, ...] = ()

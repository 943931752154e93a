"""Known-bad runtimes and stores for the durable machine (the real SqliteStore, crashes and
resumes): each is the real one with one seeded defect."""

from __future__ import annotations

from ._seeded import Seeded

SEEDED: tuple[Seeded, ...] = ()

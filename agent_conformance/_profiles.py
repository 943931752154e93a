"""Hypothesis budgets for the conformance machines, chosen by name or by environment.

`ci` is bounded for continuous integration (it catches every seeded defect in
`tests/` while the whole suite stays within minutes on two cores); `deep` runs many more and
longer programs, on demand. `TRIO_AGENTS_PROFILE=deep` selects one from the environment.
Neither is derandomised, on a CI machine or off it: every run draws a seed and reports it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["PROFILES", "profile"]

# derandomize is pinned: Hypothesis loads its own `ci` profile (derandomised) when a `CI`
# variable is set, and a profile built here would inherit it, so a run on a CI machine would
# try the same programs every time and report no seed to replay (D314).
_COMMON = {
    "deadline": None,
    "derandomize": False,
    "suppress_health_check": [HealthCheck.too_slow],
}

PROFILES: dict[str, settings] = {
    "ci": settings(max_examples=300, stateful_step_count=30, **_COMMON),  # type: ignore[arg-type]
    "deep": settings(max_examples=5000, stateful_step_count=60, **_COMMON),  # type: ignore[arg-type]
}


def profile(name: str | None = None) -> settings:
    """The named profile, or the one `TRIO_AGENTS_PROFILE` names (default `ci`)."""
    chosen = name or os.environ.get("TRIO_AGENTS_PROFILE", "ci")
    try:
        return PROFILES[chosen]
    except KeyError:
        raise ValueError(
            f"unknown profile {chosen!r}; choose one of {', '.join(sorted(PROFILES))}"
        ) from None

"""The rows `benchmarks/many_sessions.py` gives `benchmarks/run.py`'s table: a figure far below
one (commits per turn, about 0.001 when 10,000 turns share a few commits) keeps its
significant digits instead of rounding to 0.000.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "many_sessions.py"


def _many_sessions() -> ModuleType:
    # Loaded from its file: the benchmarks are scripts run from their directory, not a package.
    spec = importlib.util.spec_from_file_location("many_sessions", BENCHMARK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up in sys.modules while they are made.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_commits_per_turn_keep_their_significant_digits() -> None:
    bench = _many_sessions()
    run = bench.AcpRun(10, 100, 1.0, [0.001, 0.002], 2048.0, 500.0)
    for commits, shown in ((9, "0.0009"), (12, "0.0012"), (10_000, "1"), (12_345, "1.23")):
        figures = bench.Figures([run], [run], [(900.0, 50)], [(800.0, commits)], 10, 10_000)
        agents_row = bench.rows(figures)[-1]
        assert agents_row[0] == "10,000 agents at once: turns/s"
        assert agents_row[2].endswith(f"100 agents; {shown} commits per turn"), agents_row

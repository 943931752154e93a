"""A real `trio-agents acp` process whose client stops reading (issue 16, acceptance 7, in a
10-second window; benchmarks/acp_backpressure.py runs the full 60 s): four sessions run
`/loop` (a tool call per step, for ever) and a thread keeps sending requests, while nothing
reads the server's output. The server's RSS, from /proc/PID/status, stays within a bound and
stops growing (an unbounded queue grew it by about 4 MiB/s here); once the client reads
again, every loop answers its cancel and a new prompt is answered."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from .support.acp_process import AcpProcess, stall

pytestmark = pytest.mark.subprocess

WINDOW: Final = 10.0
GROWTH_BOUND_KIB: Final = 16 * 1024  # over the RSS before the stall
LATE_GROWTH_KIB: Final = 4 * 1024  # over the second half of the window


def test_a_client_that_stops_reading_for_10s_keeps_the_server_rss_bounded(
    tmp_path: Path,
) -> None:
    server = AcpProcess(tmp_path / "s.sqlite3")
    try:
        report = stall(server, tmp_path, seconds=WINDOW)
        server.process.stdin.close()  # type: ignore[union-attr]
        assert server.process.wait(timeout=30) == 0
    finally:
        server.close()
    growth = report.peak - report.rss_before
    half = [rss for at, rss in report.samples if at >= WINDOW / 2]
    late = max(half) - min(half)
    figures = f"RSS {report.rss_before} KiB before, samples {report.samples}"
    assert growth <= GROWTH_BOUND_KIB, f"grew {growth} KiB; {figures}"
    assert late <= LATE_GROWTH_KIB, f"still growing: {late} KiB in the second half; {figures}"
    assert report.requests_sent > 0

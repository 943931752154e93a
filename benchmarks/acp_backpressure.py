"""A client that stops reading a real `trio-agents acp` server for 60 s (issue 16,
acceptance 7): four sessions run `/loop` (a tool call per step, for ever) and a thread keeps
sending requests while nothing reads the server's output. Prints the server's RSS (from
/proc/PID/status) at intervals, the bound, and a verdict; then reads again and checks that
the sessions answer their cancels and a new prompt.

    python benchmarks/acp_backpressure.py [--seconds 60] [--interval 5]

The bound: RSS at most 16 MiB over its level just before the client stopped reading (the
server holds at most `max_unwritten`, 1 MiB, of unwritten frames), and flat over the second
half of the window (at most 4 MiB of growth). Before the output was paced, the same client
grew the server by about 4 MiB/s here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.acp_process import AcpProcess, stall

BOUND_KIB = 16 * 1024
LATE_KIB = 4 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        cwd = Path(directory)
        server = AcpProcess(cwd / "s.sqlite3")
        try:

            def show(at: float, rss: int) -> None:
                print(f"  {at:5.1f} s  RSS {rss / 1024:6.1f} MiB", flush=True)

            print(f"client stops reading for {args.seconds:.0f} s (4 sessions in /loop):")
            report = stall(
                server, cwd, seconds=args.seconds, interval=args.interval, on_sample=show
            )
            assert server.process.stdin is not None
            server.process.stdin.close()
            code = server.process.wait(timeout=30)
        finally:
            server.close()
    growth = report.peak - report.rss_before
    half = [rss for at, rss in report.samples if at >= args.seconds / 2]
    late = max(half) - min(half)
    ok = growth <= BOUND_KIB and late <= LATE_KIB and code == 0
    print(
        f"RSS before {report.rss_before / 1024:.1f} MiB, peak {report.peak / 1024:.1f} MiB "
        f"(+{growth / 1024:.1f} MiB; bound +{BOUND_KIB // 1024} MiB), second-half growth "
        f"{late / 1024:.1f} MiB (bound {LATE_KIB // 1024} MiB); {report.requests_sent} requests "
        f"sent while not reading; {len(report.after)} frames read after; exit {code}: "
        f"{'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

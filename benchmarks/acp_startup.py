"""How long `trio-agents acp` takes from its spawn to its answer to `initialize`, and what
importing the ACP SDK's pydantic schema (`acp.schema`) first would add (design D205).

    python benchmarks/acp_startup.py [--runs 7] [--base DIR]

Each run spawns the server of this checkout on a fresh store, sends `initialize`, and times
the first answer line; prints the median, min and max. `--base DIR` also times another
checkout's `trio_agents` (e.g. `git archive 776bf48 trio_agents | tar -x -C DIR`). The
`acp.schema` row imports it in the server process before the server starts, which costs what
a lazy import at the first request would.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


def once(root: Path, before: str) -> float:
    with tempfile.TemporaryDirectory() as directory:
        store = str(Path(directory) / "s.sqlite3")
        code = (
            f"{before}import sys; from trio_agents._cli import main; "
            f"sys.exit(main(['acp', '--store', {store!r}]))"
        )
        env = dict(os.environ, PYTHONPATH=str(root))
        start = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(INITIALIZE)
        process.stdin.flush()
        line = process.stdout.readline()
        took = time.monotonic() - start
        process.stdin.close()
        process.wait(30)
        if b'"result"' not in line:
            raise SystemExit(f"no answer to initialize: {line!r}")
        return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--base", type=Path, help="another checkout's root to time as well")
    args = parser.parse_args(argv)
    rows = [
        ("this checkout", ROOT, ""),
        ("this checkout + import acp.schema", ROOT, "import acp.schema; "),
    ]
    if args.base is not None:
        rows.insert(0, (f"base {args.base}", args.base, ""))
    for label, root, before in rows:
        times = [once(root, before) for _ in range(args.runs)]
        print(
            f"{label}: median {statistics.median(times) * 1000:.0f} ms "
            f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, {args.runs} runs)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

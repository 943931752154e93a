"""`python -m trio_agents.testing._mcp_server`, as MCP configurations written before the
suite moved start the reference server: it runs `agent_conformance._mcp_server` now, after a line on
stderr saying so (design D385)."""

from __future__ import annotations

import runpy
import sys

from ._moved import REMOVED_IN

if __name__ == "__main__":  # not when a tool imports every module of the package
    print(
        "deprecated: python -m trio_agents.testing._mcp_server is python -m "
        f"agent_conformance._mcp_server now (the old name goes in trio-agents {REMOVED_IN})",
        file=sys.stderr,
    )
    sys.argv[0] = "agent_conformance._mcp_server"
    runpy.run_module("agent_conformance._mcp_server", run_name="__main__", alter_sys=True)

"""Where the ACP mode of the suite was before it moved to `agent_conformance` (design D385):
reproductions printed then import `Target` and `acp_machine` from here, and still run."""

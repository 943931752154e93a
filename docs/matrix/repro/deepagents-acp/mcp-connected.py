# Replays the shrunk failing program of the ACP machine against the same command.
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=('/work/main/.third-party/deepagents-acp/venv/bin/python', '-m', 'deepagents_acp'), env=(('HOME', '{dir}'),), files=(), timeout=30.0, grace=5.0), waived=['malformed-answered'])()
try:
    state.check()
    state.mcp_session(server=True)
    state.check()
finally:
    state.teardown()

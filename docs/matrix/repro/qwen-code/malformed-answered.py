# Replays the shrunk failing program of the ACP machine against the same command.
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=('/work/main/.third-party/qwen-code/node_modules/.bin/qwen', '--acp', '--auth-type', 'openai'), env=(('HOME', '{dir}'), ('QWEN_TELEMETRY_ENABLED', '0'), ('QWEN_USAGE_STATISTICS_ENABLED', '0')), files=(), timeout=30.0, grace=5.0), waived=['mcp-connected', 'schema-valid', 'sessions-all-listed'])()
try:
    state.check()
    state.new_session()
    state.check()
    state.malformed(kinds=['not-json-number'])
    state.check()
finally:
    state.teardown()

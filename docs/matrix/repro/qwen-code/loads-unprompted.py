# Replays the shrunk failing program of the ACP machine against the same command.
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=('/work/main/.third-party/qwen-code/node_modules/.bin/qwen', '--acp', '--auth-type', 'openai'), env=(('HOME', '{dir}'), ('QWEN_TELEMETRY_ENABLED', '0'), ('QWEN_USAGE_STATISTICS_ENABLED', '0')), files=(), timeout=30.0, grace=5.0), waived=['malformed-answered', 'mcp-connected', 'schema-valid', 'sessions-all-listed'])()
try:
    state.check()
    state.mcp_session(server=False)
    state.check()
    state.switch_config(pick=13, session=1, switch='unknown-mode')
    state.check()
    state.permission(answer='allow', first=['not-offered', 'error', 'malformed', 'reject', 'allow'], late='allow', session=0)
    state.check()
    state.cancel_prompt(point='before-model', session=1)
    state.check()
    state.kill_after_answer(session=1, tool=False)
    state.check()
    state.kill_after_answer(session=1, tool=True)
    state.check()
    state.mcp_session(server=False)
    state.check()
    state.permission(answer='held', first=[], late='allow', session=0)
    state.check()
    state.restart(load_unprompted=True)
    state.check()
finally:
    state.teardown()

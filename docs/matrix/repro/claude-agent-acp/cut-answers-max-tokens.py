# Replays the shrunk failing program of the ACP machine against the same command.
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=('/work/main/.third-party/claude-agent-acp/node_modules/.bin/claude-agent-acp',), env=(('HOME', '{dir}'), ('IS_SANDBOX', '1'), ('ANTHROPIC_BASE_URL', '{root_url}'), ('ANTHROPIC_API_KEY', '{api_key}'), ('ANTHROPIC_MODEL', '{model}'), ('CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC', '1'), ('DISABLE_AUTOUPDATER', '1'), ('DISABLE_TELEMETRY', '1')), files=(), timeout=30.0, grace=5.0), waived=['mcp-connected', 'no-orphans', 'sessions-isolated'])()
try:
    state.check()
    state.mcp_session(server=False)
    state.check()
    state.switch_config(pick=13, session=0, switch='mode')
    state.check()
    state.malformed(kinds=['unknown-method', 'method-not-string', 'not-json', 'not-json-number', 'unknown-session', 'bad-params'])
    state.check()
    state.prompt_with_context(embedded='blob', link='edited', session=0)
    state.check()
    state.cancel_prompt(point='mid-tool', session=1)
    state.check()
    state.prompt_cut(session=0, tool=False)
    state.check()
finally:
    state.teardown()

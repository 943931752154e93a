# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/claude-agent-acp/node_modules/.bin/claude-agent-acp',), env=(('HOME', '{dir}'), ('IS_SANDBOX', '1'), ('ANTHROPIC_BASE_URL', '{root_url}'), ('ANTHROPIC_API_KEY', '{api_key}'), ('ANTHROPIC_MODEL', '{model}'), ('CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC', '1'), ('DISABLE_AUTOUPDATER', '1'), ('DISABLE_TELEMETRY', '1')), files=(), timeout=30.0, grace=5.0), waived=['no-orphans'])()
try:
    state.check()
    state.new_session()
    state.check()
    state.switch_config(pick=9, session=0, switch='unknown-value')
    state.check()
    state.list_sessions(between='create', bulk=True, filtered=True)
    state.check()
    state.prompt(0, False)
    state.check()
    state.cancel_prompt(point='mid-stream', session=0)
    state.check()
    state.new_session()
    state.check()
    state.switch_config(pick=12, session=1, switch='value')
    state.check()
    state.cancel_prompt(point='mid-stream', session=1)
    state.check()
finally:
    state.teardown()

# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/claude-agent-acp/node_modules/.bin/claude-agent-acp',), env=(('HOME', '{dir}'), ('IS_SANDBOX', '1'), ('ANTHROPIC_BASE_URL', '{root_url}'), ('ANTHROPIC_API_KEY', '{api_key}'), ('ANTHROPIC_MODEL', '{model}'), ('CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC', '1'), ('DISABLE_AUTOUPDATER', '1'), ('DISABLE_TELEMETRY', '1')), files=(), timeout=30.0, grace=5.0))()
try:
    state.check()
    state.new_session()
    state.check()
finally:
    state.teardown()

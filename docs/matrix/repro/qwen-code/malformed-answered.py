# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/qwen-code/node_modules/.bin/qwen', '--acp', '--auth-type', 'openai'), env=(('HOME', '{dir}'), ('QWEN_TELEMETRY_ENABLED', '0'), ('QWEN_USAGE_STATISTICS_ENABLED', '0')), files=(), timeout=30.0, grace=5.0), waived=['mcp-connected', 'schema-valid'])()
try:
    state.check()
    state.new_session()
    state.check()
    state.permission(answer='error', first=['error', 'not-offered', 'reject', 'malformed', 'allow'], late='allow', session=0)
    state.check()
    state.restart(load_unprompted=False)
    state.check()
    state.malformed(kinds=['unknown-session', 'method-not-string', 'not-json-number', 'bad-params', 'unknown-method', 'not-json'])
    state.check()
finally:
    state.teardown()

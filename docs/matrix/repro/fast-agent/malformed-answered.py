# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/fast-agent/venv/bin/fast-agent-acp', '--shell'), env=(('HOME', '{dir}'), ('GENERIC__BASE_URL', '{base_url}'), ('GENERIC__API_KEY', '{api_key}'), ('FAST_AGENT_MODEL', 'generic.{model}')), files=(), timeout=30.0, grace=5.0), waived=['sessions-isolated'])()
try:
    state.check()
    state.list_sessions(between='nothing', bulk=False, filtered=True)
    state.check()
    state.mcp_session(server=True)
    state.check()
    state.new_session()
    state.check()
    state.permission(answer='held', first=[], late='allow', session=1)
    state.check()
    state.malformed(kinds=['method-not-string', 'unknown-method', 'not-json', 'bad-params', 'not-json-number', 'unknown-session'])
    state.check()
finally:
    state.teardown()

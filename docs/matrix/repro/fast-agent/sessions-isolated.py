# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/fast-agent/venv/bin/fast-agent-acp', '--shell'), env=(('HOME', '{dir}'), ('GENERIC__BASE_URL', '{base_url}'), ('GENERIC__API_KEY', '{api_key}'), ('FAST_AGENT_MODEL', 'generic.{model}')), files=(), timeout=30.0, grace=5.0))()
try:
    state.check()
    state.new_session()
    state.check()
    state.new_session()
    state.check()
    state.new_session()
    state.check()
    state.cancel_idle(session=0)
    state.check()
finally:
    state.teardown()

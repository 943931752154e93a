# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/deepagents-acp/venv/bin/python', '-m', 'deepagents_acp'), env=(('HOME', '{dir}'),), files=(), timeout=30.0, grace=5.0), waived=['malformed-answered', 'mcp-connected'])()
try:
    state.check()
    state.new_session()
    state.check()
    state.permission(answer='held', first=['malformed', 'error', 'reject'], late='allow', session=2)
    state.check()
    state.permission(answer='held', first=['error', 'reject', 'allow'], late='cancelled', session=2)
    state.check()
    state.permission(answer='cancelled', first=['allow', 'error'], late='allow', session=1)
    state.check()
    state.prompt_with_context(embedded='blob', link='edited', session=2)
    state.check()
    state.cancel_idle(session=1)
    state.check()
    state.cancel_prompt(point='mid-tool', session=1)
    state.check()
finally:
    state.teardown()

# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/hermes-agent/venv/bin/hermes-acp',), env=(('HOME', '{dir}'),), files=(('.hermes/config.yaml', '# hermes-agent pointed at the conformance endpoint: written to {dir}/.hermes/config.yaml\n# (HERMES_HOME defaults to ~/.hermes; HOME={dir}). Chat completions (custom provider).\nmodel:\n  provider: custom\n  default: "{model}"\n  base_url: "{base_url}"\n  api_key: "{api_key}"\n'),), timeout=30.0, grace=5.0), waived=['mcp-connected', 'prompt-ends-turn'])()
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

# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/crow-cli/venv/bin/crow-cli', 'acp'), env=(('HOME', '{dir}'),), files=(('.agents/crow/config.yaml', '# crow-cli pointed at the conformance endpoint: written to {dir}/.agents/crow/config.yaml\n# (the default config dir ~/.agents/crow; HOME={dir}). Chat completions. The agent has no\n# tools of its own: the client\'s mcpServers are its tools.\ndb_uri: sqlite:///~/.agents/crow/crow.db\nproviders:\n  local:\n    api_key: "{api_key}"\n    base_url: "{base_url}"\nmodels:\n  local:\n    provider: local\n    model: "{model}"\n    temperature: 0.6\n    modality: [text]\n'),), timeout=30.0, grace=5.0), waived=['sessions-listed-once'])()
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

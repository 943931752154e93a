# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/cline/node_modules/.bin/cline', '--acp'), env=(('HOME', '{dir}'), ('CLINE_NO_AUTO_UPDATE', '1'), ('CLINE_API_KEY', '{api_key}'), ('CLINE_PROVIDER', 'openai-compatible'), ('CLINE_MODEL', '{model}')), files=(('.cline/data/settings/providers.json', '{\n  "version": 1,\n  "lastUsedProvider": "openai-compatible",\n  "modes": {},\n  "providers": {\n    "openai-compatible": {\n      "settings": {\n        "provider": "openai-compatible",\n        "apiKey": "{api_key}",\n        "model": "{model}",\n        "baseUrl": "{base_url}"\n      },\n      "updatedAt": "2026-12-07T00:00:00.000Z",\n      "tokenSource": "manual"\n    }\n  }\n}\n'),), timeout=30.0, grace=5.0), waived=['no-orphans'])()
try:
    state.check()
    state.mcp_session(server=True)
    state.check()
finally:
    state.teardown()

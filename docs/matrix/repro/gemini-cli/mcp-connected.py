# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/gemini-cli/node_modules/.bin/gemini', '--acp'), env=(('HOME', '{dir}'), ('GOOGLE_GEMINI_BASE_URL', '{root_url}'), ('GEMINI_API_KEY', '{api_key}'), ('GEMINI_MODEL', '{model}')), files=(('.gemini/settings.json', '{\n  "general": { "disableAutoUpdate": true, "disableUpdateNag": true },\n  "privacy": { "usageStatisticsEnabled": false },\n  "telemetry": { "enabled": false }\n}\n'),), timeout=30.0, grace=5.0), waived=['malformed-answered'])()
try:
    state.check()
    state.mcp_session(server=True)
    state.check()
finally:
    state.teardown()

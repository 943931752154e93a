# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/pi-acp/node_modules/.bin/pi-acp',), env=(('HOME', '{dir}'), ('PI_ACP_PI_COMMAND', PREFIX + '/pi-acp/node_modules/.bin/pi'), ('PI_OFFLINE', '1'), ('PI_TELEMETRY', '0'), ('PI_SKIP_VERSION_CHECK', '1')), files=(('.pi/agent/models.json', '{\n  "providers": {\n    "local": {\n      "baseUrl": "{base_url}",\n      "api": "openai-completions",\n      "apiKey": "{api_key}",\n      "compat": { "supportsDeveloperRole": false, "supportsReasoningEffort": false },\n      "models": [ { "id": "{model}", "name": "{model}", "reasoning": false, "input": ["text"] } ]\n    }\n  }\n}\n'), ('.pi/agent/settings.json', '{\n  "defaultProvider": "local",\n  "defaultModel": "{model}",\n  "enableInstallTelemetry": false\n}\n')), timeout=30.0, grace=5.0), waived=['prompt-ends-turn'])()
try:
    state.check()
    state.list_sessions(between='nothing', bulk=False, filtered=True)
    state.check()
    state.mcp_session(server=True)
    state.check()
finally:
    state.teardown()

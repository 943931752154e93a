# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/kilo/node_modules/.bin/kilo', 'acp'), env=(('HOME', '{dir}'), ('KILO_CONFIG', '{dir}/kilo.json'), ('KILO_DISABLE_MODELS_FETCH', '1'), ('KILO_DISABLE_AUTOUPDATE', '1'), ('KILO_DISABLE_SHARE', '1'), ('KILO_DISABLE_LSP_DOWNLOAD', '1'), ('KILO_DISABLE_DEFAULT_PLUGINS', '1'), ('KILO_TELEMETRY_LEVEL', 'off')), files=(('kilo.json', '{\n  "model": "local/{model}",\n  "small_model": "local/{model}",\n  "autoupdate": false,\n  "share": "disabled",\n  "provider": {\n    "local": {\n      "npm": "@ai-sdk/openai-compatible",\n      "name": "conformance endpoint",\n      "options": { "baseURL": "{base_url}", "apiKey": "{api_key}" },\n      "models": { "{model}": { "name": "{model}" } }\n    }\n  }\n}\n'),), timeout=30.0, grace=5.0), waived=['prompt-ends-turn'])()
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

# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/opencode/node_modules/.bin/opencode', 'acp'), env=(('HOME', '{dir}'), ('OPENCODE_CONFIG', '{dir}/opencode.json'), ('OPENCODE_DISABLE_MODELS_FETCH', '1'), ('OPENCODE_DISABLE_AUTOUPDATE', '1'), ('OPENCODE_DISABLE_SHARE', '1'), ('OPENCODE_DISABLE_LSP_DOWNLOAD', '1'), ('OPENCODE_DISABLE_DEFAULT_PLUGINS', '1')), files=(('opencode.json', '{\n  "$schema": "https://opencode.ai/config.json",\n  "model": "local/{model}",\n  "autoupdate": false,\n  "share": "disabled",\n  "provider": {\n    "local": {\n      "npm": "@ai-sdk/openai-compatible",\n      "name": "conformance endpoint",\n      "options": { "baseURL": "{base_url}", "apiKey": "{api_key}" },\n      "models": { "{model}": { "name": "{model}" } }\n    }\n  }\n}\n'),), timeout=30.0, grace=5.0))()
try:
    state.check()
    state.new_session()
    state.check()
    state.switch_config(pick=9, session=0, switch='unknown-value')
    state.check()
    state.list_sessions(between='create', bulk=True, filtered=True)
    state.check()
    state.prompt(0, False)
    state.check()
    state.cancel_prompt(point='mid-stream', session=0)
    state.check()
    state.new_session()
    state.check()
    state.switch_config(pick=12, session=1, switch='value')
    state.check()
    state.cancel_prompt(point='mid-stream', session=1)
    state.check()
finally:
    state.teardown()

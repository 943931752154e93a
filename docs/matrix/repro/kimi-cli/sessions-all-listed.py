# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/kimi-cli/venv/bin/kimi', 'acp'), env=(('HOME', '{dir}'), ('KIMI_CLI_NO_AUTO_UPDATE', '1')), files=(('.kimi/config.toml', '# kimi-cli pointed at the conformance endpoint: written to {dir}/.kimi/config.toml\n# (the default location; HOME={dir}). Chat completions through the openai_legacy provider.\ndefault_model = "local"\ntelemetry = false\n\n[providers.local]\ntype = "openai_legacy"\nbase_url = "{base_url}"\napi_key = "{api_key}"\n\n[models.local]\nprovider = "local"\nmodel = "{model}"\nmax_context_size = 128000\n'), ('.kimi/credentials/kimi-code.json', '{"access_token": "placeholder-not-used", "refresh_token": "", "expires_at": 0, "scope": "", "token_type": "Bearer", "expires_in": 0}\n')), timeout=30.0, grace=5.0))()
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
    state.new_session()
    state.check()
    state.list_sessions(between='write', bulk=True, filtered=False)
    state.check()
    state.prompt(0, False)
    state.check()
finally:
    state.teardown()

# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/kimi-cli/venv/bin/kimi', 'acp'), env=(('HOME', '{dir}'), ('KIMI_CLI_NO_AUTO_UPDATE', '1')), files=(('.kimi/config.toml', '# kimi-cli pointed at the conformance endpoint: written to {dir}/.kimi/config.toml\n# (the default location; HOME={dir}). Chat completions through the openai_legacy provider.\ndefault_model = "local"\ntelemetry = false\n\n[providers.local]\ntype = "openai_legacy"\nbase_url = "{base_url}"\napi_key = "{api_key}"\n\n[models.local]\nprovider = "local"\nmodel = "{model}"\nmax_context_size = 128000\n'), ('.kimi/credentials/kimi-code.json', '{"access_token": "placeholder-not-used", "refresh_token": "", "expires_at": 0, "scope": "", "token_type": "Bearer", "expires_in": 0}\n')), timeout=30.0, grace=5.0), waived=['sessions-all-listed'])()
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

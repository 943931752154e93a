# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/codex-acp/node_modules/.bin/codex-acp',), env=(('HOME', '{dir}'), ('CODEX_HOME', '{dir}/codex')), files=(('codex/config.toml', '# codex-acp pointed at the conformance suite\'s endpoint (a --config-file template: {model} and\n# {base_url} are filled by `trio-agents conformance --acp`). Responses API only: codex\n# refuses `wire_api = "chat"`. No retries, so an endpoint that cannot answer fails fast.\nmodel_provider = "local"\nmodel = "{model}"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n[model_providers.local]\nname = "local"\nbase_url = "{base_url}"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n'),), timeout=30.0, grace=5.0))()
try:
    state.check()
    state.new_session()
    state.check()
finally:
    state.teardown()

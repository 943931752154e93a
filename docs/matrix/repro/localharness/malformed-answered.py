# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/localharness/venv/bin/localharness', 'acp'), env=(('HOME', '{dir}'),), files=(('.localharness/config.yaml', '# localharness pointed at the conformance endpoint: written to {dir}/.localharness/config.yaml\n# (the global config; LOCALHARNESS_DIR or --config-dir override its folder). Chat completions.\nversion: "1"\nprovider:\n  provider_type: unknown\n  base_url: "{base_url}"\n  api_key: "{api_key}"\n  default_model: "{model}"\n  available_models: ["{model}"]\n  supports_function_calling: true\n'),), timeout=30.0, grace=5.0))()
try:
    state.check()
    state.malformed(kinds=['not-json', 'unknown-session', 'method-not-string', 'unknown-method', 'not-json-number', 'bad-params'])
    state.check()
finally:
    state.teardown()

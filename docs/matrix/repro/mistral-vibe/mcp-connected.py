# Replays the shrunk failing program of the ACP machine against the same command.
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get('THIRD_PARTY', os.path.normpath(os.path.join(_HERE, '../../../../.third-party')))
from agent_conformance import AcpTarget, acp_machine

state = acp_machine(AcpTarget(argv=(PREFIX + '/mistral-vibe/venv/bin/vibe-acp',), env=(('HOME', '{dir}'), ('LOCAL_API_KEY', '{api_key}')), files=(('.vibe/config.toml', '# mistral-vibe pointed at the conformance endpoint: written to {dir}/.vibe/config.toml\n# (VIBE_HOME defaults to ~/.vibe; HOME={dir}). The API key is read from LOCAL_API_KEY.\nactive_model = "local"\nenable_telemetry = false\nenable_update_checks = false\nenable_auto_update = false\n\n[[providers]]\nname = "local"\napi_base = "{base_url}"\napi_key_env_var = "LOCAL_API_KEY"\napi_style = "openai"\nbackend = "generic"\n\n[[models]]\nname = "{model}"\nprovider = "local"\nalias = "local"\n'),), timeout=30.0, grace=5.0))()
try:
    state.check()
    state.mcp_session(server=True)
    state.check()
finally:
    state.teardown()

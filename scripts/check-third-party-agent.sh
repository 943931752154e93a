#!/usr/bin/env bash
# Run the ACP conformance machine on one third-party agent installed by
# scripts/install-third-party-agents.sh, with the options docs/conformance.md
# ("Third-party ACP agents") gives for it.
#
#   scripts/check-third-party-agent.sh NAME [SEED] [EXTRA CONFORMANCE OPTIONS...]
#
# NAME is qwen-code, codex-acp or opencode; SEED defaults to 1. Runs the checkout's code
# (python -m trio_agents._cli from the repository root; PYTHON overrides the interpreter) and
# gives every agent a scratch HOME inside the example's directory.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:?usage: $0 qwen-code|codex-acp|opencode [SEED] [OPTIONS...]}"
seed="${2:-1}"
shift $(($# >= 2 ? 2 : 1))
prefix="${THIRD_PARTY:-$root/.third-party}"
python="${PYTHON:-python3}"
bin="$prefix/$name/node_modules/.bin"
[[ -d "$bin" ]] || { echo "$name is not installed in $prefix: run scripts/install-third-party-agents.sh" >&2; exit 2; }

options=(--env 'HOME={dir}')
case "$name" in
  qwen-code)
    options+=(--env QWEN_TELEMETRY_ENABLED=0 --env QWEN_USAGE_STATISTICS_ENABLED=0)
    command=("$bin/qwen" --acp --auth-type openai) ;;
  codex-acp)
    options+=(--env 'CODEX_HOME={dir}/codex'
      --config-file "codex/config.toml=@$root/scripts/third-party/codex-config.toml")
    command=("$bin/codex-acp") ;;
  opencode)
    options+=(--env 'OPENCODE_CONFIG={dir}/opencode.json'
      --config-file "opencode.json=@$root/scripts/third-party/opencode.json"
      --env OPENCODE_DISABLE_MODELS_FETCH=1 --env OPENCODE_DISABLE_AUTOUPDATE=1
      --env OPENCODE_DISABLE_SHARE=1 --env OPENCODE_DISABLE_LSP_DOWNLOAD=1
      --env OPENCODE_DISABLE_DEFAULT_PLUGINS=1)
    command=("$bin/opencode" acp) ;;
  *) echo "unknown agent $name: qwen-code, codex-acp or opencode" >&2; exit 2 ;;
esac

cd "$root"
exec env PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$python" -m trio_agents._cli conformance --acp \
  --seed "$seed" "${options[@]}" "$@" -- "${command[@]}"

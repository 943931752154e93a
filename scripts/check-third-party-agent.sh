#!/usr/bin/env bash
# Run the ACP conformance suite on one third-party agent installed by
# scripts/install-third-party-agents.sh, configured as scripts/third-party/agents.toml says.
#
#   scripts/check-third-party-agent.sh NAME [SEED] [EXTRA CONFORMANCE OPTIONS...]
#
# SEED defaults to 1. Runs the checkout's code; PYTHON overrides the interpreter (default
# the checkout's .venv), THIRD_PARTY the install prefix (default .third-party/).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:?usage: $0 NAME [SEED] [OPTIONS...]}"
shift
seed=1
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then  # a seed, or the first of the options
  seed="$1"
  shift
fi
python="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$python" ]] || python=python3
exec "$python" "$root/scripts/acp_matrix.py" --prefix "${THIRD_PARTY:-$root/.third-party}" \
  check "$name" -- --seed "$seed" "$@"

#!/usr/bin/env bash
# Install the third-party ACP agents of the conformance matrix, each pinned to the exact
# version its column was recorded on (scripts/third-party/agents.toml; D102, D478).
#
#   scripts/install-third-party-agents.sh [NAME ...]     # all of them by default
#
# Each goes into its own prefix under $THIRD_PARTY (default .third-party/, gitignored): npm
# packages with `npm install --prefix`, PyPI ones in a virtual environment of their own.
# Re-running is cheap: what is installed at its pin is skipped. Not run in CI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$python" ]] || python=python3
exec "$python" "$root/scripts/acp_matrix.py" --prefix "${THIRD_PARTY:-$root/.third-party}" install "$@"

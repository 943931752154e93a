#!/usr/bin/env bash
# Install the third-party ACP agents that docs/conformance.md ("Third-party ACP agents")
# runs the suite against, each pinned to the exact version the findings were recorded on.
#
#   scripts/install-third-party-agents.sh [PREFIX]     # PREFIX defaults to .third-party
#
# Each agent goes into its own PREFIX/<name> npm prefix so their dependency trees never
# meet; the commands end up in PREFIX/<name>/node_modules/.bin/. Re-running is cheap: an
# agent whose pinned version is already installed is skipped. Needs node >= 20 and npm.
# Not run in CI (about 1 GB together, see docs/design.md D102); findings are reproduced
# by hand with the commands in docs/conformance.md.
set -euo pipefail

prefix="${1:-.third-party}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

# name  package  version  command (relative to the name's node_modules/.bin)
agents=(
  "qwen-code @qwen-code/qwen-code 0.24.4 qwen"
  "codex-acp @zed-industries/codex-acp 0.16.0 codex-acp"
  "opencode opencode-ai 1.18.33 opencode"
)

installed_version() {
  # $1 = prefix dir, $2 = package; prints the installed version or nothing.
  local manifest="$1/node_modules/$2/package.json"
  [[ -f "$manifest" ]] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$manifest"
}

for entry in "${agents[@]}"; do
  read -r name package version command <<<"$entry"
  dir="$prefix/$name"
  if [[ "$(installed_version "$dir" "$package")" == "$version" && -x "$dir/node_modules/.bin/$command" ]]; then
    echo "$name: $package@$version already installed"
    continue
  fi
  echo "$name: installing $package@$version into $dir"
  mkdir -p "$dir"
  start=$SECONDS
  # --save-exact pins the version in the prefix's package.json too; no audit/fund network
  # round-trips, which matter on a machine that reaches only the registry.
  npm install --prefix "$dir" --save-exact --no-audit --no-fund --loglevel=error \
    "$package@$version"
  echo "$name: done in $((SECONDS - start))s, $(du -sh "$dir" | cut -f1)"
done

echo
for entry in "${agents[@]}"; do
  read -r name package version command <<<"$entry"
  echo "$name: $prefix/$name/node_modules/.bin/$command"
done

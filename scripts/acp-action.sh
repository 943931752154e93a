#!/usr/bin/env bash
# The run step of the repository's GitHub composite action (action.yml, D478): the ACP
# conformance suite on the agent ACP_AGENT_COMMAND names, with its reports written to
# ACP_REPORT_DIR (report.json, junit.xml, report.html) and the verdict added to the job's
# summary. Exits as the suite does. Run by hand, it needs only those variables:
#
#   ACP_AGENT_COMMAND='node agent.js' ACP_REPORT_DIR=out scripts/acp-action.sh
set -euo pipefail

: "${ACP_AGENT_COMMAND:?set ACP_AGENT_COMMAND to the command line of the agent}"
dir="${ACP_REPORT_DIR:-acp-conformance}"
python="${ACP_PYTHON:-python}"
mkdir -p "$dir"

# Word-split the command and the extra options as a POSIX shell would, quotes honoured; a
# value that does not split (an unbalanced quote) stops the run, naming it.
split_words() {
  local what="$1" value="$2" words
  words="$(mktemp)"
  if ! "$python" -c '
import shlex, sys
try:
    words = shlex.split(sys.argv[1])
except ValueError as exc:
    sys.exit(f"acp-action: {sys.argv[2]} {sys.argv[1]!r} does not split into words: {exc}; balance its quotes")
sys.stdout.write("\0".join(words))' "$value" "$what" >"$words"; then
    rm -f "$words"
    exit 2
  fi
  mapfile -d '' "$3" <"$words"
  rm -f "$words"
}
split_words ACP_AGENT_COMMAND "$ACP_AGENT_COMMAND" agent
split_words ACP_ARGS "${ACP_ARGS:-}" extra
((${#agent[@]})) || { echo "acp-action: ACP_AGENT_COMMAND is empty: name the agent's command" >&2; exit 2; }

options=(--acp --profile "${ACP_PROFILE:-ci}"
  --report-json "$dir/report.json" --junit-xml "$dir/junit.xml" --report-html "$dir/report.html")
[[ -n "${ACP_SEED:-}" ]] && options+=(--seed "$ACP_SEED")
[[ -n "${ACP_BASELINE:-}" ]] && options+=(--baseline "$ACP_BASELINE")
[[ -n "${ACP_FAIL_ON:-}" ]] && options+=(--fail-on "$ACP_FAIL_ON")

status=0
"$python" -m trio_agents._cli conformance "${options[@]}" "${extra[@]}" -- "${agent[@]}" \
  | tee "$dir/console.txt" || status=$?

verdict="$(sed -n 's/^  verdict: //p' "$dir/console.txt" | tail -n 1)"
if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
  # "CONFORMANT" or "NOT CONFORMANT", to compare; the headline says what failed below MUST.
  word="$(printf '%s' "$verdict" | sed -E 's/^(NOT CONFORMANT|CONFORMANT).*/\1/')"
  echo "verdict=${word:-NOT RUN}" >>"$GITHUB_OUTPUT"
  echo "headline=${verdict:-NOT RUN}" >>"$GITHUB_OUTPUT"
fi
if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
  {
    echo "## ACP conformance: ${verdict:-no verdict}"
    echo
    echo '```text'
    grep -E '^    (MUST|SHOULD|INFO) ' "$dir/console.txt" || true
    echo '```'
    echo
    echo "Reports: \`$dir/report.html\`, \`$dir/report.json\`, \`$dir/junit.xml\`."
  } >>"$GITHUB_STEP_SUMMARY"
fi
exit "$status"

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

# Word-split the command and the extra options as a POSIX shell would, quotes honoured.
read_words() { "$python" -c 'import shlex, sys; print("\0".join(shlex.split(sys.argv[1])), end="")' "$1"; }
mapfile -d '' agent < <(read_words "$ACP_AGENT_COMMAND")
mapfile -d '' extra < <(read_words "${ACP_ARGS:-}")
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
  echo "verdict=${verdict:-NOT RUN}" >>"$GITHUB_OUTPUT"
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

"""The properties the shell machine checks, rule by rule (S1-S10 of docs/contract.md). Each
says, in the contract's words, what a violation quotes. Pure: no trio, no Hypothesis."""

from __future__ import annotations

from ._properties import Property

__all__ = [
    "BASH_RESULT_ERROR",
    "BASH_WORKDIR",
    "ENV_PASSED_EXPLICITLY",
    "ENV_SCRUBBED",
    "EXECUTOR_CLOSE_REAPS",
    "GROUP_KILLED",
    "JOB_OUTCOME",
    "NON_OWNER_REFUSED",
    "NOTICE_DELIVERED",
    "NOTICE_ONLY_TO_OWNER",
    "OUTCOME_FIELDS",
    "OUTPUT_SPILLED_PRIVATELY",
    "OUTPUT_TAIL_KEPT",
    "OWNER_CLOSE_REAPS",
    "OWNER_SERVED",
    "OWNER_TOKEN_KEPT",
    "PROPERTIES",
    "READS_CONSUME_OUTPUT",
    "SPEC_RESOLVED",
    "SPILL_DIRECTORY_PER_OWNER",
    "STDIN_CLOSED",
]


def _shell(rule: str, name: str, says: str) -> Property:
    return Property(rule, name, "shell", says)


ENV_SCRUBBED = _shell(
    "S1",
    "env-scrubbed",
    "run(spec) runs bash -c with only the allowed names of the environment (PATH, HOME, LANG, "
    "LC_*, TERM, USER, SHELL, TMPDIR, TZ, ...), none whose value carries a credential URL, "
    "then NO_COLOR=1, TERM=dumb, PAGER=cat, GIT_PAGER=cat, then what the user passed "
    "explicitly",
)
ENV_PASSED_EXPLICITLY = _shell(
    "S8",
    "env-passed-explicitly",
    "the names in the executor's pass_env reach a command with this process's values, and "
    "the variables of its env with the values given, credentials included",
)
STDIN_CLOSED = _shell(
    "S1", "stdin-closed", "run(spec) runs bash -c in a process group of its own, with stdin closed"
)
GROUP_KILLED = _shell(
    "S1",
    "group-killed",
    "a timeout or a cancellation kills the whole group: SIGTERM, the grace period, SIGKILL "
    "(so it ends within the grace, and no process of its group is left)",
)
OUTCOME_FIELDS = _shell(
    "S1",
    "outcome-fields",
    "the outcome's fields are independent of each other: exit_code (None when a signal ended "
    "it), signal, timed_out, cancelled, and per stream text, truncated, spill_path",
)
JOB_OUTCOME = _shell(
    "S1",
    "job-outcome",
    "a job ends in one outcome, which never changes: cancelled when the executor killed it "
    "(a kill, its owner closing), otherwise its own exit code, and no signal",
)
OWNER_TOKEN_KEPT = _shell(
    "S2",
    "owner-token-kept",
    "start(spec, owner=token) starts a background job; owner_of(job_id) returns its token, or "
    "None (also for an unknown job). The executor keeps the token and never interprets it",
)
NON_OWNER_REFUSED = _shell(
    "S3",
    "non-owner-refused",
    "bash_output and bash_kill refuse a caller whose id differs from the job's owner when the "
    "owner is not None; the empty string is an owner like any other. Ownership survives a "
    "reload of the BashTools plugin (a refused kill leaves the job running)",
)
OWNER_SERVED = _shell(
    "S3",
    "owner-served",
    "bash_output and bash_kill refuse only a caller whose id differs from the job's owner when "
    "the owner is not None: the owner (the empty string too) is served, and anybody is for a "
    "job whose owner is None",
)
NOTICE_ONLY_TO_OWNER = _shell(
    "S4",
    "notice-only-to-owner",
    "when a background job ends by itself, a notice is injected into the live agent whose id "
    "is the job's owner: one notice, only for a job that ended by itself, only to its owner",
)
NOTICE_DELIVERED = _shell(
    "S4",
    "notice-delivered",
    "when a background job ends by itself, a notice is injected into the live agent whose id "
    "is the job's owner (it is in the owner's records after its next step)",
)
OWNER_CLOSE_REAPS = _shell(
    "S4",
    "owner-close-reaps",
    "closing an agent kills and reaps its jobs: none of them still runs once the close returns",
)
EXECUTOR_CLOSE_REAPS = _shell(
    "S4",
    "executor-close-reaps",
    "closing the executor silences notices, then kills and reaps every job",
)
OUTPUT_TAIL_KEPT = _shell(
    "S5",
    "output-tail-kept",
    "output past the in-memory cap keeps its tail in memory (truncated, with the stream's "
    "total_bytes)",
)
OUTPUT_SPILLED_PRIVATELY = _shell(
    "S5",
    "output-spilled-privately",
    "output past the in-memory cap spills the complete stream to a private file (directory "
    "mode 0700, file mode 0600, a name nobody can guess)",
)
READS_CONSUME_OUTPUT = _shell(
    "S5",
    "reads-consume-output",
    "a job's output is kept (past the cap, its tail): bash_output reads are consuming, each "
    "starting where the previous one stopped, so they never repeat a line, and together "
    "they show all that a job which completed by itself printed",
)
SPILL_DIRECTORY_PER_OWNER = _shell(
    "S9",
    "spill-directory-per-owner",
    "each owner's output past the cap spills into a 0700 directory of its own, "
    "spill_directory(owner), beside the others in one 0700 root; a directory replaced "
    "behind the executor's back is refused (spill_directory raises OSError, a new spill "
    "hands out no path, nothing lands in the impostor); kill_owned(owner) removes it",
)

BASH_RESULT_ERROR = _shell(
    "S1",
    "bash-result-is-error",
    "a foreground `bash` result is an error result (`is_error`) when the command exits "
    "non-zero, dies of a signal or times out, and not when it exits 0",
)

SPEC_RESOLVED = _shell(
    "S10",
    "spec-resolved",
    "`resolve(request)` keeps the command and the owner, takes the executor's `cwd` as the "
    "working directory or joins a relative `workdir` to it (an absolute one as given), "
    "the executor's `timeout` when none is asked, and caps any timeout at `max_timeout`",
)

BASH_WORKDIR = _shell(
    "S10",
    "bash-workdir",
    "the `bash` tool runs a command in the calling agent's session `cwd` (its header's) when "
    "the call gives no `workdir`, in a relative `workdir` joined to that cwd, in an absolute "
    "one inside it, and refuses one that leads outside it (absolute, `..`, a symlink)",
)

PROPERTIES: tuple[Property, ...] = (
    ENV_SCRUBBED,
    BASH_RESULT_ERROR,
    STDIN_CLOSED,
    GROUP_KILLED,
    OUTCOME_FIELDS,
    JOB_OUTCOME,
    OWNER_TOKEN_KEPT,
    NON_OWNER_REFUSED,
    OWNER_SERVED,
    NOTICE_ONLY_TO_OWNER,
    NOTICE_DELIVERED,
    OWNER_CLOSE_REAPS,
    EXECUTOR_CLOSE_REAPS,
    OUTPUT_TAIL_KEPT,
    OUTPUT_SPILLED_PRIVATELY,
    READS_CONSUME_OUTPUT,
    ENV_PASSED_EXPLICITLY,
    SPILL_DIRECTORY_PER_OWNER,
    SPEC_RESOLVED,
    BASH_WORKDIR,
)
"""The properties the shell machine checks, each of one rule of the contract."""

"""A stand-in server for tests/test_sandbox.py: a runtime whose agent `A` starts one
background job per way out of a process group, then waits to be signalled.

    python -m tests.support.sandbox_server WORKDIR MARKER

It prints one line: what a sandboxed command read from `/proc/$PPID/environ` and every other
environ it could see, then (for the control) what an unsandboxed one read from its parent's,
as JSON, and `ready`. Then it waits until SIGTERM, SIGKILL or end of stdin.
"""

from __future__ import annotations

import json
import os
import sys

import trio

from trio_agents import MemoryStore, ShellExecutor, ShellRequest, open_runtime

# The interpreter itself, not a virtualenv's link to it: a checkout under /tmp (a venv there)
# is under the sandbox's private /tmp, out of a command's sight.
PYTHON = os.path.realpath(sys.executable)

ENVIRON = (
    "tr '\\0' '\\n' < /proc/$PPID/environ; "
    "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done"
)


def escapes(marker: str, python: str) -> dict[str, str]:
    """One background command per way out of a process group, each leaving a `sleep` whose
    command line holds `{marker}-{n}` (n = 1..9) behind, while the job itself waits on."""
    sleeper = "exec -a {m} sleep 1000"
    daemon = (
        "import os, sys\n"
        "if os.fork(): sys.exit()\n"
        "{call}\n"
        "if os.fork(): sys.exit()\n"
        "os.execvp('bash', ['bash', '-c', {command!r}])\n"
    )
    ways = {
        "setsid": "setsid bash -c '{s}' & sleep 1000",
        "setsid -f": "setsid -f bash -c '{s}'; sleep 1000",
        "set -m": "set -m; bash -c '{s}' & sleep 1000",
        "setpgid daemon": "{py} -c {pgid}; sleep 1000",
        "setsid daemon": "{py} -c {sid}; sleep 1000",
        "nohup": "nohup bash -c '{s}' > /dev/null 2>&1 & sleep 1000",
        "disown": "bash -c '{s}' & disown; sleep 1000",
        "double fork": "bash -c \"bash -c '{s}' & exit\"; sleep 1000",
        "( cmd & )": "( {s} & ); sleep 1000",
    }
    commands: dict[str, str] = {}
    for n, (name, template) in enumerate(ways.items(), 1):
        m = f"{marker}-{n}"
        s = sleeper.format(m=m)
        pgid = daemon.format(call="os.setpgid(0, 0)", command=s)
        sid = daemon.format(call="os.setsid()", command=s)
        commands[name] = template.format(s=s, py=python, pgid=_quote(pgid), sid=_quote(sid))
    return commands


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


async def main(workdir: str, marker: str) -> None:
    shell = ShellExecutor(cwd=workdir, grace=0.3)
    async with open_runtime(MemoryStore(), shell=shell) as rt:
        for command in escapes(marker, PYTHON).values():
            await rt.shell.start(rt.shell.resolve(ShellRequest(command, owner="A")))
        seen = await rt.shell.run(rt.shell.resolve(ShellRequest(ENVIRON)))
        control = ShellExecutor(cwd=workdir, sandbox=None)
        parent = await control.run(control.resolve(ShellRequest(ENVIRON.split(";", 1)[0])))
        print(json.dumps({"sandboxed": seen.stdout.text, "control": parent.stdout.text}))
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])

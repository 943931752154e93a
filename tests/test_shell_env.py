"""No secret reaches a command (issue 16, acceptance 5): the environment by allowlist, and a
non-dumpable server whose /proc/<pid>/environ its same-user commands cannot read. The end
to end tests run the real `trio-agents acp` as an unprivileged user (root reads anything),
with 30 real credential names in its environment, and prompt its bash tool."""

from __future__ import annotations

import json
import os
import pwd
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from trio_agents import ShellExecutor, make_non_dumpable
from trio_agents._shell._env import carries_credentials, command_environment

from .support.unprivileged import python_path_for_nobody

# Each value is unique, so finding it anywhere in a command's output is a leak.
CREDENTIALS: Mapping[str, str] = {
    "GITHUB_PAT": "ghp_probeGithubPat0001",
    "GITHUB_TOKEN": "ghs_probeGithubToken0002",
    "GH_TOKEN": "gho_probeGhToken0003",
    "DATABASE_URL": "postgres://app:probeDbPassword0004@db.internal:5432/app",
    "NPM_CONFIG__AUTH": "probeNpmAuth0005",
    "NPM_TOKEN": "npm_probeNpmToken0006",
    "SSH_AUTH_SOCK": "/tmp/ssh-probeAgentSock0007/agent.1",
    "MYSQL_PWD": "probeMysqlPwd0008",
    "PGPASSWORD": "probePgPassword0009",
    "REDIS_URL": "redis://default:probeRedisPass0010@cache:6379/0",
    "HTTP_PROXY": "http://proxyuser:probeHttpProxy0011@proxy:3128",
    "HTTPS_PROXY": "http://proxyuser:probeHttpsProxy0012@proxy:3128",
    "ALL_PROXY": "socks5://proxyuser:probeAllProxy0013@proxy:1080",
    "OPENAI_API_KEY": "sk-probeOpenaiKey0014",
    "ANTHROPIC_API_KEY": "sk-ant-probeAnthropicKey0015",
    "AWS_ACCESS_KEY_ID": "AKIAPROBEACCESSKEY0016",
    "AWS_SECRET_ACCESS_KEY": "probeAwsSecretAccessKey0017",
    "AWS_SESSION_TOKEN": "probeAwsSessionToken0018",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secrets/probeGcpCredentials0019.json",
    "AZURE_CLIENT_SECRET": "probeAzureClientSecret0020",
    "HF_TOKEN": "hf_probeHfToken0021",
    "SLACK_BOT_TOKEN": "xoxb-probeSlackBotToken0022",
    "STRIPE_API_KEY": "sk_live_probeStripeKey0023",
    "DOCKER_AUTH_CONFIG": '{"auths":{"r":{"auth":"probeDockerAuth0024"}}}',
    "KUBECONFIG": "/secrets/probeKubeconfig0025",
    "VAULT_TOKEN": "hvs.probeVaultToken0026",
    "SENTRY_DSN": "https://probeSentryKey0027@o1.ingest.sentry.io/1",
    "TWINE_PASSWORD": "pypi-probeTwinePassword0028",
    "CI_JOB_TOKEN": "probeCiJobToken0029",
    "DIGITALOCEAN_ACCESS_TOKEN": "dop_v1_probeDoToken0030",
}
# An allowed name whose value carries a credential: dropped too (D141).
ALLOWED_BUT_CREDENTIAL = ("LC_PROBE_REMOTE", "https://user:probeLcPassword0031@host/")


def test_thirty_credentials_meet_the_allowlist_and_none_gets_through() -> None:
    base = {**CREDENTIALS, "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC"}
    base[ALLOWED_BUT_CREDENTIAL[0]] = ALLOWED_BUT_CREDENTIAL[1]
    env = command_environment(base)
    assert not set(env) & {*CREDENTIALS, ALLOWED_BUT_CREDENTIAL[0]}
    assert {"PATH", "LANG", "LC_TIME", "TZ", "NO_COLOR"} <= set(env)
    # Explicit passes are passed as given, credentials included; `env` wins over all.
    passed = command_environment(base, pass_env=["GITHUB_PAT", "MISSING"], env={"TZ": "X"})
    assert (passed["GITHUB_PAT"], passed["TZ"], "MISSING" in passed) == (
        CREDENTIALS["GITHUB_PAT"],
        "X",
        False,
    )


@pytest.mark.parametrize(
    ("value", "carries"),
    [
        ("postgres://u:p@h/db", True),
        ("https://token@github.com/x.git", True),
        ("see http://user:pw@proxy:3128 here", True),
        ("https://example.com/a@b", False),
        ("/usr/local/bin:/usr/bin", False),
        ("user@example.com", False),
    ],
)
def test_a_url_with_userinfo_carries_credentials(value: str, carries: bool) -> None:
    assert carries_credentials(value) is carries


def test_bad_pass_env_names_are_refused_naming_the_name() -> None:
    with pytest.raises(ValueError, match="'A=B' is not an environment variable name"):
        ShellExecutor(pass_env=["A=B"])
    with pytest.raises(ValueError, match="'' is not an environment variable name"):
        ShellExecutor(env={"": "x"})


def test_the_cli_refuses_a_bad_pass_env_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_agents._cli", "acp", "--pass-env", "A=B"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "'A=B' is not an environment variable name" in done.stderr
    assert "Traceback" not in done.stderr


# -- the real server, as an unprivileged user --------------------------------------------------


def _unprivileged() -> list[str]:
    """The prefix that runs a command as an unprivileged user: `setpriv` to nobody when we
    are root (root reads every /proc file), nothing when we already are not."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is needed to drop root for this test"
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@pytest.fixture
def shared_dir() -> Iterator[str]:
    """A directory the unprivileged user owns (pytest's tmp_path is root's, mode 0700)."""
    path = tempfile.mkdtemp(prefix="trio-agents-envtest-")
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _server_env(path: str | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin") if path is None else path,
        "PYTHONPATH": os.pathsep.join(
            p for p in (python_path_for_nobody(), os.environ.get("PYTHONPATH")) if p
        ),
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        **CREDENTIALS,
    }
    env[ALLOWED_BUT_CREDENTIAL[0]] = ALLOWED_BUT_CREDENTIAL[1]
    return env


def _no_bwrap_path(shared_dir: str) -> str:
    """A PATH with what the commands here need and no bwrap: a machine that cannot sandbox,
    where `--allow-unsandboxed` leaves the non-dumpable server as the floor (S8)."""
    bin_dir = os.path.join(shared_dir, "bin")
    os.mkdir(bin_dir)
    for tool in ("bash", "cat", "env", "printf"):
        found = shutil.which(tool)
        assert found is not None, tool
        os.symlink(found, os.path.join(bin_dir, tool))
    return bin_dir


class Acp:
    """A raw newline-delimited JSON-RPC client of a real `trio-agents acp` process."""

    def __init__(self, argv: list[str], cwd: str, path: str | None = None) -> None:
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=_server_env(path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.frames: list[dict[str, Any]] = []
        self._ids = 0
        self._buffer = b""

    def request(self, method: str, params: Mapping[str, Any], *, timeout: float = 60) -> Any:
        self._ids += 1
        frame = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            for received in self._read(deadline):
                if received.get("id") == self._ids and "method" not in received:
                    assert "error" not in received, received
                    return received["result"]

    def _read(self, deadline: float) -> list[dict[str, Any]]:
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            left = deadline - time.monotonic()
            assert left > 0, "no answer from the server in time"
            assert selector.select(left), "no answer from the server in time"
        chunk = os.read(self.process.stdout.fileno(), 1 << 16)
        assert chunk, f"the server exited: {self.close()}"
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        received = [json.loads(line) for line in lines if line.strip()]
        self.frames.extend(received)
        return received

    def close(self) -> str:
        """End its input, wait for it to exit; its stderr."""
        assert self.process.stdin is not None
        assert self.process.stderr is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait(timeout=60)
        if self.process.stdout is not None:
            self.process.stdout.close()
        with self.process.stderr:
            return self.process.stderr.read().decode(errors="replace")

    def text(self) -> str:
        """Every string in every frame received, one per line."""
        return "\n".join(_strings(self.frames))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]
            yield from _strings(item)  # pyright: ignore[reportUnknownArgumentType]
    elif isinstance(value, list):
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            yield from _strings(item)  # pyright: ignore[reportUnknownArgumentType]


def _prompt(acp: Acp, session: str, command: str) -> None:
    prompt = [{"type": "text", "text": f"!{command}"}]
    answer = acp.request("session/prompt", {"sessionId": session, "prompt": prompt})
    assert answer["stopReason"] == "end_turn", answer


def _serve(shared_dir: str, *extra: str, path: str | None = None) -> tuple[Acp, str]:
    store = os.path.join(shared_dir, "sessions.db")
    argv = [*_unprivileged(), sys.executable, "-m", "trio_agents._cli", "acp", "--store", store]
    acp = Acp([*argv, "--mode", "auto", *extra], cwd=shared_dir, path=path)
    acp.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = acp.request("session/new", {"cwd": shared_dir, "mcpServers": []})["sessionId"]
    return acp, session


@pytest.mark.subprocess
@pytest.mark.parametrize("sandbox", ["sandboxed", "unsandboxed"])
def test_no_credential_reaches_env_in_a_command_of_the_real_server(
    sandbox: str, shared_dir: str
) -> None:
    if sandbox == "sandboxed":
        acp, session = _serve(shared_dir)
    else:
        acp, session = _serve(shared_dir, "--allow-unsandboxed", path=_no_bwrap_path(shared_dir))
    try:
        _prompt(acp, session, "env; echo env-listed-$((6*7))")
        _prompt(acp, session, 'cat /proc/$PPID/environ; echo "cat-status=$?"')
    finally:
        stderr = acp.close()
    text = acp.text()
    assert "env-listed-42" in text, f"the command did not run: {text[-2000:]}\n{stderr}"
    assert "HOME=/tmp" in text  # the allowlist got through: the output is the env
    leaked = sorted(name for name in CREDENTIALS if name in text)
    assert not leaked, f"names leaked into a command: {leaked}"
    values = sorted(name for name, value in CREDENTIALS.items() if value in text)
    assert not values, f"values leaked into a command: {values}"
    assert ALLOWED_BUT_CREDENTIAL[1] not in text
    assert "cat-status=" in text, text[-2000:]  # the read of the parent's environment ran
    if sandbox == "sandboxed":
        # Its parent is the sandbox's own init, whose environment is the command's: the
        # fresh /proc shows nothing of the server (S6); no credential above, nor here.
        assert "cat-status=0" in text, text[-2000:]
    else:
        # The server is non-dumpable: its same-user command cannot read its environment.
        assert "cat-status=1" in text, text[-2000:]
        assert "Permission denied" in text, text[-2000:]
        assert "WITHOUT a sandbox" in stderr, stderr
    assert acp.process.returncode == 0, stderr


@pytest.mark.subprocess
def test_a_name_passed_with_pass_env_reaches_the_command_as_given(shared_dir: str) -> None:
    acp, session = _serve(shared_dir, "--pass-env", "GITHUB_PAT")
    try:
        _prompt(
            acp, session, 'printf "pat=%s\\n" "$GITHUB_PAT"; printf "db=[%s]\\n" "$DATABASE_URL"'
        )
    finally:
        acp.close()
    text = acp.text()
    assert f"pat={CREDENTIALS['GITHUB_PAT']}" in text
    assert "db=[]" in text
    assert CREDENTIALS["DATABASE_URL"] not in text


SERVER = """
import sys, trio
from trio_agents import ShellExecutor, ShellRequest, make_non_dumpable
if sys.argv[1] == "protect":
    assert make_non_dumpable()
async def main():
    shell = ShellExecutor(grace=0.5, sandbox=None)  # the floor: no sandbox to lean on
    spec = shell.resolve(ShellRequest('cat /proc/$PPID/environ; echo " status=$?"'))
    result = await shell.run(spec)
    print(result.stdout.text + result.stderr.text)
trio.run(main)
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("mode", ["protect", "control"])
def test_a_non_dumpable_server_hides_its_environment_from_same_user_commands(
    mode: str, shared_dir: str
) -> None:
    done = subprocess.run(
        [*_unprivileged(), sys.executable, "-c", SERVER, mode],
        cwd=shared_dir,
        env={**_server_env(), "TRIO_AGENTS_PROBE_SECRET": "probe-server-secret-9"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    if mode == "protect":
        assert "probe-server-secret-9" not in done.stdout
        assert "Permission denied" in done.stdout, done.stdout
        assert "status=1" in done.stdout, done.stdout
    else:
        # The same command can read a dumpable server's environment: what the test guards.
        assert "probe-server-secret-9" in done.stdout, done.stdout
        assert "status=0" in done.stdout, done.stdout


def test_make_non_dumpable_reports_what_it_did() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import trio_agents as t; print(t.make_non_dumpable())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == str(sys.platform.startswith("linux"))
    assert callable(make_non_dumpable)


def test_make_non_dumpable_starts_no_process() -> None:
    # `ctypes.util.find_library` would run `ldconfig -p` on every start of a server (D375).
    script = (
        "import sys, trio_agents as t\n"
        "seen = []\n"
        "sys.addaudithook(lambda e, a: seen.append(a[0]) if e == 'subprocess.Popen' else None)\n"
        "print(t.make_non_dumpable(), seen)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == f"{sys.platform.startswith('linux')} []"


@pytest.mark.subprocess
@pytest.mark.parametrize("sandbox", ["sandboxed", "unsandboxed"])
def test_the_chat_server_is_non_dumpable_and_passes_no_credential(
    sandbox: str, shared_dir: str
) -> None:
    extra = [] if sandbox == "sandboxed" else ["--allow-unsandboxed"]
    path = None if sandbox == "sandboxed" else _no_bwrap_path(shared_dir)
    commands = "!env; echo env-listed-$((6*7))\n!cat /proc/$PPID/environ; echo cat-status=$?\n"
    store = os.path.join(shared_dir, "sessions.db")
    argv = [*_unprivileged(), sys.executable, "-m", "trio_agents._cli", "chat"]
    done = subprocess.run(
        [*argv, "--auto", "--model", "offline", "--store", store, *extra],
        input=commands,
        cwd=shared_dir,
        env=_server_env(path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "env-listed-42" in done.stdout, done.stdout
    leaked = sorted(name for name in CREDENTIALS if name in done.stdout)
    assert not leaked, f"names leaked into a command: {leaked}"
    values = sorted(name for name, value in CREDENTIALS.items() if value in done.stdout)
    assert not values, f"values leaked into a command: {values}"
    if sandbox == "sandboxed":
        # The parent it reads is the sandbox's init, with none of them (S6).
        assert "cat-status=0" in done.stdout, done.stdout
    else:
        # The floor: the chat is non-dumpable, so its same-user command cannot read it.
        assert "cat-status=1" in done.stdout, done.stdout
        assert "Permission denied" in done.stdout, done.stdout

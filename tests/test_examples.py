"""The examples a user copies run as written (issue 19, item 1): the real-model agent against a
scripted OpenAI-compatible endpoint on loopback, and the plugin example. The other examples
are run by the tests of what they show (test_function_tools, test_turn_views, test_tracing,
test_conformance_targets, test_peer_adapters)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import trio

from .support.sse_server import DONE, Reply, finish, serve, text, tool_delta, usage

ROOT = pathlib.Path(__file__).resolve().parents[1]


def sse(*steps: bytes) -> Reply:
    return Reply(body=list(steps))


@pytest.mark.subprocess
async def test_the_real_model_example_reads_a_file_and_answers(tmp_path: pathlib.Path) -> None:
    (tmp_path / "README.md").write_text("# demo\nA project that counts sheep.\n")
    call = sse(
        tool_delta(0, id="call_1", name="read_file", arguments='{"path": "README.md"}'),
        finish("tool_calls"),
        DONE,
    )
    answer = sse(text("It counts "), text("sheep."), finish("stop"), usage(50, 4), DONE)
    async with serve(call, answer) as server:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "OPENAI_MODEL": "scripted",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "k",
        }
        done = await trio.run_process(
            [sys.executable, str(ROOT / "examples" / "real_model.py"), "What is it?"],
            cwd=tmp_path,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert "[read_file {'path': 'README.md'}]" in out
    assert "It counts sheep." in out
    assert out.rstrip().endswith("[completed; 2 steps; Usage(input_tokens=50, output_tokens=4)]")
    first, second = (request.body for request in server.requests)
    system = first["messages"][0]
    assert system["role"] == "system"
    assert f"Working directory: {tmp_path} " in system["content"]
    assert "- read_file: Read a UTF-8 text file of the project." in system["content"]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["read_file"]
    results = [m for m in second["messages"] if m["role"] == "tool"]
    readme = "# demo\nA project that counts sheep.\n"
    assert results == [{"role": "tool", "tool_call_id": "call_1", "content": readme}]


@pytest.mark.subprocess
def test_the_real_model_example_without_a_model_says_what_to_set(tmp_path: pathlib.Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "real_model.py")],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "set OPENAI_MODEL (and OPENAI_BASE_URL, OPENAI_API_KEY) to name a model first"
    )


@pytest.mark.subprocess
def test_the_plugin_example_resumes_its_session_after_a_reload(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plugin.py")],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "notes file: ['buy milk', 'call Ada']",
        "turns in the resumed session: 2",
    ]

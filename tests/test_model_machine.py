"""The model machine (E1-E6, design D433): the built-in `OpenAICompatibleModel` passes it, a
maker given with `--model-target` is checked alone, and a seeded maker's failure replays
from its printed reproduction."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, Phase, settings

from agent_conformance import ContractViolation, check_model_conformance
from agent_conformance._conformance import reproduction
from trio_agents import ModelEndpointError, OpenAICompatibleModel
from trio_agents._cli._main import main

from .support.known_bad._model import key_in_error

SMALL = settings(
    max_examples=100,  # the machine runs a fifth: 20 examples
    stateful_step_count=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_the_builtin_adapter_passes_the_model_machine() -> None:
    report = check_model_conformance(settings=SMALL, seed=3)
    assert report.passed
    assert {p.rule for p in report.checked} == {"E1", "E2", "E3", "E4", "E5", "E6"}


def test_a_maker_given_alone_is_the_only_target_checked(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["conformance", "--model-target", "agent_conformance._targets:builtin_model"]
    code = main([*argv, "--seed", "1", "--jobs", "1", "--max-examples", "10"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "model machine: passed" in out
    assert "agent machine" not in out  # only the machine whose target is given runs


def test_a_seeded_maker_fails_with_its_rule_and_a_reproduction_that_replays_it() -> None:
    found = settings(SMALL, phases=[Phase.generate])
    with pytest.raises(ContractViolation, match=r"E4 \(failure-named-not-leaked\)") as info:
        check_model_conformance(key_in_error, settings=found, seed=1)
    assert "sk-conformance-SECRET-7f3a9c" not in str(info.value)  # the finding masks it too
    script = reproduction("model", info.value, "tests.support.known_bad:key_in_error")
    assert script is not None
    assert "state.open_endpoint(" in script, script
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "E4 (failure-named-not-leaked)" in ran.stderr


def test_the_model_machine_wants_its_own_target(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["conformance", "--shell-target", "tests.support.known_bad:leader_only_kill"]
    assert main([*argv, "--machine", "model"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "trio-agents conformance: --machine: the model machine checks a model target, "
        "and none is given: add --model-target, or leave out the model machine"
    )


@pytest.mark.parametrize(
    ("base_url", "hidden"),
    [
        ("http://127.0.0.1:9/v1?api-version=2024-q-secret", "2024-q-secret"),
        ("http://user:pa55-word@127.0.0.1:9/v1", "pa55-word"),
        ("http://tok-0123456789@127.0.0.1:9/v1", "tok-0123456789"),
    ],
)
def test_an_echoed_query_or_credential_is_hidden_in_the_error_text(
    base_url: str, hidden: str
) -> None:
    # D433: a server may repeat the URL it was asked in its error text.
    model = OpenAICompatibleModel("m", base_url=base_url, api_key="sk-key-123")
    text = model._redact(f"no such deployment: {base_url} (key sk-key-123)")  # pyright: ignore[reportPrivateUsage]
    assert hidden not in text
    assert "sk-key-123" not in text
    assert "<api key>" in text
    assert issubclass(ModelEndpointError, RuntimeError)

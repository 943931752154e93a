"""The command line's sandbox flags (D485, D486, D493): `--expose-home` takes paths of the
user's home, and the files the agent is steered by are protected from its commands."""

from __future__ import annotations

import argparse
import os
import pathlib

import pytest

from trio_agents._cli._args import add_sandbox, add_system_prompt, home_path, steering_files
from trio_agents._cli._chat_render import describe_call


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(prog="trio-agents acp", exit_on_error=False)
    add_sandbox(made)
    add_system_prompt(made)
    return made


def test_expose_home_takes_a_home_path_in_either_form() -> None:
    home = os.path.expanduser("~")
    assert home_path("~/.gitconfig") == "~/.gitconfig"
    assert home_path(os.path.join(home, ".config", "git")) == "~/.config/git"
    with pytest.raises(argparse.ArgumentTypeError, match=r"'/etc/passwd' is not in your home"):
        home_path("/etc/passwd")
    args = parser().parse_args(["--expose-home", "~/.gitconfig", "--expose-home", "~/.npmrc"])
    assert args.expose_home == ["~/.gitconfig", "~/.npmrc"]


def test_the_system_prompt_file_is_read_and_protected(tmp_path: pathlib.Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("be terse", encoding="utf-8")
    args = parser().parse_args(["--system-prompt-file", str(prompt)])
    assert args.system_prompt == "be terse"
    assert steering_files(args) == (str(prompt),)
    args.mcp = [tmp_path / "missing.json", prompt]
    assert steering_files(args) == (str(prompt),)  # once; a missing file is no file


def test_a_missing_system_prompt_file_is_one_usage_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["--system-prompt-file", str(tmp_path / "nope.md")])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --system-prompt-file: cannot read" in err
    assert "nope.md" in err


def test_the_chat_question_names_a_workdir_asked_for() -> None:
    assert describe_call("bash", {"command": "make", "workdir": "sub"}).endswith("(in sub)")
    assert "(in" not in describe_call("bash", {"command": "make"})

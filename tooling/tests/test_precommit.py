"""scripts/test.sh runs the checks of every pre-commit hook, with the versions the hooks pin."""

import shlex
from pathlib import Path

import yaml

from kbuild.core.tomlcompat import tomllib

REPO = Path(__file__).resolve().parents[2]
# Each hook of .pre-commit-config.yaml and the command of scripts/test.sh that checks the same without
# changing files. A new hook needs its line here and in scripts/test.sh.
CHECKS = {
    "ruff": "ruff check .",
    "ruff-format": "ruff format --check .",
    "clang-format": "clang-format --dry-run --Werror",
    "kbuild-check": "kbuild check",
    "mypy": "mypy",
}


def hooks() -> dict[str, dict]:
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    return {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}


def script_commands() -> list[str]:
    """The commands of scripts/test.sh, each pipeline part on its own, comments left out."""
    lines = [line.split("#")[0].strip() for line in (REPO / "scripts" / "test.sh").read_text().splitlines()]
    return [part.strip() for line in lines for part in line.split("|") if part.strip()]


def test_every_hook_has_its_check_in_the_test_command():
    assert set(hooks()) == set(CHECKS)
    commands = script_commands()
    for hook_id, hook in hooks().items():
        check = CHECKS[hook_id]
        assert shlex.split(hook["entry"])[0] == check.split()[0], hook_id
        assert any(command == check or command.endswith(f" {check}") for command in commands), (
            f"scripts/test.sh does not run `{check}` (the check of the pre-commit hook {hook_id})"
        )


def test_the_test_command_formats_the_files_the_hook_formats():
    pattern = hooks()["clang-format"]["files"]
    assert f"grep -zE '{pattern}'" in (REPO / "scripts" / "test.sh").read_text()


def test_the_hooks_pin_the_versions_the_dev_tools_install():
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    for hook_id in ("ruff", "ruff-format", "clang-format"):
        for pin in hooks()[hook_id]["additional_dependencies"]:
            assert pin in dev, f"{hook_id} pins {pin}; pyproject.toml's dev extra must install it"

"""The documentation cannot rot: the reference is generated from the code and covers every command, option and key
with something said of each; the README stays short; no page, help text or message speaks the project's history
("seed 002", "the seed's") to a user, nor calls a flag a key."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cli_support import invoke

REPO = Path(__file__).resolve().parents[1]
HISTORY_WORDS = re.compile(r"seed[ -]002|the seed's", re.IGNORECASE)
README_LIMIT_BYTES = 8 * 1024


def reference() -> ModuleType:
    """docs/hooks/reference.py, the mkdocs hook that generates the reference pages."""
    name = "mcu_arms_docs_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "docs" / "hooks" / "reference.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_every_command_and_option_has_its_reference_entry() -> None:
    ref = reference()
    page = ref.cli_page()
    commands = ref.commands()
    paths = {command.path for command in commands}
    assert {"mcu-arms run", "mcu-arms compare", "mcu-arms serve green", "mcu-arms serve purple"} <= paths
    for command in commands:
        assert f"## `{command.path}`" in page
        assert command.help, f"{command.path} has no help text for its reference entry"
        for option in command.options:
            assert option.help, f"{command.path} {option.names}: no help text for its reference entry"
            assert f"| {', '.join(f'`{name}`' for name in option.names)} |" in page


def test_every_arm_and_campaign_key_has_its_reference_entry() -> None:
    from mcu_arms.arms.campaign import CAMPAIGN_KEYS
    from mcu_arms.arms.spec import ArmSpec

    ref = reference()
    keys = ref.arm_keys()
    dotted = {key.dotted for key in keys}
    assert set(ArmSpec.model_fields) <= {name.split(".")[0] for name in dotted}
    assert {"steps", "ports.green", "codex.model", "slurm.time", "thresholds.infrastructure_share"} <= dotted
    undocumented = [key.dotted for key in keys if not (key.comment or key.allowed)]
    assert not undocumented, f"arm keys that neither templates/arm.toml nor ALLOWED explain: {undocumented}"
    page = ref.arm_file_page()
    assert all(f"| `{key.dotted}` |" in page for key in keys)
    campaign = ref.campaign_keys()
    assert [key.name for key in campaign] == list(CAMPAIGN_KEYS)
    unexplained = [key.name for key in campaign if not key.comment]
    assert not unexplained, f"campaign keys templates/campaign.toml does not explain: {unexplained}"


def test_the_template_comment_is_the_one_for_its_key() -> None:
    """A block comment explains the first key under it and the alternatives shown commented out, not the next
    key set."""
    said = reference().template_comments(
        '# The arm\'s name.\nname = "x"\ndescription = ""\n\n'
        "# Replicates.\n# seeds = [0, 1]\n# replicates = 3  # or this many\n\n[ports]\n"
        '# A2A ports.\ngreen = "auto"\n'
    )
    assert said["name"] == "The arm's name." and said["description"] == ""
    assert said["seeds"] == "Replicates." and said["replicates"] == "Replicates. or this many"
    assert said["ports.green"] == "A2A ports."


def test_schemas_exit_codes_variables_and_limits_are_generated() -> None:
    ref = reference()
    schemas = ref.schemas_page()
    assert "| `status` |" in schemas and "| `milestones` |" in schemas
    codes = {value for _, value, _ in ref.exit_codes()}
    assert {0, 1, 2, 3, 130} <= codes
    variables = dict(ref.environment_variables())
    assert {"MCU_ARMS_OUTPUT_DIR", "MCU_ARMS_STATE_DIR", "MCU_ARMS_VIEW_TOKEN"} <= set(variables)
    assert any(name == "MAX_STEPS" for name, _, _ in ref.limits())


def test_the_readme_is_short_and_its_two_commands_are_unchanged() -> None:
    readme = (REPO / "README.md").read_bytes()
    assert len(readme) <= README_LIMIT_BYTES, f"README.md is {len(readme)} bytes"
    assert readme.decode().startswith(
        "# mcu-arms\n\n```bash\n"
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/mcu-arms run --arm demo\n"
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest\n```\n"
    )
    ci = (REPO / ".ci" / "run").read_text().rstrip("\n").splitlines()
    assert ci[-1] == "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest"


def test_every_page_in_the_navigation_exists_and_every_page_is_in_it() -> None:
    nav = re.findall(r":?\s([\w./-]+\.md)$", (REPO / "mkdocs.yml").read_text(), re.MULTILINE)
    generated = {f"reference/{name}.md" for name in reference().PAGES}
    written = {str(path.relative_to(REPO / "docs")) for path in (REPO / "docs").rglob("*.md")}
    assert set(nav) == written | generated, set(nav) ^ (written | generated)


def _user_facing_strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module that are not docstrings: help texts, messages, table cells."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_history_words_in_pages_templates_arms_or_messages() -> None:
    found = []
    texts = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "templates").glob("*.toml")]
    texts += (REPO / "arms").glob("*.toml")
    for path in texts:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY_WORDS.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    for path in (REPO / "mcu_arms").rglob("*.py"):
        for number, text in _user_facing_strings(path):
            if HISTORY_WORDS.search(text):
                found.append(f"{path.relative_to(REPO)}:{number}: {text.strip()[:100]}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("command", ["", "run", "compare", "codex-home", "serve purple", "serve green", "new"])
def test_no_history_words_in_help_texts(tmp_path: Path, command: str) -> None:
    done = invoke(tmp_path, {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, *command.split(), "--help")
    assert done.exit_code == 0, done.out + done.err
    assert not HISTORY_WORDS.search(done.out), done.out


def test_an_error_names_a_flag_as_a_flag_and_a_variable_as_a_variable() -> None:
    from mcu_arms.contracts.errors import UserError

    assert "flag '--arm'" in str(UserError("no such arm", key="--arm"))
    assert "variable 'MCU_ARMS_STATE_DIR'" in str(UserError("not a directory", key="MCU_ARMS_STATE_DIR"))
    assert "a.toml:3: key 'ports.green'" in str(UserError("busy", path="a.toml", line=3, key="ports.green"))

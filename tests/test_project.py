"""Projects of one's own: `mcu-arms init`, the settings file found from the current directory up, the order in which
flags, environment, settings and defaults win, and the tool's own provenance (version, wheel or checkout)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_support import invoke, make_environment

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.project import find_project
from mcu_arms.contracts.run_report import Provenance
from mcu_arms.report.analysis import _cross_arm_flags, tool_of
from mcu_arms.supervise.provenance import collect_provenance
from mcu_arms.version import PACKAGE_DIR, tool_identity

INIT_FILES = {"arms/demo.toml", "arms/demo_random.toml", "campaigns/demo.toml", "mcu-arms.toml", ".gitignore"}


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


def test_init_makes_a_project_whose_campaign_resolves(tmp_path: Path):
    made = invoke(tmp_path, {}, "init", "study")
    assert made.exit_code == 0, made.err
    assert _files(tmp_path / "study") == INIT_FILES
    assert made.out.splitlines()[-3:] == [
        "  mcu-arms plan --dry-run",
        "  mcu-arms run campaigns/demo.toml",
        "  mcu-arms compare campaigns/demo.toml",
    ]
    planned = invoke(tmp_path / "study", {}, "plan", "--dry-run", "campaigns/demo.toml")
    assert planned.exit_code == 0, planned.err
    assert "demo_random" in planned.out


def test_init_refuses_to_write_over_anything_and_names_it(tmp_path: Path):
    (tmp_path / "arms").mkdir()
    (tmp_path / "arms" / "demo.toml").write_text("mine\n")
    refused = invoke(tmp_path, {}, "init")
    assert refused.exit_code == 2
    assert "arms/demo.toml" in refused.err and "nothing was written" in refused.err
    assert _files(tmp_path) == {"arms/demo.toml"} and (tmp_path / "arms" / "demo.toml").read_text() == "mine\n"


def test_the_settings_file_of_a_parent_is_found_from_a_nested_folder(tmp_path: Path):
    (tmp_path / "mcu-arms.toml").write_text('arms_dir = "my_arms"\noutput_dir = "results"\nstate_dir = "state"\n')
    nested = tmp_path / "agent" / "src" / "deep"
    nested.mkdir(parents=True)
    project = find_project(nested)
    assert project is not None and project.file == tmp_path / "mcu-arms.toml"
    env, _, _ = make_environment(nested, {})
    env.project = project
    assert (env.arms_dir, env.output_dir, env.logs_dir) == (
        tmp_path / "my_arms",
        tmp_path / "results",
        tmp_path / "logs",
    )
    assert project.environment_defaults() == {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}


def test_pyproject_table_is_a_project_and_one_without_it_is_passed_over(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mine"\n\n[tool.mcu-arms]\noutput_dir = "runs"\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n')  # no [tool.mcu-arms]: not a project
    project = find_project(inner)
    assert project is not None and project.describe() == f"{tmp_path / 'pyproject.toml'} [tool.mcu-arms]"
    assert project.settings.output_dir == "runs"


def test_flags_win_over_the_environment_over_settings_over_defaults(tmp_path: Path):
    (tmp_path / "mcu-arms.toml").write_text('output_dir = "from_settings"\n')
    (tmp_path / "sub").mkdir()
    cwd = tmp_path / "sub"

    def output(env_vars: dict[str, str], *flags: str) -> str:
        done = invoke(cwd, env_vars, *flags, "plan", "--dry-run", "--verbose", "--arm", "nothing")
        row = next(line for line in done.out.splitlines() if line.strip().startswith("output_dir"))
        return " ".join(row.split()[1:])

    (tmp_path / "arms").mkdir()
    (tmp_path / "arms" / "nothing.toml").write_text(
        'agent = "random"\ntask = "mine_diamond_from_scratch"\nsimulator = "embedded"\nsteps = 5\n'
        '[ports]\ngreen = "auto"\npurple = "auto"\n'
    )
    assert output({}) == f"{tmp_path / 'from_settings'} settings file"
    summary = invoke(cwd, {}, "plan", "--dry-run", "--arm", "nothing")
    assert f"project settings: {tmp_path / 'mcu-arms.toml'} (found above this folder)" in summary.out
    assert output({"MCU_ARMS_OUTPUT_DIR": "from_env"}) == "from_env environment"
    assert output({"MCU_ARMS_OUTPUT_DIR": "from_env"}, "--output-dir", "from_flag") == "from_flag flag"
    (tmp_path / "mcu-arms.toml").write_text("# nothing set\n")
    assert output({}) == f"{tmp_path / 'output'} default"


@pytest.mark.parametrize(
    ("text", "line", "key", "message"),
    [
        ('arms_dir = "a"\noutput_dirr = "x"\n', 2, "output_dirr", "unknown setting (did you mean 'output_dir'?)"),
        ('arms_dir = "a"\n\noutput_dir = 3\n', 3, "output_dir", "must be a path, as a string (not int)"),
    ],
)
def test_a_bad_setting_is_one_line_naming_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str, message: str
):
    (tmp_path / "mcu-arms.toml").write_text(text)
    (tmp_path / "below").mkdir()
    done = invoke(tmp_path / "below", {}, "tasks")
    assert done.exit_code == 2
    assert done.err.count("\n") == 1, done.err
    assert f"{tmp_path / 'mcu-arms.toml'}:{line}: key '{key}': {message}" in done.err
    with pytest.raises(UserError):
        find_project(tmp_path / "below")


def test_a_bad_key_in_pyproject_is_named_with_its_table(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.mcu-arms]\narms = "a"\n')
    done = invoke(tmp_path, {}, "tasks")
    assert done.exit_code == 2 and f"{tmp_path / 'pyproject.toml'}:2: key 'tool.mcu-arms.arms'" in done.err


def test_no_command_writes_inside_the_installed_package(tmp_path: Path):
    """init, new, plan and tasks write into the project only: the package (and its data) is unchanged."""

    def snapshot() -> dict[str, tuple[int, int]]:
        return {
            str(path): (path.stat().st_mtime_ns, path.stat().st_size)
            for path in PACKAGE_DIR.rglob("*")
            if "__pycache__" not in path.parts and path.is_file()
        }

    before = snapshot()
    for args in (("init",), ("new", "mine"), ("plan", "--dry-run"), ("tasks",)):
        done = invoke(tmp_path, {}, *args)
        assert done.exit_code == 0, (args, done.err)
    assert snapshot() == before
    assert {"arms/mine.toml", "mcu-arms.toml"} <= _files(tmp_path)


def test_reports_record_which_mcu_arms_made_them(tmp_path: Path):
    provenance = collect_provenance.__wrapped__(tmp_path)
    identity = tool_identity()
    assert provenance.mcu_arms_version == identity.version
    assert provenance.mcu_arms_install == "checkout" and provenance.mcu_arms_commit == identity.commit
    assert provenance.git_sha is None  # tmp_path is no repository: the project's git state is the project's own


def test_compare_flags_arms_run_by_different_tool_versions():
    def arm(name: str, version: str, commit: str | None) -> SimpleNamespace:
        provenance = Provenance(
            mcu_arms_version=version, mcu_arms_commit=commit, git_sha=None, git_dirty=None, python="3.11",
            packages={}, host="h", platform="p",
        )  # fmt: skip
        return SimpleNamespace(
            arm=name, settings=SimpleNamespace(simulator="embedded"), latest=SimpleNamespace(tool=tool_of(provenance))
        )

    flags: list = []
    _cross_arm_flags([arm("a", "0.2.0", None), arm("b", "0.2.0", None)], flags)  # type: ignore[list-item]
    assert flags == []
    _cross_arm_flags([arm("a", "0.2.0", None), arm("b", "0.2.0", "abc123")], flags)  # type: ignore[list-item]
    assert [flag.kind for flag in flags] == ["different_tool_versions"]
    assert "b: 0.2.0 at abc123" in flags[0].message


def test_version_names_a_wheel_install_without_a_commit(monkeypatch: pytest.MonkeyPatch):
    from mcu_arms import version

    monkeypatch.setattr(version, "_is_checkout", lambda: False)
    version.tool_identity.cache_clear()
    try:
        identity = version.tool_identity()
        assert identity.install == "wheel" and identity.commit is None
        assert identity.describe().endswith("(installed package)")
    finally:
        version.tool_identity.cache_clear()
    assert os.fspath(PACKAGE_DIR).endswith("mcu_arms")

"""`mcu-arms CMD` imports CMD's module alone (tests/test_layering.py checks the table), and an arm or campaign file
is parsed once: a plan of 100,000 seeds is refused at once (bench_plan_limits.py times it), before tomllib reads the
list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcu_arms.arms import campaign
from mcu_arms.arms.campaign import select_arms
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import Overrides

ARM = """agent = "random"
task = "mine_diamond_from_scratch"
simulator = "embedded"
steps = 5
{seeds}
[ports]
green = "auto"
purple = "auto"
"""


def test_plan_imports_no_other_command(tmp_path: Path):
    probe = (
        "import sys\n"
        "sys.argv = ['mcu-arms', 'plan', '--help']\n"
        "from mcu_arms.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('mcu_arms.cli.')))\n"
        "print('mcu_arms.report.analysis' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    loaded, analysis = done.stdout.strip().splitlines()[-2:]
    assert loaded == "['mcu_arms.cli.common', 'mcu_arms.cli.options', 'mcu_arms.cli.plan']", done.stdout
    assert analysis == "False"


def test_a_campaign_file_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "a.toml").write_text(ARM.format(seeds=""))
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "c"\nseeds = [' + ", ".join(str(seed) for seed in range(2_000)) + ']\n[baseline]\narm = "a"\n'
    )
    parsed: list[Path] = []
    real = campaign.parse_toml

    def counted(text: str, where: Path) -> dict:
        parsed.append(where)
        return real(text, where)

    monkeypatch.setattr(campaign, "parse_toml", counted)
    selection = select_arms([path], Overrides(), tmp_path)
    assert parsed == [path]
    assert selection.specs[0][0].seeds == list(range(2_000))


def test_a_seed_list_past_the_limit_is_refused_before_it_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "a.toml"
    path.write_text(ARM.format(seeds="seeds = [\n" + ",\n".join(str(seed) for seed in range(10_002)) + "]"))
    monkeypatch.setattr(campaign, "parse_toml", lambda text, where: pytest.fail("parsed"))
    with pytest.raises(UserError) as refused:
        select_arms([path], Overrides(), tmp_path)
    assert (refused.value.line, refused.value.key) == (5, "seeds") and "at most 10000" in (refused.value.allowed or "")


def test_commas_in_comments_do_not_count_as_seeds(tmp_path: Path):
    path = tmp_path / "a.toml"
    comment = "# " + "," * 20_000 + "\n"
    path.write_text(ARM.format(seeds=f"seeds = [\n{comment}1, 2]"))
    assert select_arms([path], Overrides(), tmp_path).specs[0][0].seeds == [1, 2]

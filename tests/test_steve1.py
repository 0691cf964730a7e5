"""STEVE-1's refusals: each missing piece (extra, weights, CUDA) is a UserError naming the fix, in that order."""

from __future__ import annotations

import sys

import pytest

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import PurpleOptions
from mcu_arms.purple.registry import policy_factory
from mcu_arms.purple.steve1 import HF_REPO, check_requirements, huggingface_snapshot, resolve_weights


def _weights(tmp_path):
    folder = tmp_path / "steve1"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def test_missing_extra_is_refused_before_anything_else(tmp_path):
    with pytest.raises(UserError, match=r"pip install 'mcu-arms\[minestudio\]'") as error:
        check_requirements(PurpleOptions(), {"MCU_STEVE1_WEIGHTS": "/nonexistent"},
                           module_available=lambda name: name != "minestudio", driver_present=lambda: False)
    assert "minestudio not installed" in str(error.value) and error.value.key == "--agent"


def test_missing_weights_name_the_download_and_the_variable(tmp_path):
    available = {"module_available": lambda name: True, "driver_present": lambda: True}
    with pytest.raises(UserError, match=f"huggingface-cli download {HF_REPO}"):
        check_requirements(PurpleOptions(), {"HOME": str(tmp_path)}, **available)
    with pytest.raises(UserError, match="no config.json"):
        check_requirements(PurpleOptions(), {"MCU_STEVE1_WEIGHTS": str(tmp_path)}, **available)


def test_missing_cuda_is_refused(tmp_path):
    environ = {"MCU_STEVE1_WEIGHTS": str(_weights(tmp_path))}
    with pytest.raises(UserError, match="no NVIDIA driver") as error:
        check_requirements(PurpleOptions(cuda_device="0"), environ, lambda name: True, lambda: False)
    assert error.value.key == "--cuda-device"
    with pytest.raises(UserError, match="hides every GPU"):
        check_requirements(PurpleOptions(cuda_device="-1"), environ, lambda name: True, lambda: True)


def test_all_present_returns_the_weights(tmp_path):
    weights = _weights(tmp_path)
    found = check_requirements(PurpleOptions(cuda_device="1"), {"MCU_STEVE1_WEIGHTS": str(weights)},
                               lambda name: True, lambda: True)
    assert found == weights


def test_huggingface_cache_snapshot_is_found(tmp_path):
    snapshot = tmp_path / "hub" / f"models--{HF_REPO.replace('/', '--')}" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    assert huggingface_snapshot({"HF_HUB_CACHE": str(tmp_path / "hub")}) is None, "no config.json yet"
    (snapshot / "config.json").write_text("{}")
    assert resolve_weights({"HF_HUB_CACHE": str(tmp_path / "hub")}) == snapshot
    assert resolve_weights({"HF_HOME": str(tmp_path)}) == snapshot


@pytest.mark.skipif("minestudio" in sys.modules or __import__("importlib").util.find_spec("minestudio") is not None,
                    reason="minestudio is installed here")
def test_registry_refuses_steve1_without_the_extra_and_imports_nothing_heavy():
    with pytest.raises(UserError, match="minestudio extra"):
        policy_factory("steve1")(PurpleOptions(cuda_device="0"))
    assert "torch" not in sys.modules and "minestudio" not in sys.modules

"""The stand-in (tests/fake_minestudio) checked against the real minestudio 1.1.6 wheel, read with `ast`.

Every class, function, method, signature, default, attribute and info key the MineStudio backend uses (SURFACE,
STAT_KEYS, the backend's HUD_INFO_KEYS) must be the same in the stand-in as in the wheel, so the backend's tests
cannot pass against a MineStudio that does not exist. The wheel is downloaded once without its dependencies
(`pip download --no-deps minestudio==1.1.6`, 26 MB) and cached under ~/.cache/mcu-arms; offline, the test skips and
says so. Nothing from the wheel is imported or run, except its action mapping in the last test (where gymnasium is
installed), which checks agent mode against 1.1.6's own code.

How it fails when the stand-in drifts: change `num_empty_frames: int = 20` to `= 10` in
tests/fake_minestudio/minestudio/simulator/entry.py and it reports

    minestudio/simulator/entry.py MinecraftSim.__init__: the stand-in's signature differs from 1.1.6's
      1.1.6:      (self, action_type='agent', obs_size=(224, 224), render_size=(640, 360), seed=0, inventory={},
                  preferred_spawn_biome=None, num_empty_frames=20, callbacks=[], camera_config=None, **kwargs)
      stand-in:   (self, action_type='agent', ..., num_empty_frames=10, ...)

and renaming `single_agent_action` in FakeEnv.step, dropping `self.frames` from RecordCallback or a stat category
from the fake world's STAT_EVENTS fails the same way, naming the file, the member and both versions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcu_arms.contracts.support import MINESTUDIO_COUNTED_EVENTS
from mcu_arms.green.sims.minestudio import GREEN_IMPORTS, HUD_INFO_KEYS

WHEEL_VERSION = "1.1.6"
WHEEL_NAME = f"minestudio-{WHEEL_VERSION}-py3-none-any.whl"
CACHE = Path.home() / ".cache" / "mcu-arms"
FAKE_ROOT = Path(__file__).resolve().parent / "fake_minestudio"
DOWNLOAD_TIMEOUT_S = 600


@dataclass(frozen=True)
class Member:
    """One class (or, with cls None, module) the backend uses: where it is in the wheel and in the stand-in, the
    functions whose signatures must match, and the attributes that both must set."""

    real_file: str
    real_class: str | None
    fake_file: str
    fake_class: str | None
    functions: tuple[str, ...]
    attributes: tuple[str, ...] = ()


SIM = "minestudio/simulator"
SURFACE: tuple[Member, ...] = (
    Member(f"{SIM}/entry.py", None, f"{SIM}/entry.py", None, ("check_engine",)),
    Member(
        f"{SIM}/entry.py",
        "MinecraftSim",
        f"{SIM}/entry.py",
        "MinecraftSim",
        (
            "__init__",
            "reset",
            "step",
            "close",
            "_wrap_obs_info",
            "noop_action",
            "render",
            "agent_action_to_env_action",
            "env_action_to_agent_action",
            "action_space",
            "observation_space",
        ),
        (
            "already_reset",
            "callbacks",
            "callback_messages",
            "env",
            "num_empty_frames",
            "obs_size",
            "render_size",
            "seed",
            "action_type",
        ),
    ),
    Member(
        f"{SIM}/callbacks/callback.py",
        "MinecraftCallback",
        f"{SIM}/callbacks/callback.py",
        "MinecraftCallback",
        (
            "load_data_from_conf",
            "create_from_conf",
            "before_step",
            "before_reset",
            "after_reset",
            "after_step",
            "before_close",
            "after_close",
            "before_render",
            "after_render",
            "__repr__",
        ),
    ),
    Member(
        f"{SIM}/callbacks/commands.py",
        "CommandsCallback",
        f"{SIM}/callbacks/commands.py",
        "CommandsCallback",
        ("__init__", "after_reset", "__repr__"),
        ("commands",),
    ),
    Member(
        f"{SIM}/callbacks/record.py",
        "RecordCallback",
        f"{SIM}/callbacks/record.py",
        "RecordCallback",
        ("__init__", "before_reset", "after_reset", "before_step", "after_step", "before_close", "_save_episode"),
        ("record_path", "recording", "fps", "frame_type", "episode_id", "frames"),
    ),
    Member(
        f"{SIM}/minerl/env/_singleagent.py",
        "_SingleAgentEnv",
        f"{SIM}/world.py",
        "FakeEnv",
        ("reset", "step", "execute_cmd"),
    ),
    Member(
        f"{SIM}/minerl/env/_multiagent.py",
        "_MultiAgentEnv",
        f"{SIM}/world.py",
        "FakeEnv",
        ("seed", "close", "is_closed", "noop_action"),
        ("instances", "action_space", "observation_space"),
    ),
    Member(f"{SIM}/minerl/herobraine/hero/spaces.py", "Dict", f"{SIM}/world.py", "FakeActionSpace", ("no_op",)),
    Member(
        f"{SIM}/minerl/herobraine/hero/spaces.py",
        "Text",
        f"{SIM}/minerl/herobraine/hero/spaces.py",
        "Text",
        ("__init__",),
    ),
    Member(
        f"{SIM}/minerl/env/malmo.py",
        "InstanceManager",
        f"{SIM}/minerl/env/malmo.py",
        "InstanceManager",
        (),
        ("_instance_pool",),
    ),
    Member(
        f"{SIM}/minerl/env/malmo.py",
        "MinecraftInstance",
        f"{SIM}/world.py",
        "FakeInstance",
        (),
        ("minecraft_process", "running"),
    ),
)
# Where 1.1.6 names the statistics categories info carries (HumanSurvival's observables) and builds info.
STAT_SPEC = f"{SIM}/minerl/herobraine/env_specs/human_survival_specs.py"
INFO_BUILDER = (f"{SIM}/minerl/env/_multiagent.py", "_MultiAgentEnv", "_process_observation")
INFO_KEYS_USED = ("pov", *HUD_INFO_KEYS)


@pytest.fixture(scope="module")
def wheel() -> zipfile.ZipFile:
    path = CACHE / WHEEL_NAME
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--quiet",
                    f"minestudio=={WHEEL_VERSION}",
                    "--dest",
                    str(CACHE),
                ],
                capture_output=True,
                text=True,
                timeout=DOWNLOAD_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"offline: pip download of minestudio=={WHEEL_VERSION} took over {DOWNLOAD_TIMEOUT_S} s")
        if done.returncode != 0 or not path.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"offline: `pip download --no-deps minestudio=={WHEEL_VERSION}` failed ({last})")
    return zipfile.ZipFile(path)


def _real_tree(wheel: zipfile.ZipFile, name: str) -> ast.Module:
    return ast.parse(wheel.read(name).decode("utf-8"), filename=name)


def _fake_tree(name: str) -> ast.Module:
    return ast.parse((FAKE_ROOT / name).read_text(encoding="utf-8"), filename=name)


def _scope(tree: ast.Module, class_name: str | None) -> list[ast.stmt]:
    if class_name is None:
        return tree.body
    found = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name]
    assert found, f"class {class_name} is missing"
    return found[0].body


def _functions(body: list[ast.stmt]) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in body if isinstance(node, ast.FunctionDef)}


def signature(function: ast.FunctionDef) -> str:
    """Parameters (names, kinds, defaults as source) and decorators, annotations left out: what a caller sees."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    parts = [
        arg.arg + (f"={ast.unparse(default)}" if default is not None else "")
        for arg, default in zip(positional, defaults, strict=True)
    ]
    if arguments.posonlyargs:
        parts.insert(len(arguments.posonlyargs), "/")
    if arguments.vararg:
        parts.append(f"*{arguments.vararg.arg}")
    elif arguments.kwonlyargs:
        parts.append("*")
    parts += [
        arg.arg + (f"={ast.unparse(default)}" if default is not None else "")
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    if arguments.kwarg:
        parts.append(f"**{arguments.kwarg.arg}")
    decorators = "".join(f"@{ast.unparse(decorator)} " for decorator in function.decorator_list)
    return f"{decorators}({', '.join(parts)})"


def _assigned_attributes(body: list[ast.stmt]) -> set[str]:
    """Names a class sets: class-level assignments, `self.X = ...` anywhere in its methods, and its properties."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
        if isinstance(node, ast.FunctionDef):
            if any(ast.unparse(decorator) == "property" for decorator in node.decorator_list):
                names.add(node.name)
            for inner in ast.walk(node):
                targets = (
                    inner.targets
                    if isinstance(inner, ast.Assign)
                    else ([inner.target] if isinstance(inner, ast.AnnAssign) else [])
                )
                for target in targets:
                    for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                        if (
                            isinstance(element, ast.Attribute)
                            and isinstance(element.value, ast.Name)
                            and element.value.id == "self"
                        ):
                            names.add(element.attr)
    return names


def mismatches(wheel: zipfile.ZipFile) -> list[str]:
    """Every difference between the stand-in and 1.1.6 on SURFACE, one line each (empty when they agree)."""
    found: list[str] = []
    for member in SURFACE:
        real_body = _scope(_real_tree(wheel, member.real_file), member.real_class)
        fake_body = _scope(_fake_tree(member.fake_file), member.fake_class)
        real_functions, fake_functions = _functions(real_body), _functions(fake_body)
        where = f"{member.real_file} {member.real_class or '(module)'}"
        for name in member.functions:
            if name not in real_functions:
                found.append(f"{where}.{name}: not in 1.1.6 (SURFACE names something the wheel does not have)")
            elif name not in fake_functions:
                found.append(f"{where}.{name}: missing from the stand-in ({member.fake_file} {member.fake_class})")
            elif (real := signature(real_functions[name])) != (fake := signature(fake_functions[name])):
                found.append(
                    f"{where}.{name}: the stand-in's signature differs from 1.1.6's\n"
                    f"  1.1.6:    {real}\n  stand-in: {fake}"
                )
        real_attributes, fake_attributes = _assigned_attributes(real_body), _assigned_attributes(fake_body)
        for name in member.attributes:
            if name not in real_attributes:
                found.append(f"{where}.{name}: 1.1.6 never sets it (SURFACE names something the wheel does not have)")
            elif name not in fake_attributes:
                found.append(f"{where}.{name}: 1.1.6 sets it, the stand-in ({member.fake_class}) does not")
    return found


def _string_arguments(tree: ast.AST, call_name: str) -> set[str]:
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith(call_name)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def _subscript_keys(function: ast.FunctionDef) -> set[str]:
    """String keys a function stores into dicts (`d["key"] = ...`)."""
    keys: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                    keys.add(str(target.slice.value))
    return keys


def test_the_stand_in_has_every_signature_default_and_attribute_the_backend_uses_as_1_1_6_has_it(
    wheel: zipfile.ZipFile,
) -> None:
    found = mismatches(wheel)
    assert not found, "the stand-in differs from minestudio 1.1.6:\n" + "\n".join(found)


def test_the_statistics_categories_are_1_1_6s_in_the_backend_and_the_stand_in(wheel: zipfile.ZipFile) -> None:
    real = _string_arguments(_real_tree(wheel, STAT_SPEC), "ObserveFromFullStats")
    fake_world = _fake_tree(f"{SIM}/world.py")
    [stat_events] = [
        node.value
        for node in fake_world.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "STAT_EVENTS" for t in node.targets)
    ]
    assert real == set(MINESTUDIO_COUNTED_EVENTS) == set(ast.literal_eval(stat_events))


def test_the_info_keys_the_backend_reads_are_built_by_1_1_6_and_by_the_stand_in(
    wheel: zipfile.ZipFile, fake_minestudio: object
) -> None:
    real_file, real_class, function = INFO_BUILDER
    built = _subscript_keys(_functions(_scope(_real_tree(wheel, real_file), real_class))[function])
    built |= {"is_gui_open"}  # 1.1.6 writes obs_dict["is_gui_open"]; asserted below from the source too
    source = wheel.read(real_file).decode("utf-8")
    assert 'obs_dict["is_gui_open"]' in source and 'monitor_dict["health"]' in source
    assert set(INFO_KEYS_USED) <= built, set(INFO_KEYS_USED) - built
    from minestudio.simulator.world import World

    obs, monitor = World(0).observe((64, 36))
    assert set(INFO_KEYS_USED) <= set(obs) | set(monitor)


def test_what_the_green_imports_exists_in_1_1_6(wheel: zipfile.ZipFile) -> None:
    """The import check (doctor, preflight) imports exactly these names; each is defined or re-exported there."""
    names = set(wheel.namelist())
    for statement in GREEN_IMPORTS:
        node = ast.parse(statement).body[0]
        assert isinstance(node, ast.ImportFrom) and node.module
        module_file = node.module.replace(".", "/")
        path = f"{module_file}/__init__.py" if f"{module_file}/__init__.py" in names else f"{module_file}.py"
        tree = _real_tree(wheel, path)
        defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
        defined |= {alias.asname or alias.name for n in tree.body if isinstance(n, ast.ImportFrom) for alias in n.names}
        assert {alias.name for alias in node.names} <= defined, (statement, path)


def test_a_changed_stand_in_signature_is_reported_with_both_versions(
    wheel: zipfile.ZipFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check itself: the docstring's example, run on a copy of the stand-in's source."""
    original = _fake_tree

    def drifted(name: str) -> ast.Module:
        tree = original(name)
        if name == f"{SIM}/entry.py":
            text = ast.unparse(tree).replace("num_empty_frames: int=20", "num_empty_frames: int=10")
            return ast.parse(text)
        return tree

    monkeypatch.setattr(sys.modules[__name__], "_fake_tree", drifted)
    [problem] = mismatches(wheel)
    assert problem.startswith(f"{SIM}/entry.py MinecraftSim.__init__: the stand-in's signature differs")
    assert "num_empty_frames=20" in problem and "num_empty_frames=10" in problem


def test_agent_mode_matches_1_1_6s_own_action_mapping(wheel: zipfile.ZipFile, tmp_path: Path) -> None:
    """through_agent_mode against the wheel's own code (env2policy, from_factored, to_factored, policy2env with
    1.1.6's CameraConfig defaults) on random env actions. Runs where gymnasium and attrs are installed (the wheel's
    action mapping needs them; its torch-only helper module is replaced by the one decorator the mapping uses)."""
    pytest.importorskip("gymnasium", reason="gymnasium is not installed (the wheel's action mapping needs it)")
    pytest.importorskip("attr", reason="attrs is not installed (the wheel's action mapping needs it)")
    import functools
    import inspect
    import random
    import types

    import numpy as np

    from mcu_arms.contracts.wire import BUTTON_KEYS, noop_action
    from mcu_arms.green.actions import through_agent_mode

    library = "minestudio/utils/vpt_lib"
    for name in ("actions.py", "action_mapping.py", "mc.py", "mc_constants.1.16.json"):
        (tmp_path / library).mkdir(parents=True, exist_ok=True)
        (tmp_path / library / name).write_bytes(wheel.read(f"{library}/{name}"))

    def store_args(method):  # what minecraft_util (which imports torch) gives ActionTransformer
        signature = inspect.signature(method)

        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            for key, value in list(bound.arguments.items())[1:]:
                setattr(self, key, value)
            return method(self, *args, **kwargs)

        return wrapper

    saved = {name: module for name, module in sys.modules.items() if name.startswith("minestudio")}
    try:
        for name in [name for name in sys.modules if name.startswith("minestudio")]:
            del sys.modules[name]
        for package in ("minestudio", "minestudio.utils", "minestudio.utils.vpt_lib"):
            module = types.ModuleType(package)
            module.__path__ = [str(tmp_path / package.replace(".", "/"))]
            sys.modules[package] = module
        helper = types.ModuleType("minestudio.utils.vpt_lib.minecraft_util")
        helper.store_args = store_args  # type: ignore[attr-defined]
        sys.modules[helper.__name__] = helper
        from minestudio.utils.vpt_lib.action_mapping import CameraHierarchicalMapping
        from minestudio.utils.vpt_lib.actions import ActionTransformer, Buttons

        assert list(BUTTON_KEYS) == Buttons.ALL
        mapper = CameraHierarchicalMapping(n_camera_bins=11)
        transformer = ActionTransformer(
            camera_maxval=10, camera_binsize=2, camera_quantization_scheme="mu_law", camera_mu=10.0
        )
        rng = random.Random(5)
        for _ in range(5000):
            action = noop_action()
            for key in BUTTON_KEYS:
                action[key] = int(rng.random() < 0.15)
            action["camera"] = (rng.choice([0.0, rng.uniform(-30, 30)]), rng.choice([0.0, rng.uniform(-30, 30)]))
            batched = {key: np.array([value]) for key, value in action.items() if key != "camera"}
            batched["camera"] = np.array([action["camera"]])
            applied = transformer.policy2env(mapper.to_factored(mapper.from_factored(transformer.env2policy(batched))))
            ours, _ = through_agent_mode(action)
            assert {key: int(np.asarray(applied[key]).reshape(-1)[0]) for key in BUTTON_KEYS} == {
                key: ours[key] for key in BUTTON_KEYS
            }, action
            assert np.allclose(np.asarray(applied["camera"]).reshape(-1), ours["camera"], atol=1e-4), action
    finally:
        for name in [name for name in sys.modules if name.startswith("minestudio")]:
            del sys.modules[name]
        sys.modules.update(saved)

"""The floors of the package, checked on its real import graph (every import statement, at any depth, read with ast).

Contracts are the ground floor and import nothing else of mcu-arms; the process layer and the on-disk layout sit on
them; green, purple and client are siblings that never import each other nor anything that supervises them; light
commands load no heavy stack.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from mcu_arms.cli import COMMAND_MODULES, command_module

PACKAGE = Path(__file__).resolve().parents[1] / "mcu_arms"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every mcu_arms module `path` imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("mcu_arms.")}


GRAPH: dict[str, set[str]] = {_module_name(path): _imports(path) for path in PACKAGE.rglob("*.py")}


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _violations(importers: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _under(module, importers)
        for target in targets
        if any(_under(target, package) for package in forbidden)
    )


def test_the_graph_was_read() -> None:
    assert "mcu_arms.contracts.wire" in GRAPH and "mcu_arms.supervise.runner" in GRAPH
    assert "mcu_arms.contracts.settings" in GRAPH["mcu_arms.arms.plan"]


def test_contracts_import_nothing_else_of_mcu_arms() -> None:
    outside = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _under(module, "mcu_arms.contracts")
        for target in targets
        if not _under(target, "mcu_arms.contracts")
    )
    assert outside == []


@pytest.mark.parametrize(
    "floor",
    [
        "mcu_arms.process.procs",
        "mcu_arms.process.child_env",
        "mcu_arms.process.containment",
        "mcu_arms.layout",
        "mcu_arms.atomic",
        "mcu_arms.environment",
    ],
)
def test_the_process_layer_and_the_layout_stand_on_the_contracts_only(floor: str) -> None:
    """Floor 2 stands on the contracts; within it, procs alone uses its containment (cgroups, subreaper) and what
    every child starts with (child_env), which import nothing of it back; everything may write through `atomic`."""
    below_procs = ("mcu_arms.process.containment", "mcu_arms.process.child_env")
    allowed = ("mcu_arms.contracts", "mcu_arms.atomic", *(below_procs if floor == "mcu_arms.process.procs" else ()))
    assert [target for target in GRAPH[floor] if not any(_under(target, a) for a in allowed)] == []


def test_the_private_record_stands_on_the_contracts_and_the_layout_only() -> None:
    """The record of what we started (private_record.py) sits on floor 2 beside the process layer: stop, status,
    the runner and run-episode read it; it reads nothing above the layout, and nothing it keeps comes from output/."""
    allowed = ("mcu_arms.contracts", "mcu_arms.atomic", "mcu_arms.layout")
    assert "mcu_arms.process.private_record" in GRAPH
    assert [t for t in GRAPH["mcu_arms.process.private_record"] if not any(_under(t, a) for a in allowed)] == []


@pytest.mark.parametrize("part", ["mcu_arms.green", "mcu_arms.purple", "mcu_arms.client"])
def test_the_three_processes_never_import_what_supervises_or_reports_them(part: str) -> None:
    forbidden = ("mcu_arms.supervise", "mcu_arms.cli", "mcu_arms.report", "mcu_arms.arms", "mcu_arms.cluster")
    assert _violations(part, forbidden) == []


def test_the_slurm_queries_stand_on_the_contracts_and_the_layout_only() -> None:
    """cluster/ (squeue, sacct, scancel by job id) sits beside isolation/: status, stop, doctor and the Slurm
    executor read it; it reads nothing above the process layer."""
    above = (
        "mcu_arms.arms",
        "mcu_arms.supervise",
        "mcu_arms.report",
        "mcu_arms.cli",
        "mcu_arms.view",
        "mcu_arms.green",
        "mcu_arms.purple",
        "mcu_arms.client",
        "mcu_arms.isolation",
        "mcu_arms.a2a_transport",
        "mcu_arms.a2a_client",
        "mcu_arms.doctor",
    )
    assert "mcu_arms.cluster.slurm" in GRAPH
    assert _violations("mcu_arms.cluster", above) == []


def _importers(library: str) -> set[str]:
    """The mcu_arms modules that import `library` (or a module of it), wherever the import statement stands."""
    importers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            )
            if any(name == library or name.startswith(library + ".") for name in names):
                importers.add(_module_name(path))
    return importers


def _imported_at_module_level(module: str, library: str) -> bool:
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names = (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        )
        if any(name == library or name.startswith(library + ".") for name in names):
            return True
    return False


@pytest.mark.slow
def test_jobs_are_submitted_with_the_sites_own_sbatch() -> None:
    """No Python submission library: the job script is the project's own (supervise/slurm.py), handed to sbatch."""
    assert _importers("submitit") == set()


@pytest.mark.parametrize(
    ("library", "writer"), [("mlflow", "mcu_arms.report.to_mlflow"), ("wandb", "mcu_arms.report.to_wandb")]
)
def test_each_tracker_library_is_imported_by_its_writer_only_inside_a_function(library: str, writer: str) -> None:
    """mlflow and wandb are optional extras used by `compare --to` alone: the mapping (report/tracking.py) knows
    neither, and each writer imports its library when it writes, never at module import."""
    assert _importers(library) == {writer}
    assert not _imported_at_module_level(writer, library)


@pytest.mark.parametrize(
    ("part", "siblings"),
    [
        ("mcu_arms.green", ("mcu_arms.purple", "mcu_arms.client")),
        ("mcu_arms.purple", ("mcu_arms.green", "mcu_arms.client")),
        ("mcu_arms.client", ("mcu_arms.green", "mcu_arms.purple")),
    ],
)
def test_green_purple_and_client_are_siblings(part: str, siblings: tuple[str, ...]) -> None:
    assert _violations(part, siblings) == []


def test_the_evaluation_client_loads_no_server_stack() -> None:
    """The client process of every episode imports the A2A client side only (a2a_client), never the servers' (about
    0.2 s of a2a's server stack, uvicorn): checked on the graph and in a fresh interpreter."""
    assert _violations("mcu_arms.client", ("mcu_arms.a2a_transport",)) == []
    assert _violations("mcu_arms.a2a_client", ("mcu_arms.a2a_transport",)) == []
    probe = (
        "import sys\n"
        "import mcu_arms.cli.evaluate, mcu_arms.a2a_client\n"
        "print(sorted(m for m in sys.modules if m.startswith(('uvicorn', 'a2a.server', 'mcu_arms.a2a_transport'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_isolation_imports_nothing_from_the_arm_planner() -> None:
    assert _violations("mcu_arms.isolation", ("mcu_arms.arms", "mcu_arms.supervise", "mcu_arms.report")) == []


def test_supervise_and_report_do_not_import_each_other() -> None:
    assert _violations("mcu_arms.supervise", ("mcu_arms.report", "mcu_arms.cli")) == []
    assert _violations("mcu_arms.report", ("mcu_arms.supervise", "mcu_arms.cli")) == []


def test_the_statistics_stand_on_the_contracts_only() -> None:
    """stats/ is pure functions over numbers on the floor of the process layer and the layout: the analysis and the
    sequential runner (supervise/until_resolved.py) use it; it uses no view, runner or reader."""
    allowed = ("mcu_arms.contracts", "mcu_arms.stats")
    assert "mcu_arms.stats.paired" in GRAPH
    outside = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _under(module, "mcu_arms.stats")
        for target in targets
        if not any(_under(target, package) for package in allowed)
    )
    assert outside == []


def test_the_statistical_methods_load_no_heavy_stack_on_import() -> None:
    """numpy is imported inside the functions that resample: `compare` imports these modules and stays light."""
    code = (
        "import sys, mcu_arms.stats.comparison, mcu_arms.stats.sequential\n"
        f"print(sorted(m for m in {HEAVY!r} + ('scipy', 'lifelines') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_sequential_run_is_driven_by_the_run_command_only() -> None:
    """until_resolved sits above supervise and report (it runs looks and tests them): only `run` uses it."""
    users = {module for module, targets in GRAPH.items() if "mcu_arms.supervise.until_resolved" in targets}
    assert users == {"mcu_arms.cli.run"}
    assert _violations("mcu_arms.supervise.until_resolved", ("mcu_arms.cli",)) == []


def test_the_results_browser_reads_results_and_runs_nothing() -> None:
    """view/ sits beside report/ (it shows its comparison): it never starts or stops arms; only the CLI uses it."""
    runners = (
        "mcu_arms.supervise",
        "mcu_arms.cli",
        "mcu_arms.green",
        "mcu_arms.purple",
        "mcu_arms.client",
        "mcu_arms.a2a_transport",
        "mcu_arms.a2a_client",
        "mcu_arms.process.procs",
    )
    assert _violations("mcu_arms.view", runners) == []
    users = {module for module, targets in GRAPH.items() if any(_under(target, "mcu_arms.view") for target in targets)}
    outside = {module for module in users if not _under(module, "mcu_arms.view")}
    assert outside <= {"mcu_arms.cli.view", "mcu_arms.cli.report"}


HEAVY = (
    "a2a",
    "numpy",
    "crafter",
    "openai",
    "matplotlib",
    "httpx",
    "uvicorn",
    "minestudio",
    "pandas",
    "PIL",
    "jinja2",
    "plotly",
    "submitit",
    "mlflow",
    "wandb",
)


@pytest.mark.parametrize("command", ["plan", "status", "compare", "tasks", "new", "doctor", "stop"])
def test_light_commands_load_no_heavy_stack(command: str) -> None:
    """Importing the CLI and the core a light command uses loads none of the heavy libraries."""
    cores = {
        "plan": "mcu_arms.arms.plan, mcu_arms.arms.prepare",
        "status": "mcu_arms.report.status",
        "compare": (
            "mcu_arms.report.compare, mcu_arms.report.tracking, mcu_arms.report.trackers, mcu_arms.report.to_mlflow, "
            "mcu_arms.report.to_wandb"
        ),
        "tasks": "mcu_arms.report.tasks",
        "new": "mcu_arms.arms.template",
        "doctor": "mcu_arms.doctor",
        "stop": "mcu_arms.supervise.stop",
    }
    imported = f"mcu_arms.cli, {command_module(command)}, {cores[command]}"
    code = f"import sys, {imported}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "argv", [["plan", "--help"], ["serve", "green", "--help"], ["evaluate", "--help"], ["stop", "--help"]]
)
def test_a_command_imports_no_other_commands_module(argv: list[str]) -> None:
    """`mcu-arms X` imports X's module and none of the other commands' (each episode starts three such processes)."""
    commands = sorted({f"mcu_arms.cli.{module}" for module in COMMAND_MODULES.values()})
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print(sorted(m for m in {commands!r} if m in sys.modules)))\n"
        f"sys.argv = ['mcu-arms', *{argv!r}]\n"
        "from mcu_arms.entry import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == repr([command_module(argv[0])])


def test_each_command_is_defined_by_the_module_the_cli_names_for_it() -> None:
    """The CLI imports a command's module only when the command is looked up: the table must name the right one."""
    import importlib

    import typer

    from mcu_arms.cli.common import App

    for module in set(COMMAND_MODULES.values()):
        defined = App()
        importlib.import_module(f"mcu_arms.cli.{module}").register(defined)
        names = set(typer.main.get_group(defined).commands)
        assert names == {name for name, owner in COMMAND_MODULES.items() if owner == module}, module


@pytest.mark.slow
def test_the_planned_agent_reads_state_never_frames() -> None:
    """It must not reach for the frame reader (nor the frame-reading player), and so loads no image stack at all."""
    assert _violations("mcu_arms.purple.planned", ("mcu_arms.purple.crafter_vision", "mcu_arms.purple.scripted")) == []
    code = (
        "import sys, mcu_arms.purple.planned.agent\n"
        "print(sorted(m for m in ('numpy', 'PIL', 'crafter') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_mineflayer_backend_is_the_greens_and_its_checks_are_light() -> None:
    """Only the green (its task run) and doctor reach the backend; checking a mineflayer arm's host and server, as
    `plan` and `doctor` do, loads no heavy stack (the backend itself needs no numpy, crafter or image library)."""
    users = {
        module for module, targets in GRAPH.items() if any(_under(t, "mcu_arms.green.sims.mineflayer") for t in targets)
    }
    assert {module for module in users if not _under(module, "mcu_arms.green.sims.mineflayer")} <= {
        "mcu_arms.green.task_run",
        "mcu_arms.doctor",
    }
    code = (
        "import sys, mcu_arms.doctor, mcu_arms.green.sims.mineflayer.backend\n"
        "from mcu_arms.contracts.mineflayer import MineflayerServer\n"
        "from mcu_arms.green.sims.mineflayer.backend import host_checks\n"
        "host_checks({'PATH': ''}, MineflayerServer(port=1))\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_acceptance_checklist_uses_the_backends_and_nothing_that_plans_or_supervises() -> None:
    """acceptance/ drives the green's MineStudio backend, its video grader and the STEVE-1 policy directly, as the
    arms will; only its CLI command reaches it, and importing that command loads no heavy stack."""
    assert "mcu_arms.acceptance.minestudio" in GRAPH
    assert (
        _violations(
            "mcu_arms.acceptance",
            ("mcu_arms.supervise", "mcu_arms.cli", "mcu_arms.report", "mcu_arms.arms", "mcu_arms.view"),
        )
        == []
    )
    users = {module for module, targets in GRAPH.items() if any(_under(t, "mcu_arms.acceptance") for t in targets)}
    assert {module for module in users if not _under(module, "mcu_arms.acceptance")} == set()
    # only its CLI command reaches it, through the descriptor of the simulator whose checklist it is
    from mcu_arms.contracts.simulators import simulators

    assert {d.acceptance for d in simulators().values() if d.acceptance} == {"mcu_arms.acceptance.minestudio"}
    assert "acceptance" in (PACKAGE / "cli" / "acceptance.py").read_text(encoding="utf-8")
    code = f"import sys, mcu_arms.cli.acceptance\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


VIEWS = (
    "mcu_arms.report.compare",
    "mcu_arms.report.plot",
    "mcu_arms.report.export",
    "mcu_arms.results",
    "mcu_arms.view",
    "mcu_arms.cli.compare",
    "mcu_arms.cli.view",
    "mcu_arms.cli.report",
)


def test_the_analysis_stands_below_every_view_and_the_views_compute_no_statistic() -> None:
    """report/analysis.py computes the comparison once; the views render it. A view importing a statistic's function
    (of stats/; its result types in stats/basics.py are fine) would be computing a number the others might not show."""
    assert _violations("mcu_arms.report.analysis", VIEWS) == []
    statistics = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if any(_under(module, view) for view in VIEWS)
        for target in targets
        if (_under(target, "mcu_arms.stats") and not _under(target, "mcu_arms.stats.basics"))
        or (target.startswith("mcu_arms.stats.basics.") and target.rsplit(".", 1)[1][:1].islower())
    ]
    assert statistics == []


def test_the_analysis_cache_stores_the_analysis_and_computes_nothing() -> None:
    """report/analysis_cache.py sits between the analysis and the views: it calls `analyse` or reads back what it
    returned, imports no statistic and no view; the views that build a Site go through it."""
    assert "mcu_arms.report.analysis_cache" in GRAPH
    assert _violations("mcu_arms.report.analysis_cache", VIEWS) == []
    assert _violations("mcu_arms.report.analysis_cache", ("mcu_arms.stats", "mcu_arms.stats.basics")) == []
    assert "mcu_arms.report.analysis_cache.cached_analysis" in GRAPH["mcu_arms.view.site"]


def test_the_cap_on_answers_stands_on_the_contracts_only() -> None:
    """http_cap is shared by the green, the client and the planned agent: it reads nothing above the contracts."""
    assert "mcu_arms.http_cap" in GRAPH
    assert [target for target in GRAPH["mcu_arms.http_cap"] if not _under(target, "mcu_arms.contracts")] == []


def _simulator_literals(path: Path, names: frozenset[str]) -> list[str]:
    """Every string literal (f-string parts included) in `path` that names a simulator: the whole string, or the
    name quoted inside it (e.g. 'needs simulator = "embedded"')."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            named = [name for name in names if text == name or f'"{name}"' in text or f"'{name}'" in text]
            found += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}" for name in named]
    return found


def _own_package(path: Path, names: frozenset[str]) -> bool:
    """The contracts (the descriptors, and the vocabularies they use) and a simulator's own modules: a folder or a
    module named after it (green/sims/mineflayer/, green/sims/crafter/, acceptance/minestudio.py)."""
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] == "contracts" or bool({*relative.parts[:-1], path.stem} & names)


def test_no_package_file_outside_a_simulators_own_names_it() -> None:
    """Planning, doctor, tasks, the scheduler, reports and the viewer ask a simulator's descriptor
    (contracts/simulators.py); none compares or spells a simulator's name, so a new simulator touches none of them."""
    from mcu_arms.contracts.simulators import BUILT_IN

    names = frozenset(d.name for d in BUILT_IN)
    literals = [
        literal
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _own_package(path, names)
        for literal in _simulator_literals(path, names)
    ]
    assert literals == []
    # the count would see them: the descriptors themselves spell every name
    assert len(_simulator_literals(PACKAGE / "contracts" / "simulators.py", names)) >= len(names)


def test_only_the_green_and_a_simulators_checklist_import_a_simulator_backend() -> None:
    """Everyone else asks the descriptor (contracts/simulators.py); the backend is imported when an episode runs. The
    public plug-in module (api.py) re-exports the simulator interface (green/sims/base.py), never a backend."""
    importers = {
        module
        for module, targets in GRAPH.items()
        if any(_under(target, "mcu_arms.green.sims") for target in targets) and not _under(module, "mcu_arms.green")
    }
    assert importers <= {"mcu_arms.acceptance.minestudio", "mcu_arms.api"}
    assert all(_under(t, "mcu_arms.green.sims.base") for t in GRAPH["mcu_arms.api"] if _under(t, "mcu_arms.green.sims"))


def test_each_built_in_descriptor_names_a_backend_and_preflight_that_exist() -> None:
    """The descriptors name their backend, preflight and checklist by import path (imported only when needed): each
    path is a module of the package that defines the name, checked without importing it."""
    from mcu_arms.contracts.simulators import BUILT_IN

    for descriptor in BUILT_IN:
        paths = [descriptor.backend, descriptor.preflight, f"{descriptor.acceptance}:run_acceptance"]
        for path in (p for p in paths if p and not p.startswith("None")):
            module, _, name = path.partition(":")
            source = PACKAGE.parent / (module.replace(".", "/") + ".py")
            assert source.is_file(), path
            defined = {
                node.name
                for node in ast.parse(source.read_text(encoding="utf-8")).body
                if isinstance(node, ast.FunctionDef | ast.ClassDef)
            }
            assert name in defined, path


def test_the_outcome_models_stand_below_the_runner() -> None:
    """supervise/outcomes.py (what `run` says of an episode) reads contracts and the layout only; the runner, the
    executors, the Slurm watcher and `run-episode` read it."""
    allowed = ("mcu_arms.contracts", "mcu_arms.layout")
    assert [t for t in GRAPH["mcu_arms.supervise.outcomes"] if not any(_under(t, a) for a in allowed)] == []
    assert "mcu_arms.supervise.outcomes" in GRAPH["mcu_arms.supervise.runner"]


def test_ctypes_only_for_the_libc_call_python_lacks() -> None:
    """No write into process memory anywhere: ctypes serves the subreaper prctl in containment.py, and nothing else."""
    users = sorted(
        _module_name(path)
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "ctypes" for alias in node.names))
        or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ctypes")
    )
    assert users == ["mcu_arms.process.containment"]


def _declared_distributions() -> set[str]:
    import re
    import tomllib

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return {re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-") for requirement in wanted}


def test_every_third_party_module_the_package_imports_is_declared() -> None:
    """What the package imports itself is pinned in pyproject.toml, not left to whatever another dependency pulls in
    (opensimplex's values, for one, must match bit for bit). Modules not installed here belong to an extra."""
    from importlib.metadata import packages_distributions

    distributions = packages_distributions()
    imported: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = sorted(name for name in imported - set(sys.stdlib_module_names) if name != "mcu_arms")
    declared = _declared_distributions()
    undeclared = [
        name
        for name in third_party
        if name in distributions and not {d.lower().replace("_", "-") for d in distributions[name]} & declared
    ]
    assert undeclared == []

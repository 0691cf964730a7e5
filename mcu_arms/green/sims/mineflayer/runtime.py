"""The sidecar's runtime: Node >= 22 and the pinned libraries, found or installed with npm into the cache.

Node comes from PATH when it is new enough, else from npm's `node-<os>-<arch>` package (the binary alone, ~185 MB)
under `<cache>/node/<version>/`. The libraries are installed with `npm ci` from the lockfile that ships beside
sidecar.mjs into `<cache>/mineflayer-sidecar/<digest of the lockfile>/` (~565 MB, most of it minecraft-data), so a
changed lockfile never mixes with an older install. Installs run once, under a file lock, and each is announced with
its exact command before it runs; the folders below the cache root are made without following a link. Nothing here is
imported by light commands except through `runtime_checks`,
which only looks.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mcu_arms.atomic import make_dirs_nofollow, write_text_atomic
from mcu_arms.contracts.mineflayer import NODE_FROM_NPM_VERSION, NODE_MIN_MAJOR, SIDECAR_PACKAGES, cache_root
from mcu_arms.contracts.preflight import HostCheck
from mcu_arms.green.sims.base import SimulatorUnavailable

HERE = Path(__file__).resolve().parent
SIDECAR_SCRIPT = HERE / "sidecar.mjs"
PACKAGE_FILES = (HERE / "package.json", HERE / "package-lock.json")
NPM_TIMEOUT_S = 900
VERSION_TIMEOUT_S = 20
INSTALLED_MARK = ".mcu-arms-installed"  # written last: an install cut short is never taken for a finished one
MACHINES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
SYSTEMS = {"linux": "linux", "darwin": "darwin"}


@dataclass(frozen=True)
class Runtime:
    """What the sidecar runs with: the node binary, and the folder holding its node_modules."""

    node: Path
    node_version: str
    libraries: Path

    @property
    def node_path(self) -> str:
        return str(self.libraries / "node_modules")


def node_package() -> str | None:
    """npm's package with a node binary for this machine, or None when npm has none."""
    system, machine = SYSTEMS.get(sys.platform), MACHINES.get(platform.machine().lower())
    return f"node-{system}-{machine}" if system and machine else None


def node_version(node: Path) -> tuple[int, ...] | None:
    try:
        done = subprocess.run(
            [str(node), "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", done.stdout.strip())
    return tuple(int(part) for part in match.groups()) if match and done.returncode == 0 else None


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def cached_node(env: Mapping[str, str]) -> Path:
    package = node_package() or "node"
    return cache_root(env) / "node" / NODE_FROM_NPM_VERSION / "node_modules" / package / "bin" / "node"


def find_node(env: Mapping[str, str]) -> tuple[Path | None, str]:
    """A node >= NODE_MIN_MAJOR (PATH first, then the cache) and its version, or None and what was found instead."""
    found = []
    on_path = shutil.which("node", path=env.get("PATH", ""))
    for candidate, where in ((on_path, "on PATH"), (str(cached_node(env)), "in the cache")):
        if candidate is None or not Path(candidate).is_file():
            continue
        version = node_version(Path(candidate))
        if version is not None and version[0] >= NODE_MIN_MAJOR:
            return Path(candidate), _dotted(version)
        found.append(f"{candidate} ({where}) is {'v' + _dotted(version) if version else 'unreadable'}")
    return None, "; ".join(found) or "no node on PATH"


def libraries_dir(env: Mapping[str, str]) -> Path:
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in PACKAGE_FILES)).hexdigest()[:12]
    return cache_root(env) / "mineflayer-sidecar" / digest


def libraries_installed(env: Mapping[str, str]) -> bool:
    return (libraries_dir(env) / INSTALLED_MARK).is_file()


def node_install_command(env: Mapping[str, str]) -> list[str]:
    prefix = cache_root(env) / "node" / NODE_FROM_NPM_VERSION
    package = f"{node_package()}@{NODE_FROM_NPM_VERSION}"
    return ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package]


def libraries_install_command(env: Mapping[str, str]) -> list[str]:
    return ["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(libraries_dir(env))]


def run_npm(command: list[str], env: Mapping[str, str], node: Path | None) -> None:
    """Run an npm command (with `node`'s folder first on PATH, so npm itself runs on it); SimulatorUnavailable with
    npm's own words when it fails."""
    search_path = env.get("PATH", "")
    if node is not None:
        search_path = f"{node.parent}{os.pathsep}{search_path}"
    npm = shutil.which("npm", path=search_path)
    if npm is None:
        raise SimulatorUnavailable(f"npm is not on PATH; it is needed to run `{' '.join(command)}` (install Node.js)")
    try:
        done = subprocess.run(
            [npm, *command[1:]],
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env={**env, "PATH": search_path},
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SimulatorUnavailable(
            f"`{' '.join(command)}` took over {NPM_TIMEOUT_S} s: is the npm registry reachable?"
        ) from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise SimulatorUnavailable(f"`{' '.join(command)}` failed (rc={done.returncode}): " + " | ".join(lines[-4:]))


def ensure_runtime(env: Mapping[str, str], announce: Callable[[str], None]) -> Runtime:
    """Node and the libraries, installed first if missing (each install announced with its command)."""
    from filelock import FileLock

    root = cache_root(env)
    root.mkdir(parents=True, exist_ok=True)  # the root is the user's to place (it may be a link they made)
    with FileLock(str(root / ".mineflayer-install.lock")):
        node, version = find_node(env)
        if node is None:
            package = node_package()
            if package is None:
                raise SimulatorUnavailable(
                    f"node >= {NODE_MIN_MAJOR} is needed ({version}) and npm has no node binary for "
                    f"{sys.platform}/{platform.machine()}: install Node.js {NODE_MIN_MAJOR}"
                )
            command = node_install_command(env)
            announce(f"mineflayer: node >= {NODE_MIN_MAJOR} is needed ({version}); installing it: {' '.join(command)}")
            run_npm(command, env, None)
            node, version = find_node(env)
            if node is None:
                raise SimulatorUnavailable(f"`{' '.join(command)}` ran, but {version}")
        libraries = libraries_dir(env)
        if not libraries_installed(env):
            make_dirs_nofollow(root, libraries.relative_to(root).parts)
            for path in PACKAGE_FILES:
                write_text_atomic(libraries / path.name, path.read_text(encoding="utf-8"))
            command = libraries_install_command(env)
            announce(f"mineflayer: installing the sidecar's libraries ({_pins()}): {' '.join(command)}")
            run_npm(command, env, node)
            write_text_atomic(libraries / INSTALLED_MARK, _pins() + "\n")
    return Runtime(node=node, node_version=version, libraries=libraries)


def _pins() -> str:
    return ", ".join(f"{name} {version}" for name, version in SIDECAR_PACKAGES.items())


def runtime_checks(env: Mapping[str, str]) -> list[HostCheck]:
    """Node, npm and the libraries, as `doctor` shows them: what is there, and what the first run will install."""
    node, found = find_node(env)
    npm = shutil.which("npm", path=env.get("PATH", ""))
    checks = []
    if node is not None:
        checks.append(HostCheck(name="node", status="ok", detail=f"{node} is v{found}"))
    elif npm and node_package():
        checks.append(
            HostCheck(
                name="node",
                status="warn",
                detail=f"no node >= {NODE_MIN_MAJOR} ({found})",
                fix=f"the first run installs it: {' '.join(node_install_command(env))}",
            )
        )
    else:
        checks.append(
            HostCheck(
                name="node",
                status="fail",
                detail=f"no node >= {NODE_MIN_MAJOR} ({found}) and no npm",
                fix=f"install Node.js {NODE_MIN_MAJOR} (with npm)",
            )
        )
    if libraries_installed(env):
        checks.append(HostCheck(name="mineflayer libraries", status="ok", detail=f"{_pins()} in {libraries_dir(env)}"))
    elif npm:
        checks.append(
            HostCheck(
                name="mineflayer libraries",
                status="warn",
                detail=f"not installed yet ({_pins()})",
                fix=f"the first run installs them (~565 MB): {' '.join(libraries_install_command(env))}",
            )
        )
    else:
        checks.append(
            HostCheck(
                name="mineflayer libraries",
                status="fail",
                detail="not installed, and npm is not on PATH",
                fix="install Node.js with npm",
            )
        )
    return checks

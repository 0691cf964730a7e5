#!/usr/bin/env bash
# CI: mcu-arms installed as a tool, used from a project of one's own. Builds the sdist and the wheel (the wheel from
# the sdist, as `python -m build` does), checks their metadata with twine, installs the wheel into a fresh venv
# outside the checkout (the checkout not on sys.path, the working directory an empty temporary folder) and runs a
# newcomer's first session there: init, tasks, plan --dry-run, a 200-step run of the demo pair, compare, report
# --html. Then the same again with mcu-arms reinstalled from the sdist. Nothing may be written inside the package.
# Usage: .ci/wheel-check.sh [DEV_VENV]   (default .venv: its python builds, with `build` and `twine` from the test
# extra). mcu-arms itself is installed from the wheel (then the sdist) with --no-deps; its dependencies are the dev
# venv's, reached through a .pth line (a folder named there is added to sys.path, its own .pth files — the editable
# install's finder among them — are not run), and each requirement the wheel declares is checked against them. That
# saves a fresh install of ~100 packages (measured: 199 s of 518 on a loaded 2-core host). WHEEL_CHECK_FULL=1
# installs them from pip's cache instead.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT=$PWD
DEV_VENV=${1:-.venv}
WORK=$(mktemp -d /tmp/mcu-arms-wheel-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
started=$SECONDS
say() { printf '\n== wheel-check (%ss): %s\n' "$((SECONDS - started))" "$*"; }

say "building the sdist and the wheel"
"$DEV_VENV/bin/python" -m build --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
"$DEV_VENV/bin/python" -m twine check --strict "$WORK"/dist/*
WHEEL=$(ls "$WORK"/dist/*.whl)
SDIST=$(ls "$WORK"/dist/*.tar.gz)

say "installing the wheel into a fresh venv"
python3 -m venv "$WORK/venv"
if [ "${WHEEL_CHECK_FULL:-0}" = 1 ]; then
  env -u PYTHONPATH "$WORK/venv/bin/pip" install -q --no-compile "$WHEEL[view]"
else
  env -u PYTHONPATH "$WORK/venv/bin/pip" install -q --no-compile --no-deps "$WHEEL"
  fresh_site=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  "$DEV_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' >"$fresh_site/dev-dependencies.pth"
  # every requirement of the wheel (with the view extra) met by what the fresh venv now sees
  env -u PYTHONPATH "$WORK/venv/bin/python" - "$WHEEL" <<'PY'
import sys, zipfile
from email.parser import Parser
from importlib import metadata
from packaging.requirements import Requirement
with zipfile.ZipFile(sys.argv[1]) as wheel:
    info = next(name for name in wheel.namelist() if name.endswith(".dist-info/METADATA"))
    declared = Parser().parsestr(wheel.read(info).decode()).get_all("Requires-Dist") or []
unmet = []
for text in declared:
    requirement = Requirement(text)
    if requirement.marker and not requirement.marker.evaluate({"extra": "view"}):
        continue
    try:
        found = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        found = None
    if found is None or not requirement.specifier.contains(found, prereleases=True):
        unmet.append(f"{requirement} (found: {found})")
sys.exit("unmet requirements of the wheel: " + "; ".join(unmet) if unmet else None)
PY
fi
TOOL="$WORK/venv/bin/mcu-arms"

session() {  # a newcomer's first session, in an empty folder, with nothing of the checkout in reach
  local kind=$1 project
  project=$(mktemp -d "$WORK/project-$kind.XXXXXX")
  cd "$project"
  local site
  site=$(env -u PYTHONPATH "$WORK/venv/bin/python" -c 'import mcu_arms, pathlib; print(pathlib.Path(mcu_arms.__file__).parent)')
  case "$site" in "$WORK/venv/"*) ;; *) echo "mcu_arms imported from $site, not from the fresh venv" >&2; exit 1 ;; esac
  touch "$WORK/marker-$kind"
  export -n PYTHONPATH 2>/dev/null || true
  say "$kind: $("$TOOL" --version)"
  "$TOOL" --version | grep -q "(installed package)" || { echo "--version does not say it is installed" >&2; exit 1; }
  say "$kind: init"; "$TOOL" init study
  cd study
  say "$kind: tasks"; "$TOOL" tasks >/dev/null
  say "$kind: plan --dry-run"; "$TOOL" plan --dry-run >/dev/null
  say "$kind: run the demo pair, 200 steps"; "$TOOL" run --arm demo --arm demo_random --steps 200 --max-parallel 2
  say "$kind: compare"; "$TOOL" compare demo demo_random
  say "$kind: report --html"; "$TOOL" report --html bundle demo demo_random >/dev/null
  test -s bundle/index.html
  "$WORK/venv/bin/python" -c 'import json, sys
provenance = json.load(open("output/demo/episode_001/result.json"))["provenance"]
sys.exit(None if provenance["mcu_arms_install"] == "wheel" else f"the run report says {provenance}")'
  local written
  written=$(find "$site" -newer "$WORK/marker-$kind" -not -path '*/__pycache__*' | head -5)
  if [ -n "$written" ]; then echo "written inside the installed package: $written" >&2; exit 1; fi
  cd "$CHECKOUT"
}
session wheel

say "reinstalling from the sdist"
# pip must not see the dev venv's packages while it replaces mcu-arms (the editable install among them)
fresh_site=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
[ -f "$fresh_site/dev-dependencies.pth" ] && mv "$fresh_site/dev-dependencies.pth" "$WORK/dev-dependencies.pth"
env -u PYTHONPATH "$WORK/venv/bin/pip" install -q --no-compile --no-deps --force-reinstall "$SDIST"
[ -f "$WORK/dev-dependencies.pth" ] && mv "$WORK/dev-dependencies.pth" "$fresh_site/dev-dependencies.pth"
session sdist
say "done"

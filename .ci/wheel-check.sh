#!/usr/bin/env bash
# CI: mcu-arms installed as a tool, used from a project of one's own. Builds the sdist and the wheel (the wheel from
# the sdist, as `python -m build` does), checks their metadata with twine, installs the wheel into a fresh venv
# outside the checkout (the checkout not on sys.path, the working directory an empty temporary folder) and runs a
# newcomer's first session there: init, tasks, plan --dry-run, a 200-step run of the demo pair, compare, report
# --html. Then the same again with mcu-arms reinstalled from the sdist. Nothing may be written inside the package.
# Usage: .ci/wheel-check.sh [DEV_VENV]   (default .venv: its python builds, with `build` and `twine` from the test
# extra). Dependencies come from pip's cache after the first CI run (`--no-compile`: nothing is byte-compiled).
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
env -u PYTHONPATH "$WORK/venv/bin/pip" install -q --no-compile "$WHEEL[view]"
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
env -u PYTHONPATH "$WORK/venv/bin/pip" install -q --no-compile --no-deps --force-reinstall "$SDIST"
session sdist
say "done"

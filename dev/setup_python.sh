#!/usr/bin/env bash
# Creates the project's Python environment (.venv) and installs one level of
# requirements into it, doing nothing when that level is already up to date:
#   setup_python.sh demo   dev/requirements-demo.txt (make demo, make python)
#   setup_python.sh test   dev/requirements-test.txt, which includes the demo's (make test)
set -euo pipefail
cd "$(dirname "$0")/.."
level=${1:-demo}
case $level in demo|test) ;; *) echo "usage: setup_python.sh [demo|test]" >&2; exit 2 ;; esac
venv=.venv
# A level is current when its stamp holds the hash of its file and the demo's.
# A level may also have a list installed with --no-deps (dev/requirements-LEVEL-nodeps.txt).
nodeps=dev/requirements-$level-nodeps.txt
[ -f $nodeps ] || nodeps=
want=$(cat dev/requirements-demo.txt dev/requirements-$level.txt $nodeps | sha256sum | cut -d' ' -f1)
stamp=$venv/.requirements-$level.sha
if [ -x $venv/bin/python ] && [ "$(cat $stamp 2>/dev/null)" = "$want" ]; then exit 0; fi
python=${PYTHON:-python3}
[ -x $venv/bin/python ] || "$python" -m venv $venv
echo "setup_python: installing dev/requirements-$level.txt into $venv" >&2
# --no-compile: bytecode is written on first import instead (a third of the install time).
$venv/bin/python -m pip install -q --disable-pip-version-check --no-compile -r dev/requirements-$level.txt
[ -z "$nodeps" ] || $venv/bin/python -m pip install -q --disable-pip-version-check --no-compile --no-deps -r $nodeps
echo "$want" > $stamp

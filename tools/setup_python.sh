#!/usr/bin/env bash
# Creates the project's own Python environment (.venv) and installs
# tools/requirements.txt into it; does nothing when it is already up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
stamp=$venv/.requirements.sha
want=$(sha256sum tools/requirements.txt | cut -d' ' -f1)
if [ -x $venv/bin/python ] && [ "$(cat $stamp 2>/dev/null)" = "$want" ]; then exit 0; fi
python=${PYTHON:-python3}
[ -x $venv/bin/python ] || "$python" -m venv $venv
echo "setup_python: installing tools/requirements.txt into $venv" >&2
$venv/bin/python -m pip install -q --disable-pip-version-check -r tools/requirements.txt
echo "$want" > $stamp

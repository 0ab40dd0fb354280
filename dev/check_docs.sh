#!/usr/bin/env bash
# The docs check (`make test`, `make check`): the generated references are up to date
# with the header and the docstrings, every public function has its comment or
# docstring (a missing one is an error, as a warning would be), and every relative
# link and anchor of the Markdown files resolves.
#   usage: dev/check_docs.sh [PYTHON]   (PYTHON: the one with the package, .venv's by default)
set -uo pipefail
cd "$(dirname "$0")/.."
python=${1:-.venv/bin/python}
rc=0
python3 dev/docs_c_api.py --check || rc=1
"$python" dev/docs_python_api.py --check || rc=1
# pdoc's HTML of the same docstrings, any warning an error (build/docs/python; not committed).
"$python" -W error -m pdoc arraybridge -o "${DOCS_OUT:-build/docs/python}" || rc=1
python3 dev/check_links.py || rc=1
[ "$rc" -eq 0 ] && echo "docs: the references are current and every link resolves"
exit $rc

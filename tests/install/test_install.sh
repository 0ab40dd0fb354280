#!/usr/bin/env bash
# `make install` into a temporary prefix, then what a user outside the tree does:
# build a C and a C++ program with `pkg-config --cflags --libs arraybridge` and
# run them, and run the installed tools.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
make --no-print-directory -s install PREFIX="$prefix" BUILD="$build" >/dev/null

macro() { sed -n "s/^#define ABR_VERSION_$1 \([0-9]*\).*/\1/p" include/arraybridge/arraybridge.h; }
version="$(macro MAJOR).$(macro MINOR).$(macro PATCH)"
for f in include/arraybridge/arraybridge.h include/arraybridge/dlpack.h lib/libarraybridge.so.$version \
         lib/pkgconfig/arraybridge.pc bin/arraybridge-info bin/arraybridge-bench; do
  [ -e "$prefix/$f" ] || { echo "FAIL: make install did not install $f"; exit 1; }
done
soname=libarraybridge.so.$(macro MAJOR)  # before 1.0 the minor is part of the soname
[ "$(macro MAJOR)" = 0 ] && soname=libarraybridge.so.0.$(macro MINOR)
[ "$(readlink "$prefix/lib/$soname")" = "libarraybridge.so.$version" ] ||
  { echo "FAIL: the soname link is wrong"; exit 1; }
[ "$(readlink "$prefix/lib/libarraybridge.so")" = "$soname" ] ||
  { echo "FAIL: the development link is wrong"; exit 1; }

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion arraybridge)" = "$version" ] || { echo "FAIL: pkg-config version"; exit 1; }
flags=$(pkg-config --cflags --libs arraybridge)
cc -std=c99 -Wall -Wextra -Werror tests/install/hello.c $flags -o "$prefix/hello-c"
c++ -std=c++17 -Wall -Wextra -Werror tests/install/hello.cpp $flags -o "$prefix/hello-cpp"
export LD_LIBRARY_PATH="$prefix/lib"
"$prefix/hello-c" | grep -q "libarraybridge $version" || { echo "FAIL: hello-c"; exit 1; }
"$prefix/hello-cpp" | grep -q "libarraybridge $version" || { echo "FAIL: hello-cpp"; exit 1; }
"$prefix/bin/arraybridge-info" --json | grep -q "\"version\": \"$version\"" || { echo "FAIL: installed arraybridge-info"; exit 1; }
echo "install: headers, libarraybridge.so.$version + links, arraybridge.pc and tools installed; C and C++ programs built with pkg-config and ran"

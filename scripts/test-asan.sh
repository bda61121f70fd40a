#!/usr/bin/env bash
# Runs pytest against an ASan+UBSan build of the extension.
#
#   scripts/test-asan.sh [pytest args...]      (default: tests/gguf)
#
# Builds build-asan/ (Debug, -DDS4_SANITIZE=ON) and stages the package in build-asan/stage/ds4:
# the Python sources are symlinked from python/ds4 and the sanitized _core is linked there, so
# the normal dev build's python/ds4/_core*.so is left alone. CPython itself is not
# instrumented, so the ASan runtime is preloaded; leak detection is off because CPython
# deliberately never frees some allocations at exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DS4_ASAN_BUILD:-build-asan}
cd "$root"

if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDS4_SANITIZE=ON \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" -DPython_EXECUTABLE="$(command -v python3)" >/dev/null
fi
ninja -C "$build" -j "${JOBS:-2}" _core

stage="$root/$build/stage"
rm -rf "$stage"
mkdir -p "$stage/ds4"
for f in python/ds4/*; do
  case "$(basename "$f")" in _core*.so|__pycache__) continue ;; esac
  ln -s "$root/$f" "$stage/ds4/"
done
so=$(ls "$build"/_core*.so)
ln -s "$root/$so" "$stage/ds4/"

asan=$(gcc -print-file-name=libasan.so)
[ -f "$asan" ] || { echo "test-asan.sh: libasan.so not found (gcc -print-file-name)" >&2; exit 1; }
[ $# -gt 0 ] || set -- tests/gguf

# libstdc++ is preloaded too: python3 does not link it, and ASan's __cxa_throw interceptor
# must find the real one at startup or the first C++ exception aborts ("CHECK failed:
# real___cxa_throw"). PYTHONMALLOC=malloc routes Python objects through malloc so ASan sees them.
stdcxx=$(gcc -print-file-name=libstdc++.so)
export LD_PRELOAD="$asan:$stdcxx${LD_PRELOAD:+:$LD_PRELOAD}"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export PYTHONMALLOC=malloc
export PYTHONPATH="$stage${PYTHONPATH:+:$PYTHONPATH}"
# --capture=sys: pytest's default fd capture would swallow the sanitizer report of a test that
# aborts; this way the report reaches the terminal (sys-level output is still captured).
exec python3 -m pytest -p no:cacheprovider --capture=sys "$@"

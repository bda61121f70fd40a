#!/usr/bin/env bash
# Incremental developer build without pip: configures build-dev/ (or $1) with CMake + Ninja
# and links the extension into python/ds4 so `PYTHONPATH=python pytest` uses it.
# Extra CMake arguments after the build dir, e.g. scripts/dev-build.sh build-asan -DDS4_SANITIZE=ON
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-dev}
shift || true
cd "$root"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} \
    -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" -DPython_EXECUTABLE="$(command -v python3)" "$@" >/dev/null
fi
ninja -C "$build" -j "${JOBS:-2}" _core
so=$(ls "$build"/_core*.so)
ln -sf "$root/$so" "python/ds4/$(basename "$so")"

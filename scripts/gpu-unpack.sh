#!/usr/bin/env bash
# Run ON THE GPU MACHINE first, in the checkout's root: unpacks gpu-bundle/ (made by scripts/gpu-pack.sh here, and
# carried) into gpu-build/ and gpu-carry/, where scripts/gpu-check.sh and the other gpu-*.sh scripts look.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -f gpu-bundle/build.tar.xz ] || { echo "gpu-unpack: no gpu-bundle/build.tar.xz: run scripts/gpu-pack.sh and carry gpu-bundle" >&2; exit 1; }
tar -xJf gpu-bundle/build.tar.xz
mkdir -p gpu-carry
rm -rf gpu-carry/fashion-mnist
cp -r gpu-bundle/fashion-mnist gpu-carry/

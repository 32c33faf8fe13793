#!/usr/bin/env bash
# Copies build/vlmload and the shared libraries it links that are not part of glibc into DIR
# (DIR/vlmload, DIR/lib/), so it runs on another Linux machine with a glibc at least as new but
# without libuv, libcurl, TurboJPEG or cJSON. With patchelf (apt-get install patchelf) the copy
# finds DIR/lib by itself (its RUNPATH is $ORIGIN/lib), so that the processes it starts (a
# matrix's servers) keep their own libraries; without it, run LD_LIBRARY_PATH=DIR/lib DIR/vlmload.
# Usage: tools/gpu-carry.sh DIR
set -euo pipefail
dir=${1:?usage: tools/gpu-carry.sh DIR}
cd "$(dirname "$0")/.."
mkdir -p "$dir/lib"
cp "${VLMLOAD_BIN:-build/vlmload}" "$dir/"
ldd "${VLMLOAD_BIN:-build/vlmload}" | awk '/=> \// {print $3}' | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
    *) cp -L "$lib" "$dir/lib/" ;;
  esac
done
if command -v patchelf >/dev/null; then
  patchelf --set-rpath '$ORIGIN/lib' "$dir/vlmload"
  for lib in "$dir"/lib/*; do # a library's own needs are looked up by its RUNPATH, not the binary's
    patchelf --set-rpath '$ORIGIN' "$lib"
  done
else
  echo "gpu-carry: no patchelf: run it as LD_LIBRARY_PATH=$dir/lib $dir/vlmload" >&2
fi
du -sh "$dir"

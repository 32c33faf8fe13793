#!/usr/bin/env bash
# Installs the Debian 12 packages vlmload needs, when any is missing, with apt-get (through sudo
# when not root). Without an argument: what building it and running tools/demo.sh take (the
# compiler, CMake, the libraries, gnuplot for the plots). With --test: that and what the test
# suite, the benchmarks and the fuzzing take besides (Python, with aiohttp and PIL for the
# reference server, valgrind, openssl, tmux, chromium). With --list [--test]: the packages, one a
# line, and nothing installed.
set -euo pipefail

build=(build-essential cmake pkg-config libuv1-dev libcurl4-openssl-dev libpng-dev
       libturbojpeg0-dev libcjson-dev libmicrohttpd-dev zlib1g-dev gnuplot-nox)
tests=(python3 python3-yaml python3-aiohttp python3-pil valgrind openssl tmux chromium)

list=0 test=0
for a in "$@"; do
  case "$a" in
    --list) list=1 ;;
    --test) test=1 ;;
    *) echo "usage: tools/deps.sh [--test] [--list]" >&2; exit 2 ;;
  esac
done
pkgs=("${build[@]}")
((test)) && pkgs+=("${tests[@]}")
if ((list)); then
  printf '%s\n' "${pkgs[@]}"
  exit 0
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "installing: ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

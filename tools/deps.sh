#!/usr/bin/env bash
# Installs the Debian 12 packages vlmload needs to build, test and run, when any is missing.
set -euo pipefail

pkgs=(build-essential cmake pkg-config libuv1-dev libcurl4-openssl-dev libpng-dev
      libturbojpeg0-dev libcjson-dev libmicrohttpd-dev zlib1g-dev python3 python3-yaml
      valgrind openssl gnuplot-nox tmux chromium)
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

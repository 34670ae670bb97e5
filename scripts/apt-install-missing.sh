#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet (with sudo when not root), from the
# configured Debian registry only; says so in one line when all are there.
# Usage: apt-install-missing.sh TAG PACKAGE...   (TAG names the caller in the one message line)
set -euo pipefail
tag=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "$tag: all $# packages present"
  exit 0
fi
echo "$tag: installing ${#missing[@]} missing packages: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs the Debian packages of the retrieval-quality benchmark when missing (the two document
# sets and the tools the anchor uses), then prints where each set's documents are. Idempotent;
# nothing is downloaded from anywhere but the configured Debian package registry.
#   set python-library: python3.11-doc  -> /usr/share/doc/python3.11/html  (library/*.html)
#   set bash-manual:    bash-doc        -> /usr/share/doc/bash             (bashref.pdf)
#   python3-xapian (the anchor, run with Debian's /usr/bin/python3), poppler-utils (pdftotext).
# Usage: fetch-docs.sh [--quiet]   (--quiet: print nothing but errors)
set -euo pipefail

PKGS=(python3.11-doc bash-doc python3-xapian poppler-utils)

quiet=0
[[ "${1:-}" == "--quiet" ]] && quiet=1
say() { ((quiet)) || echo "$@"; }

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
  say "fetch-docs: installing ${#missing[@]} missing packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

python_root=/usr/share/doc/python3.11/html
bash_root=/usr/share/doc/bash
[[ -f "$python_root/library/json.html" ]] || { echo "fetch-docs: $python_root/library/json.html missing" >&2; exit 1; }
[[ -f "$bash_root/bashref.pdf" ]] || { echo "fetch-docs: $bash_root/bashref.pdf missing" >&2; exit 1; }

say "python-library  $(dpkg-query -W -f='${Package} ${Version}' python3.11-doc)  $python_root/library/*.html ($(ls "$python_root"/library/*.html | wc -l) pages)"
say "bash-manual     $(dpkg-query -W -f='${Package} ${Version}' bash-doc)  $bash_root/bashref.pdf ($(pdfinfo "$bash_root/bashref.pdf" | awk '/^Pages:/ {print $2}') pages)"

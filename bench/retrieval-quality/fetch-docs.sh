#!/usr/bin/env bash
# Installs the Debian packages of the retrieval-quality benchmark when missing (the two document
# sets and the tools the anchor uses), then prints where each set's documents are. Idempotent;
# nothing is downloaded from anywhere but the configured Debian package registry.
#   set python-library: python3.11-doc  -> /usr/share/doc/python3.11/html  (library/*.html)
#   set bash-manual:    bash-doc        -> /usr/share/doc/bash             (bashref.pdf)
#   set apache-manual:  apache2-doc     -> /usr/share/doc/apache2-doc/manual/en  (**/*.html)
#   python3-xapian (the anchor, run with Debian's /usr/bin/python3), poppler-utils (pdftotext).
# Usage: fetch-docs.sh [--quiet]   (--quiet: print nothing but errors)
set -euo pipefail

PKGS=(python3.11-doc bash-doc apache2-doc python3-xapian poppler-utils)

quiet=0
[[ "${1:-}" == "--quiet" ]] && quiet=1
say() { ((quiet)) || echo "$@"; }

if ((quiet)); then
  "$(dirname "$0")/../../scripts/apt-install-missing.sh" fetch-docs "${PKGS[@]}" > /dev/null
else
  "$(dirname "$0")/../../scripts/apt-install-missing.sh" fetch-docs "${PKGS[@]}"
fi

python_root=/usr/share/doc/python3.11/html
bash_root=/usr/share/doc/bash
apache_root=/usr/share/doc/apache2-doc/manual/en
[[ -f "$python_root/library/json.html" ]] || { echo "fetch-docs: $python_root/library/json.html missing" >&2; exit 1; }
[[ -f "$bash_root/bashref.pdf" ]] || { echo "fetch-docs: $bash_root/bashref.pdf missing" >&2; exit 1; }
[[ -f "$apache_root/mod/mod_ssl.html" ]] || { echo "fetch-docs: $apache_root/mod/mod_ssl.html missing" >&2; exit 1; }

say "python-library  $(dpkg-query -W -f='${Package} ${Version}' python3.11-doc)  $python_root/library/*.html ($(ls "$python_root"/library/*.html | wc -l) pages)"
say "bash-manual     $(dpkg-query -W -f='${Package} ${Version}' bash-doc)  $bash_root/bashref.pdf ($(pdfinfo "$bash_root/bashref.pdf" | awk '/^Pages:/ {print $2}') pages)"
say "apache-manual   $(dpkg-query -W -f='${Package} ${Version}' apache2-doc)  $apache_root/**/*.html ($(find "$apache_root" -name '*.html' | wc -l) pages)"

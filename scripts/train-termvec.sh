#!/usr/bin/env bash
# make train-termvec: trains the term-vector embedder into models/ragd-termvec (tools/train/
# termvec_data.py + termvec_train.py; about 3 minutes on 2 CPU cores). Installs the Debian
# documentation packages it reads and Debian's python3-torch / python3-xapian when missing; nothing
# comes from anywhere but the configured Debian package registry.
#   TERMVEC_OUT (default models/ragd-termvec), TERMVEC_WORK (default data/termvec: the pairs file)
set -euo pipefail
OUT=${TERMVEC_OUT:-models/ragd-termvec}
WORK=${TERMVEC_WORK:-data/termvec}
PKGS=(python3-torch python3-numpy python3-xapian manpages manpages-dev perl-doc postgresql-doc-15 git-doc
      debian-reference-en cmake-doc sqlite3-doc nodejs-doc linux-doc-6.1)
"$(dirname "$0")/apt-install-missing.sh" train-termvec "${PKGS[@]}"
mkdir -p "$WORK"
/usr/bin/python3 tools/train/termvec_data.py --out "$WORK/pairs.jsonl"
/usr/bin/python3 tools/train/termvec_train.py "$WORK/pairs.jsonl" --out "$OUT" \
  --epochs 1 --term-dropout 0.2 --lr 1e-3 --init lsa

# Sourced by the training scripts (not run): sets PY to a python3 with PyTorch and NumPy —
# $PYTHON_TORCH, else Debian's /usr/bin/python3 — installing Debian's python3-torch and
# python3-numpy when they are missing. $1: the caller's name, for the message.
PY=${PYTHON_TORCH:-/usr/bin/python3}
[[ -x "$PY" ]] || PY=python3
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
  echo "$1: installing python3-torch and python3-numpy (Debian)"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-numpy
fi

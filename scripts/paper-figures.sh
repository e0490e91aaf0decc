#!/usr/bin/env bash
# paper-figures.sh: the QR-Store paper's evaluation figures on this machine (scripts/paper_figures.py;
# `scripts/paper-figures.sh --help` says which figures, how they are scaled and what is written).
# Debian's python3 first: apt installs python3-matplotlib for it (another python3 on PATH, e.g.
# pyenv's, would not see it).
set -euo pipefail
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$(dirname "$0")/paper_figures.py" "$@"

#!/usr/bin/env bash
# Installs qrstore's build and test dependencies from Debian's packages, quietly and
# idempotently. Needs root (or sudo). Never installs zookeeperd: its install script starts a
# server listening on every interface; tests start their own on 127.0.0.1.
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config
  libboost-dev libboost-program-options-dev libboost-container-dev
  libsnappy-dev libnng-dev libzookeeper-mt-dev zookeeper
  libspdlog-dev catch2 libyaml-cpp-dev
  default-jre-headless python3
  clang libclang-rt-14-dev
  gdb  # scripts/cluster.sh down saves a hung node's thread stacks with it
  ccache  # scripts/test.sh compiles through it: a rerun rebuilds only what changed
  python3-matplotlib  # scripts/paper-figures.sh and plot-rows.py draw their PNGs with it
  # scripts/hosts.sh: an sshd per test host, started by hand on the host's address (where
  # systemd runs, the package also enables the machine's own ssh service: hosts.sh needs none of
  # it), and the ssh that scripts/cluster.sh starts remote nodes with; nftables cuts links
  openssh-server openssh-client nftables
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# java may come from a JDK that is not Debian's default-jre-headless; accept any java on PATH.
if command -v java >/dev/null 2>&1; then
  tmp=()
  for p in "${missing[@]}"; do [ "$p" = default-jre-headless ] || tmp+=("$p"); done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup-deps: need root to install: ${missing[*]}" >&2; exit 1
  fi
fi
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup-deps: done"

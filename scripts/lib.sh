# Shell functions shared by the scripts and the script tests (sourced, never run).

free_ports() {  # prints N distinct free TCP ports on 127.0.0.1, reserved for this shell (free_ports.py)
  python3 "$(dirname "${BASH_SOURCE[0]}")/free_ports.py" "$1" --owner "$$"
}

host_model() {  # the CPU model lscpu names: the host every published figure is recorded with
  lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1
}

use_ccache() {  # BASEDIR: builds configured from now on compile through ccache, if installed
  # Paths below BASEDIR are hashed relative to it, so any checkout shares the cache. CMake reads
  # the launcher variables when it configures a build folder for the first time.
  command -v ccache >/dev/null 2>&1 || return 0
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$1" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-10G}"
}

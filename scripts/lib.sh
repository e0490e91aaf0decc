# Shell functions shared by the scripts and the script tests (sourced, never run).

free_ports() {  # prints N distinct free TCP ports on 127.0.0.1, reserved for this shell (free_ports.py)
  python3 "$(dirname "${BASH_SOURCE[0]}")/free_ports.py" "$1" --owner "$$"
}

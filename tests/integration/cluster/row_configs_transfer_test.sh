#!/usr/bin/env bash
# The shipped partitioned configs run the transfer workload as a user starts them:
# configs/cluster-2x1-none.yaml and configs/cluster-2x3-raft.yaml (their ports swapped for free
# ones), `up --workload.kind=transfer`, with the default account count and with
# --transfer.accounts=20000. The partition ranges follow the workload's key count (no
# engine.key_space to fix by hand): every run commits or aborts every txn, none fails, the
# replicas agree, and after `down` each row's dumps together hold every account once with the
# money conserved. And the error a user meets when engine.key_space is set against the
# workload names the key and the value that works.
source "$(dirname "$0")/lib.sh"

# shipped_config NAME: configs/NAME.yaml with free ports, written to $QR_TMP/NAME.yaml.
shipped_config() {
  local out="$QR_TMP/$1.yaml"
  python3 - "$QR_SRC/configs/$1.yaml" "$out" "$QR_SRC/scripts" "$$" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[3])
from free_ports import free_ports
text = open(sys.argv[1]).read()
keys = r"\b(client_port|peer_port|row_port): \d+"
ports = iter(free_ports(len(re.findall(keys, text)), int(sys.argv[4])))
text = re.sub(keys, lambda m: m.group(1) + ": " + str(next(ports)), text)
open(sys.argv[2], "w").write(text)
PY
  QR_CONFIGS+=("$out")
  echo "$out"
}

# money_per_row CONFIG ACCOUNTS: each row's dumps hold ACCOUNTS accounts and their money.
money_per_row() {
  local cfg="$1" accounts="$2" dir="$QR_TMP/dump-$(basename "$1" .yaml)"
  local rows; rows="$("$QRSTORE_BIN/qrstore-server" --config "$cfg" --list-nodes | awk '{ print $6 }' | sort -u)"
  for r in $rows; do
    local files=() n
    for n in $("$QRSTORE_BIN/qrstore-server" --config "$cfg" --list-nodes | awk -v r="$r" '$6 == r { print $1 }'); do
      [[ -s "$dir/$n.tsv" ]] || fail "no dump of $n"
      files+=("$dir/$n.tsv")
    done
    local count sum
    count="$(cat "${files[@]}" | wc -l)"
    sum="$(cat "${files[@]}" | awk -F'\t' '{ s += $2 } END { print s + 0 }')"
    [[ "$count" == "$accounts" ]] || fail "row $r: $count accounts in its dumps, want $accounts"
    [[ "$sum" == $((accounts * 1000)) ]] || fail "row $r: money $sum, want $((accounts * 1000))"
  done
  note "every row holds the $accounts accounts once and \$$((accounts * 1000)) in all"
}

for name in cluster-2x1-none cluster-2x3-raft; do
  cfg="$(shipped_config "$name")"
  for accounts in default 20000; do
    args=(--workload.kind=transfer "--server.dump_state_dir=$QR_TMP/dump-$name")
    [[ "$accounts" == default ]] || args+=("--transfer.accounts=$accounts")
    mkdir -p "$QR_TMP/dump-$name"
    rm -f "$QR_TMP/dump-$name"/*.tsv
    qr_up "$cfg" "${args[@]}"
    # The client takes the workload from the servers (it is not on its command line).
    qr_client "$cfg" --txns 20000 --connections 2 --outstanding 2000 --seed 7 --json >"$QR_TMP/out" \
      2>"$QR_TMP/err" || fail "$name, accounts $accounts: client failed: $(tail -5 "$QR_TMP/err")"
    grep -q "the servers hold workload.kind=transfer" "$QR_TMP/err" || fail "the client did not follow the servers"
    committed="$(json_field "$QR_TMP/out" committed)"
    aborted="$(json_field "$QR_TMP/out" aborted)"
    [[ $((committed + aborted)) == 20000 ]] || fail "$name: committed $committed + aborted $aborted != 20000"
    [[ "$(json_field "$QR_TMP/out" failed)" == 0 ]] || fail "$name: failed txns"
    [[ "$(json_field "$QR_TMP/out" replicas_agree)" == true ]] || fail "$name: replicas do not agree"
    note "$name, transfer, accounts $accounts: $committed committed, $aborted aborted"
    qr_down "$cfg" >/dev/null
    [[ "$accounts" == default ]] && accounts=100000
    money_per_row "$cfg" "$accounts"
  done
done

# engine.key_space set against the workload: the error names the key and the value that works.
out="$("$QRSTORE_BIN/qrstore-server" --config "$QR_TMP/cluster-2x1-none.yaml" --node p0 --workload.kind=transfer \
  --engine.key_space=400000 2>&1)" && fail "a key space of 400000 for 100000 accounts was accepted"
grep -qF "set engine.key_space=100000, or leave it out" <<<"$out" || fail "unhelpful error: $out"
note "engine.key_space=400000 with 100000 accounts: $(grep -o 'transfer.accounts: .*' <<<"$out" | cut -c1-120)..."
echo PASS

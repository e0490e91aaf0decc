#!/usr/bin/env bash
# Bad cluster configs (docs/reliability.md): each error names the key at fault, the programs exit
# with the bad-input status (2) before starting anything, and `cluster.sh up` reports which node
# failed with the tail of its log (a port in use).
source "$(dirname "$0")/lib.sh"

server="$QRSTORE_BIN/qrstore-server"
# expect_error EXIT_CODE TEXT CMD...: CMD fails with EXIT_CODE and says TEXT.
expect_error() {
  local want="$1" text="$2"; shift 2
  local out code=0
  out="$("$@" 2>&1)" || code=$?
  [[ "$code" == "$want" ]] || fail "exit $code (want $want) from: $* -- $out"
  grep -qF -- "$text" <<<"$out" || fail "no '$text' in the error of: $* -- $out"
  note "names it: $text"
}

nodes3() {  # three nodes, with $1..$3 overriding each line
  echo "cluster:"
  echo "  nodes:"
  echo "    - ${1:-{name: a, host: 127.0.0.1, client_port: 7100, peer_port: 7200, row: 0\}}"
  echo "    - ${2:-{name: b, host: 127.0.0.1, client_port: 7101, peer_port: 7201, row: 1\}}"
  echo "    - ${3:-{name: c, host: 127.0.0.1, client_port: 7102, peer_port: 7202, row: 2\}}"
}
cfg="$QR_TMP/bad.yaml"

nodes3 "" "{name: a, host: 127.0.0.1, client_port: 7101, peer_port: 7201, row: 1}" >"$cfg"
expect_error 2 "cluster.nodes[1].name: 'a' is also cluster.nodes[0].name" "$server" --config "$cfg" --list-nodes

nodes3 "" "{name: b, host: 127.0.0.1, client_port: 7101, peer_port: 7100, row: 1}" >"$cfg"
expect_error 2 "cluster.nodes[1].peer_port: 127.0.0.1:7100 is also used by cluster.nodes[0].client_port" \
  "$server" --config "$cfg" --list-nodes

nodes3 "{name: a, host: 127.0.0.1, client_port: 7100, peer_port: 7200, row: 3}" >"$cfg"
expect_error 2 "partition 0 has no leader (no node with row 0)" "$server" --config "$cfg" --list-nodes

nodes3 "{name: a, host: 127.0.0.1, client_port: 7100, peer_port: 7200, row: 0, prot: 1}" >"$cfg"
expect_error 2 "cluster.nodes[0].prot: unknown column" "$server" --config "$cfg" --list-nodes

nodes3 "{name: a, host: 127.0.0.1, client_port: 70000, peer_port: 7200, row: 0}" >"$cfg"
expect_error 2 "cluster.nodes[0].client_port: must be in [1, 65535]" "$server" --config "$cfg" --list-nodes

nodes3 >"$cfg"
expect_error 2 "--node z: not in cluster.nodes (nodes: a, b, c)" "$server" --config "$cfg" --node z
expect_error 2 "replication.backnd: unknown key" "$server" --config "$cfg" --node a --replication.backnd=raft
expect_error 2 "replication.backend: must be one of none|raft|zookeeper" "$server" --config "$cfg" --node a \
  --replication.backend=paxos
expect_error 2 "replication.raft.members: derived from cluster.nodes and --node" "$server" --config "$cfg" --node a \
  --replication.raft.members=127.0.0.1:1,127.0.0.1:2
expect_error 2 "cluster.nodes: a list of maps is set in the YAML file only" "$server" --config "$cfg" --node a \
  --cluster.nodes=x

nodes3 "" "" "{name: c, host: 127.0.0.1, client_port: 7102, peer_port: 7202, partition: 1, row: 0}" >"$cfg"
expect_error 2 "partition 1 has no node in row 1" "$server" --config "$cfg" --list-nodes

# Partitioned rows: with followers every node needs a row_port (raft has peer_port), and
# engine.partitions is derived.
nodes3 "" "{name: b, host: 127.0.0.1, client_port: 7101, peer_port: 7201, partition: 0, row: 1}" \
  "{name: c, host: 127.0.0.1, client_port: 7102, peer_port: 7202, row_port: 7302, partition: 1, row: 0}" >"$cfg"
echo "    - {name: d, host: 127.0.0.1, client_port: 7103, peer_port: 7203, partition: 1, row: 1}" >>"$cfg"
expect_error 2 "cluster.nodes[0].row_port: a partitioned row with followers needs a port" "$server" --config "$cfg" \
  --list-nodes
nodes3 "" "{name: b, host: 127.0.0.1, client_port: 7101, peer_port: 7201, row_port: 7101, partition: 1, row: 0}" >"$cfg"
expect_error 2 "cluster.nodes[1].row_port: 127.0.0.1:7101 is also used by cluster.nodes[1].client_port" "$server" \
  --config "$cfg" --list-nodes
nodes3 "" "{name: b, host: 127.0.0.1, client_port: 7101, peer_port: 7201, partition: 1, row: 0}" \
  "{name: c, host: 127.0.0.1, client_port: 7102, peer_port: 7202, partition: 2, row: 0}" >"$cfg"
expect_error 2 "engine.partitions (2) disagrees with cluster.nodes (3 partitions)" "$server" --config "$cfg" --node a \
  --engine.partitions=2
expect_error 2 "engine.partitions (2) disagrees with cluster.nodes (3 partitions)" "$QRSTORE_BIN/qrstore-client" \
  --config "$cfg" --txns 1 --engine.partitions=2

# A port in use: cluster.sh up names the node, its log names the key and the address.
qr_config "$QR_TMP/busy.yaml" none 1
port="$(qr_port "$QR_TMP/busy.yaml" n0)"
python3 -c "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $port)); s.listen(); time.sleep(60)" &
holder=$!
sleep 0.5
out="$(qr_up "$QR_TMP/busy.yaml" 2>&1)" && fail "up succeeded with the client port in use: $out"
kill "$holder" 2>/dev/null || true
grep -qF "node n0 exited with status 1 before it was ready" <<<"$out" || fail "up did not name the node: $out"
grep -qF "cluster.nodes[0].client_port" <<<"$out" || fail "the error did not name the key: $out"
note "a port in use: up names node n0 and its log names cluster.nodes[0].client_port"

# The config file itself: missing, a directory.
expect_error 2 "cannot open config file" "$server" --config "$QR_TMP/none.yaml" --node a
expect_error 2 "config file '$QR_TMP' is a directory" "$server" --config "$QR_TMP" --node a

# Refused before anything is allocated or started (docs/reliability.md): a table that cannot fit (was an
# uncaught std::bad_alloc), a dump directory that cannot be written (was found at the clean stop).
nodes3 >"$cfg"
expect_error 2 "not enough memory: the table of 4294967296 records" "$server" --config "$cfg" --node a \
  --ycsb.records=4294967296
expect_error 2 "server.dump_state_dir: cannot write in '$QR_TMP/none': No such file or directory" "$server" \
  --config "$cfg" --node a --server.dump_state_dir="$QR_TMP/none"
# The replication points (docs/replication-points.md): what one cannot do is refused at start.
expect_error 2 "replication.point: must be one of plan|input|writes" "$server" --config "$cfg" --node a \
  --replication.point=rp2
expect_error 2 "replication.point: writes replicates what executing a batch wrote, so its executors cannot wait" \
  "$server" --config "$cfg" --node a --replication.point=writes --replication.mode=sync
expect_error 2 "server.session_read_values keeps read values on the followers" "$server" --config "$cfg" --node a \
  --replication.point=writes --server.session_read_values=true
nodes3 "" "{name: b, host: 127.0.0.1, client_port: 7101, peer_port: 7201, partition: 1, row: 0}" \
  "{name: c, host: 127.0.0.1, client_port: 7102, peer_port: 7202, partition: 2, row: 0}" >"$cfg"
# writes runs on partitioned rows too, still not in sync mode.
expect_error 2 "replication.point: writes replicates what executing a batch wrote, so its executors cannot wait" \
  "$server" --config "$cfg" --node a --replication.point=writes --replication.mode=sync
nodes3 >"$cfg"
# A key given twice names both lines; an override's error is labelled as the command line's.
{ nodes3; echo "batch:"; echo "  txns: 10"; echo "  txns: 20"; } >"$cfg"
expect_error 2 "$cfg: batch.txns: given twice (lines 7 and 8)" "$server" --config "$cfg" --node a
nodes3 >"$cfg"
expect_error 2 "command line: batch.txns: must be in" "$server" --config "$cfg" --node a --batch.txns=0
echo "PASS"

// DataIdentity: what a node's durable data (its checkpoints, its raft disk log) was made with,
// recorded beside the data as <folder>/IDENTITY, so that a start with a config that disagrees
// is refused instead of turning into another database (a checkpoint refused as foreign, a log
// replayed onto a table of another shape). The identity: the cluster (name, and every node
// with its partition), the node's place (partition, row), the table's shape (the workload kind
// and the keys of that kind that shape the table, the partition function and key space), the
// planner count (the streams of the log), the replication backend and point.
//
// A folder without IDENTITY (new, or data of a version that did not record one) gets it
// written; one with it must match key by key. Called once per process, from Server's Init
// (main thread), before any checkpoint is read.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cluster/config/topology.h"
#include "common/config.h"
#include "common/status.h"

namespace qrstore::cluster {

using DataIdentity = std::vector<std::pair<std::string, std::string>>;  // key -> value, fixed order

inline constexpr const char* kIdentityFileName = "IDENTITY";

// The identity node `me` of `topo` would give its data under `config`.
DataIdentity NodeDataIdentity(const Config& config, const Topology& topo, const NodeInfo& me);

// The node's durable data folders under `config`: server.checkpoint_dir/<node>, and with a raft
// disk log replication.raft.dir/<node>; only those configured.
std::vector<std::string> NodeDataFolders(const Config& config, const std::string& node);

// The text of an IDENTITY file, and back (kCorruption for a file that is not one).
std::string EncodeDataIdentity(const DataIdentity& id);
Result<DataIdentity> DecodeDataIdentity(const std::string& text);

// For each folder: if it holds an IDENTITY, every key in it must have the value `want` gives it
// (else kInvalidArgument naming each key that differs, the data's value and the config's, and
// the two ways on: start with the data's values, or start anew with `cluster.sh up --fresh`).
// *without: the folders that hold none; with `record` each of them gets `want` written (the
// folder made first).
Status CheckDataIdentity(const std::vector<std::string>& folders, const DataIdentity& want, const Config& config,
                         const std::string& node, bool record, std::vector<std::string>* without);

}  // namespace qrstore::cluster

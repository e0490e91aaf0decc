// A partitioned row inside one process (qrstore-row-bench, the row pipeline tests): each node's
// LocalRowLink hands its dependency values and abort votes straight to the receiving node's
// Pipeline, as the row transport (cluster/row/row_node.h) does between processes. No network, no
// copy: the engine's side of a row alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/pipeline.h"
#include "executor/range_executor.h"

namespace qrstore::cluster {

// The row's nodes, by partition (filled before any slice runs), and what crossed between them.
struct LocalRow {
  std::vector<engine::Pipeline*> nodes;
  std::atomic<uint64_t> dep_values{0};  // SendDep calls
  std::atomic<uint64_t> vote_msgs{0};   // SendVotes calls
};

// Node `me`'s sender into `row`.
class LocalRowLink final : public executor::RowSender {
 public:
  LocalRowLink(LocalRow* row, uint32_t me) : row_(row), me_(me) {}
  void SendDep(uint32_t partition, uint64_t batch, uint32_t slice, uint32_t slot, int64_t value) override {
    row_->dep_values.fetch_add(1, std::memory_order_relaxed);
    row_->nodes.at(partition)->DeliverDepValue(batch, slice, slot, value);
  }
  void SendVotes(uint32_t partition, uint64_t batch, uint32_t round, const std::vector<executor::RowTxn>& ids) override {
    row_->vote_msgs.fetch_add(1, std::memory_order_relaxed);
    row_->nodes.at(partition)->DeliverVotes(batch, me_, round, ids);
  }

 private:
  LocalRow* row_;
  uint32_t me_;
};

}  // namespace qrstore::cluster

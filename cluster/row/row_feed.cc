#include "cluster/row/row_feed.h"

#include <string>
#include <utility>

#include "cluster/row/row_input.h"
#include "cluster/row/row_messages.h"
#include "cluster/row/row_node.h"

namespace qrstore::cluster {

void SetRowFeedReaders(FollowerFeedOptions* fo, RowNode* node, bool input, bool writes) {
  const planner::RowPlace place = fo->place;
  const uint32_t planners = fo->planners;
  const bool record_stream = fo->batch_end_stream;
  if (input) {
    const storage::KeyMapper ranges = fo->ranges;
    fo->row_part = [node, place, planners, record_stream, ranges](uint64_t b, uint32_t p, std::string_view entry,
                                                                   std::string* part, bool* replaced) -> Status {
      *replaced = false;
      const uint32_t parts = place.partitions.buckets();
      const uint32_t slices = planners - (record_stream ? 1 : 0);
      if (parts == 0 || slices % parts != 0) return Status::Corruption("a row of " + std::to_string(slices) + " streams");
      const Result<RowMsgKind> kind = PeekRowMessage(entry);
      if (!kind.ok() || kind.value() != RowMsgKind::kHomeInput) {
        return Status::Corruption("not a home input (replication.point is input: every node of the row must run it)");
      }
      HomeInputParts planned;
      QR_RETURN_IF_ERROR(PlanHomeInput(entry, b, p, slices / parts, place.partitions, ranges, &planned));
      if (planned.from == place.partition) {
        // What its leader sent the peers (the parts with the input), for a successor's re-send.
        node->KeepBundle(RowHomeBundle{b, p, planned.from, planned.parts}, planned.input);
      }
      *part = std::move(planned.parts[place.partition]);
      *replaced = true;
      return Status::Ok();
    };
  } else {
    fo->row_part = [node, place, planners, record_stream](uint64_t b, uint32_t p, std::string_view entry,
                                                           std::string* part, bool* replaced) -> Status {
      // A stream of this partition's own home carries whole home slices (RowHomeBundle, Rule 1 of
      // docs/partitioned-rows.md section 9.2): this node runs its own part. Every other stream
      // carries the sub-slice a peer home sent.
      *replaced = false;
      const uint32_t parts = place.partitions.buckets();
      const uint32_t slices = planners - (record_stream ? 1 : 0);
      const bool own_home = parts > 0 && slices % parts == 0 && p / (slices / parts) == place.partition;
      const Result<RowMsgKind> kind = PeekRowMessage(entry);  // a slice's magic is not a row message's
      const bool is_bundle = kind.ok() && kind.value() == RowMsgKind::kHomeBundle;
      if (own_home != is_bundle) {
        return Status::Corruption(own_home ? "a stream of this partition's own home holds no home bundle"
                                           : "a home bundle on a stream of another home");
      }
      if (!own_home) return Status::Ok();
      RowHomeBundle bundle;
      Status st = DecodeRowMessage(entry, &bundle);
      if (!st.ok()) return st;
      if (bundle.batch != b || bundle.slice != p || bundle.from != place.partition || bundle.parts.size() != parts) {
        return Status::Corruption("a home bundle of batch " + std::to_string(bundle.batch) + ", slice " +
                                  std::to_string(bundle.slice) + ", home " + std::to_string(bundle.from) + " with " +
                                  std::to_string(bundle.parts.size()) + " parts (expected this stream's, " +
                                  std::to_string(parts) + " parts)");
      }
      // What its leader sent the peers, for the re-send a successor owes them.
      node->KeepBundle(bundle);
      *part = std::move(bundle.parts[bundle.from]);
      *replaced = true;
      return Status::Ok();
    };
  }
  fo->row_writes = writes;
  fo->row_record = [node, place, writes, planners, record_stream](uint64_t b, std::string_view entry,
                                                                  FeedBatchEnd* out) -> Status {
    RowBatchEnd rec;
    RowBatchWrites w;
    const Result<RowMsgKind> kind = PeekRowMessage(entry);
    Status st = kind.ok() ? Status::Ok() : kind.status();
    if (st.ok() && writes && kind.value() != RowMsgKind::kBatchWrites) {
      st = Status::Corruption("not an entry of writes (replication.point is writes: every node of the row must run it)");
    }
    if (st.ok() && !writes && kind.value() != RowMsgKind::kBatchEnd) st = Status::Corruption("not a batch-end record");
    if (st.ok() && writes) {
      st = DecodeRowMessage(entry, &w);
      if (st.ok()) rec = std::move(w.end);
    } else if (st.ok()) {
      st = DecodeRowMessage(entry, &rec);
    }
    if (st.ok() && (rec.batch != b || rec.partition != place.partition)) {
      st = Status::Corruption("it names batch " + std::to_string(rec.batch) + " of partition " +
                              std::to_string(rec.partition) + " (expected partition " +
                              std::to_string(place.partition) + ")");
    }
    if (st.ok() && writes) {
      // What it says its leader sent: to the row's other partitions, for slices of the batch.
      const uint32_t parts = place.partitions.buckets();
      const uint32_t slices = planners - (record_stream ? 1 : 0);
      const uint32_t per_home = parts > 0 ? slices / parts : 0;
      for (const RowSentValue& v : w.sent) {
        if (v.to >= parts || v.slice >= slices) {
          st = Status::Corruption("a value sent to partition " + std::to_string(v.to) + " for slice " + std::to_string(v.slice));
          break;
        }
      }
      for (size_t i = 0; st.ok() && i < w.reports.size(); ++i) {
        RowReport r;
        st = DecodeRowMessage(w.reports[i], &r);  // decoded once already: only the slice is new here
        if (st.ok() && (r.slice >= slices || per_home == 0 || r.slice / per_home == place.partition)) {
          st = Status::Corruption("a report of slice " + std::to_string(r.slice) + " (not another home's)");
        }
      }
    }
    if (!st.ok()) return st;
    // The votes its leader sent the peers, kept likewise (and under writes its values and reports).
    node->KeepVotes(rec);
    if (writes) {
      w.end.batch = rec.batch;
      w.end.partition = rec.partition;
      node->KeepWrites(w);
      out->writes = true;
      out->record_bytes = w.record_bytes;
      out->keys = std::move(w.keys);
      out->images = std::move(w.images);
    }
    out->values.reserve(rec.values.size());
    for (const RowBatchEndValue& v : rec.values) out->values.push_back(FeedBatchEnd::Value{v.slice, v.slot, v.value});
    out->fired = std::move(rec.fired);
    out->aborted = std::move(rec.aborted);
    return Status::Ok();
  };
}

}  // namespace qrstore::cluster

#include "cluster/row/row_input.h"

#include "cluster/row/row_messages.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/row_planner.h"
#include "storage/txn.h"

namespace qrstore::cluster {

Status PlanHomeInput(std::string_view entry, uint64_t b, uint32_t slice, uint32_t per_home,
                     const storage::KeyMapper& partitions, const storage::KeyMapper& ranges, HomeInputParts* out) {
  RowHomeInput m;
  QR_RETURN_IF_ERROR(DecodeRowMessage(entry, &m));
  const uint32_t parts = partitions.buckets();
  if (m.batch != b || m.slice != slice || per_home == 0 || m.from != slice / per_home || m.from >= parts) {
    return Status::Corruption("a home input of batch " + std::to_string(m.batch) + ", slice " + std::to_string(m.slice) +
                              ", home " + std::to_string(m.from) + " where batch " + std::to_string(b) + ", slice " +
                              std::to_string(slice) + " of a row of " + std::to_string(parts) + " was due");
  }
  uint64_t batch = 0;
  uint32_t planner = 0;
  std::vector<storage::Txn> txns;
  QR_RETURN_IF_ERROR(planner::DecodeInputSlice(m.input, &batch, &planner, &txns));
  if (batch != b || planner != slice) {
    return Status::Corruption("a home input carrying the input of batch " + std::to_string(batch) + ", slice " +
                              std::to_string(planner));
  }
  planner::RowPlanner rp(partitions, ranges, m.from);
  std::vector<planner::PlannedSlice> subs;
  rp.PlanSlices(b, slice, txns, &subs);
  out->from = m.from;
  out->parts.resize(parts);
  for (uint32_t p = 0; p < parts; ++p) out->parts[p] = planner::EncodeSlice(subs[p]);
  out->input = std::move(m.input);
  return Status::Ok();
}

}  // namespace qrstore::cluster

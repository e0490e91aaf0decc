// replication.point = input in a partitioned row (docs/replication-points.md, "Partitioned
// rows"): each group logs every home slice its partition runs a part of as the home slice's input
// (RowHomeInput), not as planned parts. A follower, or a successor seeding its inbox from the log,
// plans that input with the home's RowPlanner, which gives every part the home planned, byte for
// byte: planning is a pure function of the batch, the home slice, the txns and the partition and
// range maps, and the encoding leaves out what only the planning node has (submit times).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/key_map.h"

namespace qrstore::cluster {

// A home slice planned again from its input: parts[p] the EncodeSlice bytes (full encoding: what
// the home sends partition p) of every partition's sub-slice; input the entry's input bytes.
struct HomeInputParts {
  uint32_t from = 0;
  std::vector<std::string> parts;
  std::string input;
};

// Decodes `entry` (a RowHomeInput log entry of batch `b`, stream `slice`: home slice / per_home's)
// and plans it with the home's RowPlanner over `partitions` and the executor `ranges`. kCorruption
// naming the defect for an entry of another batch, stream or home, or an input that does not
// decode or names another batch or slice.
Status PlanHomeInput(std::string_view entry, uint64_t b, uint32_t slice, uint32_t per_home,
                     const storage::KeyMapper& partitions, const storage::KeyMapper& ranges, HomeInputParts* out);

}  // namespace qrstore::cluster

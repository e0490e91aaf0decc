// The row's side of a row follower's FollowerFeed: reading what its group's streams carry (home
// bundles on its own home's streams, sub-slices on the others, batch-end records on the last;
// under replication.point = input, home inputs on every stream but the last),
// so the feed itself knows no row message.
#pragma once

#include "cluster/follow/follower_feed.h"

namespace qrstore::cluster {

class RowNode;

// Sets fo->row_part and fo->row_record for a follower `node` at fo->place, reading
// fo->planners, fo->ranges and fo->batch_end_stream as they are now (set them first). Home
// bundles and batch-end records go to node->KeepBundle and node->KeepVotes (what a successor owes
// its peers); `node` must outlive the feed. `input` (replication.point = input): every stream but
// the records' carries home inputs (RowHomeInput), each planned here into the part this partition
// runs (cluster/row/row_input.h); those of its own home are kept as bundles with their input.
// `writes` (replication.point = writes): the records' stream carries RowBatchWrites entries, whose
// images and fates the feed gives the sub-slices (FollowerFeedOptions::row_writes; set
// fo->record_bytes) and whose sent values and reports go to node->KeepWrites.
void SetRowFeedReaders(FollowerFeedOptions* fo, RowNode* node, bool input, bool writes = false);

}  // namespace qrstore::cluster

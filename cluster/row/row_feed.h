// The row's side of a row follower's FollowerFeed: reading what its group's streams carry (home
// bundles on its own home's streams, sub-slices on the others, batch-end records on the last),
// so the feed itself knows no row message.
#pragma once

#include "cluster/follow/follower_feed.h"

namespace qrstore::cluster {

class RowNode;

// Sets fo->row_part and fo->row_record for a follower `node` at fo->place, reading
// fo->planners and fo->batch_end_stream as they are now (set them first). Home bundles and
// batch-end records go to node->KeepBundle and node->KeepVotes (what a successor owes its peers);
// `node` must outlive the feed.
void SetRowFeedReaders(FollowerFeedOptions* fo, RowNode* node);

}  // namespace qrstore::cluster

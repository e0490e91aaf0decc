// RowNode: one leader of a partitioned row as the server runs it (docs/partitioned-rows.md,
// step 2): partition `partition` of a row of `partitions` nodes, each its own process, talking
// over cluster/row/row_transport.h. (Or a follower of one: see RowNodeOptions::follower; it
// only runs its pipeline, fed by its group's log.)
//
// With followers (RowNodeOptions::replicate), the leader's group gets each own home slice
// whole before any part leaves (Rule 1) and each peer's sub-slice as it came, and after each
// batch a batch-end record: the dependency values received for it and its abort result (Rule 2,
// docs/partitioned-rows.md 9.4), on which the batch's commit waits unless it is empty.
//
//   clients -> LocalPlanner (row home: RowPlanner splits each home slice into sub-slices)
//     - its own sub-slice -> the inbox; every other one -> that partition's node (empty ones too)
//     - the home slice's txns -> RowCommit (they are answered once every partition reported)
//   inbox (own + peers' sub-slices, decoded and validated on arrival)
//     -> "row-feed": the pipeline in global order (batch, home, planner), whatever arrived first
//   Pipeline (row mode): kDepSend values -> the receiving node (held back per destination and
//     sent as one message when the executor leaves an EQ or may block: RowSender::Flush); abort
//     votes in rounds; each sub-slice's outcomes -> a report to its home (the ACK with fates and
//     read values); empty sub-slices are reported once their batch commits
//   RowCommit -> home slices in (batch, planner) order -> the sink (ClientService::OnOutcomes)
//
// Batches: a home closes batch b by size or batch.timeout_ms, or at once when a peer planned b
// already (LocalPlanner's row rule), so an idle home never holds the row up.
// The end: when a home's input ends (CloseInput: SIGTERM) it tells the row (kInputEnded) and the
// other homes end theirs too (on_row_ending: the server stops admitting). A home whose input
// ended goes on planning empty batches while a peer still plans; the row ends at the largest
// end. Finish: every batch before it committed and every home slice answered, then kFinished to
// every peer (at once, not at the node's own SIGTERM: `cluster.sh down` stops the nodes one at a
// time, and the first waits for the others' kFinished); a peer closing its connection after its
// kFinished is expected.
// Failure: a malformed or out-of-window message, a report that does not agree: the node fails
// with an error naming the peer (on_failure), stops admitting, and what was not answered is
// answered `failed` by the server. A peer that closes early fails it too, unless the row has
// followers (failover_timeout_ms > 0; docs/partitioned-rows.md 9.5): the lost peer's group
// elects a successor, which starts as a RowNode with `successor` set (its pipeline at the first
// batch D its run as a follower did not finish, its inbox seeded from its group's log), dials
// every peer with a higher transport epoch and sends RowResume; each peer drops the dead
// leader's unused values and votes of batches from D on (Pipeline::ForgetFrom), takes repeats
// from then on (AcceptRepeats), redials the successor, answers with its position and re-sends
// what it kept for that peer from D on (Retained); the successor re-sends what its predecessor
// owed each peer (its run as a follower kept it), pads its own streams with empty home slices up
// to N and plans from N. No successor within failover_timeout_ms: the node fails, naming the peer.
//
// Liveness: every node sends each peer a heartbeat every peer_timeout_ms / 5; a peer silent for
// peer_timeout_ms (row.peer_timeout_ms) fails the node naming it (a warning at half of it), so a
// hung peer (stopped, or cut off without a reset) is reported, not waited for forever.
// Bounds: sub-slices wait in the inbox only within the row's batch window (a peer at most
// 2 * batches_in_flight batches ahead; more fails the node); held-back values per destination
// are sent at 4096; home slices waiting for reports are bounded by RowCommit's max_pending.
// Threads: "row-feed", the transport's, the pipeline's and the planner's. Start, CloseInput,
// WaitFinished and Stop from one controlling thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster/row/row_messages.h"
#include "cluster/row/row_transport.h"
#include "commit/row_commit.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread.h"
#include "engine/local_planner.h"
#include "engine/pipeline.h"
#include "executor/range_executor.h"
#include "storage/key_map.h"
#include "storage/table.h"

namespace qrstore::cluster {

struct RowNodeOptions {
  uint32_t partition = 0;
  std::vector<std::string> peer_addresses;  // [partition] host:port (the row's nodes)
  storage::KeyMapper partitions;            // key -> partition (buckets = the row's size)
  engine::PipelineOptions pipeline;                 // planners = per home; ranges = Within(partitions, executors)
  engine::LocalPlannerOptions planner;
  uint32_t record_bytes = 0;
  int64_t connect_timeout_ms = 30'000;
  // A peer that sends nothing (frames or heartbeats, sent every fifth of this) for this long
  // fails the node naming it: hung, or cut off. A warning is logged at half of it.
  int64_t peer_timeout_ms = 10'000;
  // A leader with followers: called, stream by stream in batch order, with what its group
  // replicates: for each of its own home slices (on the planner thread, as soon as it is
  // planned) the whole home slice (a RowHomeBundle: every partition's part), and for each peer's
  // sub-slice (on the feed thread) the sub-slice as it came. The pipeline commits a batch only
  // once MarkReplicated came for each (Invariant 1 per partition, so a home's reply waits for
  // every partition its txn touched), and a home slice's parts leave for the peers only once its
  // bundle is replicated (Rule 1: docs/partitioned-rows.md, section 9.2). And after each batch
  // executed (on an executor thread, in batch order), as `slice` = batch_end_stream(), the
  // batch's RowBatchEnd record (Rule 2, section 9.4): the dependency values this node received
  // for it and, if it may abort, the row's result; the batch commits once that is replicated
  // too (at once when the record is empty).
  std::function<void(uint64_t batch, uint32_t slice, std::string bytes)> replicate;
  // replication.point = input (with `replicate`; docs/replication-points.md): the group gets each
  // home slice as its input (RowHomeInput), its own in place of the bundle and each peer's in
  // place of the sub-slice, which the peer's frame carries with it (RowSubSlice::input); its
  // followers plan the inputs themselves (cluster/row/row_input.h). The same on every node of
  // the row.
  bool replicate_input = false;
  // replication.point = writes (with `replicate`; docs/replication-points.md, "Partitioned rows"):
  // the group gets the home bundles and the peers' sub-slices as under plan, and in place of each
  // batch-end record a RowBatchWrites entry, written once the batch's fates are final here and its
  // aborts undone: the record, the last images of what the batch wrote here, and what this leader
  // sent its peers for the batch (dependency values, reports); every batch waits for it. Its
  // followers install the images and take the fates, never execute, and keep what it sent (a
  // successor's re-sends). A follower with it builds no reports of its own. The same on every
  // member of a group.
  bool replicate_writes = false;
  // A follower: it never plans and has no row peers (no transport). Its pipeline is fed by the
  // caller (a FollowerFeed over its group's streams, the batch-end records included:
  // pipeline()); it resolves aborts by its leader's records and sends nothing: the dependency
  // values and reports its run would send its leader's peers are kept for the last few batch
  // windows (RetainedFrames), for the re-send a successor owes them. SetEnd gives the row's end.
  bool follower = false;
  // Tests: a leader keeps everything it sent (peers' kDurable trims nothing), to compare with
  // what a follower kept. Still bounded by the per-peer cap.
  bool keep_all_sent = false;
  // Failover inside the row (docs/partitioned-rows.md 9.5; a row with followers): > 0, a peer
  // whose connection is lost (or that is silent for peer_timeout_ms) is waited for up to this
  // long, for its group's successor to resume its place (RowResume), instead of failing the node.
  int64_t failover_timeout_ms = 0;
  // This node's group term: its transport's epoch (a successor's is higher than its
  // predecessor's, so its hello replaces the dead connection) and its resume's term.
  uint64_t term = 0;
  // A successor: this node takes the place of its partition's dead leader. Its pipeline starts at
  // `first_batch` (D: RowNodeOptions::pipeline.first_batch must equal it) over the table its run
  // as a follower left; its group's log holds, per stream s, the batches below next[s], and
  // entries[s] are stream s's entries of [D, next[s]) (own home: bundles; peers: sub-slices; the
  // records' stream: unused, next says which records are logged). `kept[p]`: what its run as a
  // follower kept for peer p (RowNode::RetainedFrames). It plans from N = max(D, own streams'
  // next) on, padding its own streams with empty home slices up to N.
  struct Resume {
    // [partition] the row addresses of its group's members: its leader now is the one whose row
    // port answers (followers listen on none), tried in turn (empty: peer_addresses as they are).
    std::vector<std::vector<std::string>> candidates;
    std::vector<uint64_t> next;
    std::vector<std::vector<std::string>> entries;
    std::vector<std::vector<std::pair<uint64_t, std::string>>> kept;
  };
  bool successor = false;
  Resume resume;
  // Tests (server.test_row_crash): the node kills itself (SIGKILL) at this step of its first home
  // slice of crash_batch or later: "before_bundle", "bundle_proposed", "before_send",
  // "after_send", "executed" (docs/partitioned-rows.md 9.5's crash points). Empty: never.
  std::string crash_step;
  uint64_t crash_batch = 0;
  std::string net = "nng";
  // Client sessions (docs/sessions.md, rows): every member of a home's group, leader or
  // follower, gets the outcomes of its home's own sub-slices here, in planned order, on the
  // pipeline's commit thread before they are reported (so before the home slice is answered):
  // a home txn's fate as this node's run decided it (every session txn has a part at its home).
  commit::CommitSink own_outcomes;
};

struct RowNodeStats {
  uint64_t home_committed = 0;  // this node's clients' txns answered committed
  uint64_t home_aborted = 0;
  uint64_t home_slices = 0;
  uint64_t frames_sent = 0;
  uint64_t bytes_sent = 0;
  uint64_t values_sent = 0;     // dependency values sent to peers
  uint64_t batch_end_records = 0;  // non-empty batch-end records logged (a batch waited for each)
  uint64_t resumes = 0;         // peers' successors that resumed their place here
};

class RowNode final : public executor::RowSender, public engine::RowHome {
 public:
  // `sink`: this home's outcomes, home slice after home slice in planned order (the
  // ClientService's). `on_batch`: the pipeline's hook (digest, phases). `on_failure`: the node
  // failed (any thread; hand over only). `on_row_ending`: a peer's input ended (a reader
  // thread; hand over only): stop admitting and call CloseInput.
  RowNode(RowNodeOptions options, storage::Table* table, commit::CommitSink sink, commit::BatchHook on_batch,
          std::function<void(const Status&)> on_failure, std::function<void(uint32_t)> on_row_ending);
  ~RowNode() override;

  // Listens on its peer port, dials every peer and waits for all (bounded by
  // connect_timeout_ms; the error names who is missing), then starts the pipeline, the feed and
  // the planners.
  Status Start();
  size_t SubmitMany(std::vector<storage::Txn>& txns) { return planner_ ? planner_->SubmitMany(txns) : 0; }
  void CloseInput() {
    if (planner_) planner_->CloseInput();
  }
  // Replication of sub-slice (batch, slice) is confirmed (leader with followers; any thread).
  // For one of this home's own streams that is its home slice's bundle: its parts go to the
  // peers now (Rule 1, below).
  void MarkReplicated(uint64_t batch, uint32_t slice);
  // The group's stream of batch-end records: the one after the (home, planner) streams.
  uint32_t batch_end_stream() const { return slices_; }
  // A follower: the replication stream ended at batch `end` (the leaders' row end).
  void SetEnd(uint64_t end);
  // A follower: a home bundle of its own home from its group's log (through the feed's
  // row_part, row_feed.h): the parts its leader sent the peers are kept with the rest (RetainedFrames).
  // `input`: under replication.point = input, the home slice's input, which its frames carry.
  void KeepBundle(const RowHomeBundle& bundle, const std::string& input = std::string());
  // A follower: a batch-end record from its group's log (through the feed's row_record): the
  // votes its leader sent the peers are kept with the rest, as it sent them (RowVotes per round).
  void KeepVotes(const RowBatchEnd& record);
  // A follower under replication.point = writes: an entry from its group's log (through the
  // feed's row_record): the values and reports its leader sent the peers are kept with the rest,
  // as it sent them (values one RowDepValues frame per (peer, slice)).
  void KeepWrites(const RowBatchWrites& entry);
  engine::Pipeline* pipeline() { return pipeline_.get(); }
  // Waits (bounded) until the row ended, every batch committed, every home slice was answered
  // and every peer finished too. OK, or why not.
  Status WaitFinished(int64_t timeout_ms);
  void Fail(const Status& s);
  void Stop();

  Status health() const;
  engine::PipelineStats Stats() const { return pipeline_->Stats(); }
  RowNodeStats row_stats() const;
  // With followers: every batch before this is in this node's group for good (committed here,
  // so its sub-slices are replicated, and its batch-end record confirmed): a successor resumes at
  // or after it.
  uint64_t durable_batch() const;
  // Bytes kept for a re-send to peer p's successor, and the batch they start at (p's last
  // kDurable): with followers; 0 otherwise.
  size_t retained_bytes(uint32_t p) const;
  uint64_t retained_from(uint32_t p) const;
  // A copy of what is kept for peer p, by batch (tests).
  std::vector<std::pair<uint64_t, std::string>> RetainedFrames(uint32_t p) const;
  // The first batch this node plans (a successor's N; else its pipeline's first batch).
  uint64_t first_own_batch() const { return opt_.successor ? first_own_ : opt_.pipeline.first_batch; }
  // The batch the row ended at (valid once known).
  bool row_end_known(uint64_t* end) const;

  // executor::RowSender (executor threads)
  void SendDep(uint32_t partition, uint64_t batch, uint32_t slice, uint32_t slot, int64_t value) override;
  void SendVotes(uint32_t partition, uint64_t batch, uint32_t round, const std::vector<executor::RowTxn>& ids) override;
  void Flush() override;
  // RowHome (planner threads)
  bool BeginHomeSlice(uint64_t b, uint32_t planner) override;
  bool PeerOpened(uint64_t b) const override;
  void HomeSlicePlanned(uint64_t b, uint32_t planner, std::vector<planner::PlannedSlice>* subs,
                        std::vector<storage::Txn>* txns, int64_t plan_ns) override;
  void InputEnded(uint64_t b) override;
  bool NeedBatch(uint64_t b) override;

 private:
  struct Outbox {
    Mutex mu;
    RowDepValues msg GUARDED_BY(mu);  // values held back for one (batch, slice)
  };
  struct Inbound {
    planner::PlannedSlice slice;
    int64_t plan_ns = 0;
    std::string bytes;  // with opt_.replicate: what the followers get
  };
  // A successor's resume waiting for the "row-resume" thread (a reader thread must not block).
  struct ResumeRequest {
    uint32_t from = 0;
    RowResume msg;
  };
  // Rule 1: a home slice's frames for its peers, held until its bundle is replicated.
  struct HomeSend {
    uint64_t batch = 0;
    std::vector<std::string> frames;  // [partition]; empty for this node's own
  };
  // Failover (docs/partitioned-rows.md 9.5), a leader with followers: what this node sent one
  // peer, by batch (in send order within a batch), kept for a re-send to that peer's successor
  // until the peer says (kDurable) its group holds those batches for good.
  struct Retained {
    Mutex mu;
    std::multimap<uint64_t, std::shared_ptr<const std::string>> frames GUARDED_BY(mu);
    uint64_t from GUARDED_BY(mu) = 0;  // the peer's last kDurable batch; nothing kept below it
    size_t bytes GUARDED_BY(mu) = 0;
  };
  bool OwnStream(uint32_t slice) const { return slice / per_home_ == opt_.partition; }
  void SendLoop();  // "row-send": the frames of replicated home slices, in the order replicated
  void OnFrame(uint32_t from, std::string_view frame);
  Status HandleFrame(uint32_t from, std::string_view frame);
  void FeedLoop();
  // Rule 2 (a leader with followers): values from a peer, kept for batch m.batch's record.
  Status RecordValues(const RowDepValues& m);
  // Rule 2: batch b executed here; its record goes to the group (executor thread).
  void OnBatchExecuted(uint64_t b);
  // replication.point = writes, a leader with followers: batch b's images and fates (executor
  // thread, just before OnBatchExecuted(b)): its entry's images and reports are built here.
  void OnBatchWrites(const executor::ExecutorStageOptions::BatchWrites& w);
  void RecordHanded(uint64_t b);  // the record of batch b went to opt_.replicate
  void WatchLoop();  // "row-watch": heartbeats out, silent peers in
  void OnSubSliceOutcomes(const std::vector<commit::TxnOutcome>& v);
  void OnBatch(const commit::BatchInfo& info);
  void Report(uint32_t home_slice, uint64_t b, commit::RowSliceReport report);
  void OnHomeSlice(uint64_t b, uint32_t slice, commit::RowHomeSlice&& v);
  void DeliverHomeSlice(uint64_t b, uint32_t slice, commit::RowHomeSlice&& v);
  void FlushLocked(uint32_t to, Outbox& o) REQUIRES(o.mu);
  void Broadcast(const std::string& frame);
  // A frame about `batch` to peer `to`: kept for a re-send (with followers: Retained), then sent.
  // False once the transport failed or stopped.
  bool SendToPeer(uint32_t to, uint64_t batch, std::string frame);
  // Keeps a frame for peer `to` (Retained) unless it is below the peer's durable batch, without
  // sending it; the frame, shared, either way (to send); fails the node past the cap.
  std::shared_ptr<const std::string> Retain(uint32_t to, uint64_t batch, std::string frame);
  // Failover (docs/partitioned-rows.md 9.5).
  void OnPeerLost(uint32_t p, const Status& why);
  void ResumeLoop();  // "row-resume": a peer's successor resumes: redial, answer, re-send
  // `dialed`: a successor's own handshake dialed `from` at m.address already (two partitions
  // failing over at once resume with each other): not dialed again.
  void Resumed(uint32_t from, const RowResume& m, bool dialed = false);
  // A successor's handshake, waiting for its peers' answers: answers the resumes of peers that
  // are successors too (each would otherwise wait for the other's answer). Releases mu_ around
  // each answer.
  void ResumeWhileHandshaking(const std::vector<std::string>& dialed) REQUIRES(mu_);
  // A successor's start: seeds its inbox from the log's entries, then the handshake.
  Status SeedFromLog();
  Status Handshake();
  // A home slice this node planned (or padded: plan_commit false, nobody answers it): to the
  // inbox, its bundle to the group, its parts to the peers once replicated (Rule 1).
  // `input`: under replicate_input, the home slice's input (what the group gets, and the frames carry).
  void EmitHomeSlice(uint64_t b, uint32_t planner, std::vector<planner::PlannedSlice>* subs, int64_t plan_ns,
                     std::string input);
  // The crash hook (RowNodeOptions::crash_step): SIGKILL when `step` is it and b >= crash_batch.
  void MaybeCrash(const char* step, uint64_t b) const;
  // Peer `from` holds batches below `batch` for good: what was kept for it below that goes.
  void TrimRetained(uint32_t from, uint64_t batch);
  // With followers: tells the peers (kDurable) once this node's durable batch advanced far enough.
  void MaybeSendDurable();
  // Records `who`'s input end; true when that made the row's end known.
  bool NoteEndLocked(uint32_t who, uint64_t b) REQUIRES(mu_);
  bool Halted() const { return stop_.load() || failed_.load(); }
  // Once the row's end is known, every batch before it committed here and every home slice was
  // answered: tells the peers (kFinished), once. Call with no lock held.
  void MaybeFinish();

  const RowNodeOptions opt_;
  const uint32_t nparts_;
  const uint32_t per_home_;  // planners per home
  const uint32_t slices_;    // sub-slices per batch: nparts_ * per_home_
  const commit::CommitSink sink_;
  const commit::BatchHook on_batch_;
  const std::function<void(const Status&)> on_failure_;
  const std::function<void(uint32_t)> on_row_ending_;

  std::unique_ptr<engine::Pipeline> pipeline_;
  std::unique_ptr<engine::LocalPlanner> planner_;
  std::unique_ptr<commit::RowCommit> commit_;
  std::unique_ptr<RowTransport> transport_;  // none on a follower
  std::vector<std::unique_ptr<Outbox>> outbox_;  // [partition]
  std::vector<std::unique_ptr<Retained>> retained_;  // [partition], with followers

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<uint64_t, uint32_t>, Inbound> inbox_ GUARDED_BY(mu_);  // (batch, slice)
  std::map<uint64_t, std::vector<uint8_t>> empty_ GUARDED_BY(mu_);          // batch -> [slice] listed no txn
  std::map<uint64_t, std::vector<uint8_t>> reported_ GUARDED_BY(mu_);       // a follower's batch -> [slice] had outcomes
  // Rule 1 (with followers), for this home's own streams: frames waiting for their bundle's
  // replication, frames to send, and which slices the feed published before (published_own_)
  // or after (replicated_early_) their replication was confirmed. All bounded by the batch window.
  std::map<std::pair<uint64_t, uint32_t>, HomeSend> held_ GUARDED_BY(mu_);
  std::deque<HomeSend> to_send_ GUARDED_BY(mu_);
  std::set<std::pair<uint64_t, uint32_t>> published_own_ GUARDED_BY(mu_);
  std::set<std::pair<uint64_t, uint32_t>> replicated_early_ GUARDED_BY(mu_);
  uint64_t committed_ GUARDED_BY(mu_) = 0;  // batches committed here
  // With followers: batch-end records confirmed replicated, [0, records_next_) and those beyond
  // (confirmations may come out of order); durable_sent_: the last kDurable batch sent.
  uint64_t records_next_ GUARDED_BY(mu_) = 0;
  std::set<uint64_t> records_early_ GUARDED_BY(mu_);
  uint64_t durable_sent_ GUARDED_BY(mu_) = 0;
  int64_t peer_opened_ GUARDED_BY(mu_) = -1;       // highest batch a peer planned
  std::vector<int64_t> ends_ GUARDED_BY(mu_);      // [partition] input end, -1 unknown
  std::vector<uint8_t> finished_ GUARDED_BY(mu_);  // [partition]
  bool row_end_known_ GUARDED_BY(mu_) = false;
  uint64_t row_end_ GUARDED_BY(mu_) = 0;
  Status health_ GUARDED_BY(mu_);
  std::atomic<int64_t> peer_opened_fast_{-1};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> values_sent_{0};
  std::atomic<bool> finished_sent_{false};
  std::atomic<uint64_t> batch_end_records_{0};
  // A leader with followers: batch-end records handed to opt_.replicate (or found logged) for
  // every batch below it. WaitFinished waits for it, so the caller's end markers follow the
  // last record on its stream (an empty record lets its batch commit before it is handed over).
  std::atomic<uint64_t> records_handed_{0};

  // Rule 2, a leader with followers: what each batch's record will carry, until it executed.
  // Bounded by the batches a value may come for (2 * batches_in_flight).
  Mutex rec_mu_;
  std::map<uint64_t, std::vector<RowBatchEndValue>> rec_values_ GUARDED_BY(rec_mu_);
  std::map<uint64_t, std::pair<std::vector<executor::RowTxn>, std::vector<executor::RowTxn>>>
      rec_resolved_ GUARDED_BY(rec_mu_);  // (fired, aborted) of batches that may abort
  std::map<uint64_t, std::vector<std::vector<executor::RowTxn>>> rec_votes_ GUARDED_BY(rec_mu_);  // [round]
  // replication.point = writes: the values sent per batch (FlushLocked), and each batch's entry
  // but its record (OnBatchWrites). Bounded like the values above.
  std::map<uint64_t, std::vector<RowSentValue>> rec_sent_ GUARDED_BY(rec_mu_);
  std::map<uint64_t, RowBatchWrites> rec_writes_ GUARDED_BY(rec_mu_);

  // Home slices delivered in order: the next (batch, planner) due and those completed early.
  mutable Mutex home_mu_;
  uint64_t next_home_batch_ GUARDED_BY(home_mu_) = 0;
  uint32_t next_home_planner_ GUARDED_BY(home_mu_) = 0;
  std::map<std::pair<uint64_t, uint32_t>, commit::RowHomeSlice> early_ GUARDED_BY(home_mu_);
  std::vector<commit::TxnOutcome> outcomes_ GUARDED_BY(home_mu_);  // scratch
  uint64_t home_committed_ GUARDED_BY(home_mu_) = 0;
  uint64_t home_aborted_ GUARDED_BY(home_mu_) = 0;
  uint64_t home_slices_ GUARDED_BY(home_mu_) = 0;

  NamedThread feeder_;
  NamedThread watcher_;
  NamedThread sender_;
  std::unique_ptr<std::atomic<int64_t>[]> last_heard_ns_;  // [partition] when its last frame came
  bool started_ = false;

  // Failover.
  std::vector<int64_t> lost_ns_ GUARDED_BY(mu_);          // [partition] when its loss was noticed (0: not lost)
  std::vector<uint64_t> peer_term_ GUARDED_BY(mu_);       // [partition] the highest term it resumed with
  std::deque<ResumeRequest> resumes_ GUARDED_BY(mu_);     // bounded: one per peer's successor at a time
  std::map<uint32_t, RowResume> answers_ GUARDED_BY(mu_);  // a successor: the peers' answers
  std::atomic<bool> repeats_{false};  // a resume happened: repeated frames are dropped
  uint64_t rec_done_ GUARDED_BY(rec_mu_) = 0;  // records built for batches below it
  uint64_t fed_batch_ GUARDED_BY(mu_) = 0;     // FeedLoop's next (batch, slice)
  uint32_t fed_slice_ GUARDED_BY(mu_) = 0;
  // Set by Start, read-only after.
  std::vector<uint64_t> logged_next_;  // a successor: per stream, the log's end (entries below it are logged)
  uint64_t first_own_ = 0;             // a successor: N, the first batch it plans
  std::atomic<uint64_t> resumes_done_{0};
  NamedThread resumer_;
};

}  // namespace qrstore::cluster

#include "executor/executor_stage.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "common/clock.h"

namespace qrstore::executor {

namespace {

// The same set of txns (a peer sends its votes sorted; a repeat is compared as a set anyway).
bool SameVotes(std::vector<RowTxn> a, std::vector<RowTxn> b) {
  for (auto* v : {&a, &b}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return a == b;
}

// "{(slice 1, home 3), ...}", the first few of them, for an error message.
std::string VotesText(const std::vector<RowTxn>& ids) {
  constexpr size_t kShown = 8;
  std::string out = "{";
  for (size_t i = 0; i < ids.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += "(slice " + std::to_string(ids[i].slice) + ", home " + std::to_string(ids[i].home) + ")";
  }
  if (ids.size() > kShown) out += ", ... " + std::to_string(ids.size()) + " in all";
  return out + "}";
}

}  // namespace

ExecutorStage::ExecutorStage(ExecutorStageOptions options, BatchRing* ring, storage::Table* table)
    : opt_(options), ring_(ring), table_(table), record_bytes_(table->layout().size()) {
  for (uint32_t r = 0; r < ring_->executors; ++r) {
    executors_.push_back(std::make_unique<RangeExecutor>(table_, r, opt_.track_digest));
    executors_.back()->set_row_sender(opt_.row_sender);
    // A row node's resolver reads each key's accesses only (cascade): logged slices may park.
    executors_.back()->set_park_when_logging(opt_.row_sender != nullptr);
    if (opt_.history_bytes > 0 && opt_.row_sender == nullptr) {
      histories_.push_back(
          std::make_unique<WriteHistory>(record_bytes_, opt_.history_bytes / ring_->executors, ring_->first_batch));
      executors_.back()->set_history(histories_.back().get());
    }
  }
  executed_ = ring_->first_batch;
  image_next_ = ring_->first_batch;
  image_cow_ = opt_.image_sink != nullptr && opt_.image_sink->CopyOnWrite();
}

bool ExecutorStage::HistoryCovers(uint64_t batch) const {
  if (histories_.empty()) return false;
  for (const auto& h : histories_) {
    if (!h->Covers(batch)) return false;
  }
  return true;
}

void ExecutorStage::StopHistory() {
  for (const auto& h : histories_) h->Stop();
}

void ExecutorStage::Start() {
  for (uint32_t r = 0; r < ring_->executors; ++r) {
    threads_.emplace_back("executor-" + std::to_string(r), [this, r] { Loop(r); });
  }
}

void ExecutorStage::Join() {
  for (auto it = threads_.rbegin(); it != threads_.rend(); ++it) it->Join();
  threads_.clear();
}

void ExecutorStage::PrepareSlice(SliceState& ss) const {
  ss.deps.Reset(ss.plan.dep_slots);
  if (opt_.row_sender != nullptr) {
    // Which slots the row fills (a kDepRecv's), for DeliverDepValue's checks.
    ss.recv.assign(ss.plan.dep_slots, SliceState::kLocalSlot);
    for (const auto& eq : ss.plan.eqs) {
      for (const planner::Fragment& f : eq) {
        if (f.kind == planner::FragKind::kDepRecv) ss.recv[f.slot] = SliceState::kRowWaiting;
      }
    }
  }
  if (opt_.capture_reads) ss.read_values.resize(uint64_t{ss.plan.read_slots} * record_bytes_);
}

Status ExecutorStage::TakeEarlyValuesLocked(SliceState& ss, uint64_t b, uint32_t p) {
  Status error;
  auto it = pending_.find({b, p});
  if (it != pending_.end()) {
    for (const EarlyValue& e : it->second) {
      Status st = FillLocked(ss, b, p, e.slot, e.value);
      if (!st.ok()) {
        error = std::move(st);
        break;
      }
    }
    pending_values_ -= it->second.size();
    pending_.erase(it);
  }
  return error;
}

void ExecutorStage::AcceptRepeats() {
  QR_CHECK(opt_.row_sender != nullptr, "AcceptRepeats on a node outside a partitioned row");
  MutexLock lk(ring_->mu);
  accept_repeats_ = true;
}

const std::vector<RowTxn>* ExecutorStage::GivenVotesLocked(uint64_t b, uint32_t from, uint32_t round) const {
  auto find = [from](const PeerVotes& v) -> const std::vector<RowTxn>* {
    for (const auto& [q, ids] : v) {
      if (q == from) return &ids;
    }
    return nullptr;
  };
  // A round is either still collected (votes_) or consumed (consumed_votes_), never both.
  if (auto it = votes_.find({b, round}); it != votes_.end()) return find(it->second);
  if (auto it = consumed_votes_.find(b); it != consumed_votes_.end() && round < it->second.size()) {
    return find(it->second[round]);
  }
  return nullptr;
}

Status ExecutorStage::DeliverVotes(uint64_t b, uint32_t from, uint32_t round, std::vector<RowTxn> ids) {
  QR_CHECK(opt_.row_sender != nullptr, "DeliverVotes on a node outside a partitioned row");
  Status error;
  {
    MutexLock lk(ring_->mu);
    if (ring_->Halted()) return Status::Ok();
    const std::string what = "abort votes of batch " + std::to_string(b) + " round " + std::to_string(round) +
                             " from partition " + std::to_string(from) + ": ";
    const uint64_t committed = ring_->committed;
    const uint64_t window = 2 * ring_->size();
    if (from >= opt_.row_partitions || from == opt_.row_partition) {
      error = Status::Corruption(what + "not a peer of partition " + std::to_string(opt_.row_partition) +
                                 " in a row of " + std::to_string(opt_.row_partitions));
    } else if (accept_repeats_ && b < committed) {
      // A batch commits only after its voting ended: these repeat votes it used (a resumed peer
      // re-sends from an earlier batch). Dropped, and nothing is kept for them.
      return Status::Ok();
    } else if (b < committed || b >= committed + window) {
      error = Status::Corruption(what + "batch out of the window [" + std::to_string(committed) + ", " +
                                 std::to_string(committed + window) + ")");
    } else if (accept_repeats_) {
      // Batches committed since the last call: nothing of theirs will be consumed or repeated
      // into them any more (a repeat for them is dropped above).
      votes_.erase(votes_.begin(), votes_.lower_bound({committed, 0}));
      consumed_votes_.erase(consumed_votes_.begin(), consumed_votes_.lower_bound(committed));
      if (const std::vector<RowTxn>* given = GivenVotesLocked(b, from, round); given != nullptr) {
        // The resumed peer ran the same sub-slices from the same state: its votes are the ones
        // given before, so an equal repeat adds nothing (the round may even be over: it must not
        // be fed into a later one), and a different one means the row diverged.
        if (SameVotes(*given, ids)) return Status::Ok();
        error = Status::Corruption(what + "a repeat differs from the votes given before: " + VotesText(*given) +
                                   " before, " + VotesText(ids) + " now");
      } else {
        votes_[{b, round}].emplace_back(from, std::move(ids));
      }
    } else if (auto& got = votes_[{b, round}];
               std::any_of(got.begin(), got.end(), [&](const auto& g) { return g.first == from; })) {
      error = Status::Corruption(what + "given twice");
    } else {
      got.emplace_back(from, std::move(ids));
    }
  }
  if (!error.ok()) return error;
  ring_->votes_cv.notify_all();
  return Status::Ok();
}

Status ExecutorStage::DeliverResolved(uint64_t b, std::vector<RowTxn> fired, std::vector<RowTxn> aborted) {
  QR_CHECK(opt_.row_resolved_by_leader, "DeliverResolved on a node that resolves by voting");
  Status error;
  {
    MutexLock lk(ring_->mu);
    if (ring_->Halted()) return Status::Ok();
    const uint64_t committed = ring_->committed;
    const uint64_t window = 2 * ring_->size();
    // Results of batches that committed without needing one (nothing there may abort).
    resolved_.erase(resolved_.begin(), resolved_.lower_bound(committed));
    const std::string what = "the abort result of batch " + std::to_string(b) + ": ";
    // A batch that needs a result cannot commit without it: one for a batch committed already
    // is for a batch that needed none (nothing there may abort), and comes late. Dropped.
    if (b < committed) return Status::Ok();
    if (b >= committed + window) {
      error = Status::Corruption(what + "batch out of the window [" + std::to_string(committed) + ", " +
                                 std::to_string(committed + window) + ")");
    } else if (!resolved_.emplace(b, std::make_pair(std::move(fired), std::move(aborted))).second) {
      error = Status::Corruption(what + "given twice");
    }
  }
  if (!error.ok()) return error;
  ring_->votes_cv.notify_all();
  return Status::Ok();
}

uint64_t ExecutorStage::executed_batches() const {
  MutexLock lk(ring_->mu);
  return executed_;
}

size_t ExecutorStage::ForgetFrom(uint32_t from, uint64_t first_batch, std::vector<Forgotten>* values) {
  MutexLock lk(ring_->mu);
  size_t dropped = 0;
  for (auto it = pending_.lower_bound({first_batch, 0}); it != pending_.end();) {
    auto& v = it->second;
    const size_t before = v.size();
    v.erase(std::remove_if(v.begin(), v.end(),
                           [&](const EarlyValue& e) {
                             if (e.from != from) return false;
                             if (values != nullptr) values->push_back(Forgotten{it->first.first, it->first.second, e.slot});
                             return true;
                           }),
            v.end());
    dropped += before - v.size();
    pending_values_ -= before - v.size();
    it = v.empty() ? pending_.erase(it) : std::next(it);
  }
  for (auto it = votes_.lower_bound({first_batch, 0}); it != votes_.end(); ++it) {
    auto& v = it->second;
    const size_t before = v.size();
    v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& pv) { return pv.first == from; }), v.end());
    dropped += before - v.size();
  }
  return dropped;
}

Status ExecutorStage::DeliverDepValue(uint64_t b, uint32_t p, uint32_t dep_slot, int64_t value, uint32_t from) {
  QR_CHECK(opt_.row_sender != nullptr, "DeliverDepValue on a node outside a partitioned row");
  MutexLock lk(ring_->mu);
  if (ring_->Halted()) return Status::Ok();
  const std::string what = "dependency value for slice (" + std::to_string(b) + ", " + std::to_string(p) + ") slot " +
                           std::to_string(dep_slot) + ": ";
  BatchSlot& slot = ring_->Slot(b);
  const uint64_t committed = ring_->committed;
  const uint64_t window = 2 * ring_->size();
  if (p >= ring_->planners) {
    return Status::Corruption(what + "no such slice (" + std::to_string(ring_->planners) + " per batch)");
  } else if (accept_repeats_ && b < committed) {
    // Batch b committed, so every slot of it the row fills was filled (its executors waited
    // for them): this repeats a value already used. Dropped.
    return Status::Ok();
  } else if (b < committed) {
    return Status::Corruption(what + "the batch committed already");
  } else if (b >= committed + window) {
    // A sender runs at most batches_in_flight batches ahead of the slowest node of its row
    // (its feed admits no more), so this is a broken peer, not a fast one.
    return Status::Corruption(what + "more than " + std::to_string(window) +
                              " batches ahead of the last committed one (" + std::to_string(committed) + ")");
  } else if (slot.batch == b && slot.slices[p]->published) {
    return FillLocked(*slot.slices[p], b, p, dep_slot, value);
  } else if (pending_values_ >= kMaxPendingValues) {
    return Status::Corruption(what + "more than " + std::to_string(kMaxPendingValues) +
                              " values wait for their sub-slices");
  }
  pending_[{b, p}].push_back(EarlyValue{dep_slot, value, from});
  ++pending_values_;
  return Status::Ok();
}

Status ExecutorStage::FillLocked(SliceState& ss, uint64_t b, uint32_t p, uint32_t dep_slot, int64_t value) {
  if (accept_repeats_ && dep_slot < ss.recv.size() && ss.recv[dep_slot] == SliceState::kRowFilled) {
    // A repeat (a resumed peer re-sends, or an early value came twice). The sender computes the
    // value from the same sub-slices and state, so it must be the one the slot holds.
    const int64_t held = ss.deps.Value(dep_slot);
    if (held == value) return Status::Ok();
    return Status::Corruption("dependency value for slice (" + std::to_string(b) + ", " + std::to_string(p) +
                              ") slot " + std::to_string(dep_slot) + ": a repeat differs from the value the slot holds (" +
                              std::to_string(held) + " held, " + std::to_string(value) + " repeated)");
  }
  if (dep_slot >= ss.recv.size() || ss.recv[dep_slot] != SliceState::kRowWaiting) {
    const std::string why = dep_slot >= ss.recv.size() ? "past its " + std::to_string(ss.recv.size()) + " slots"
                            : ss.recv[dep_slot] == SliceState::kRowFilled ? "filled twice"
                                                                          : "not a slot the row fills";
    return Status::Corruption("dependency value for slice (" + std::to_string(b) + ", " + std::to_string(p) +
                              ") slot " + std::to_string(dep_slot) + ": " + why);
  }
  ss.recv[dep_slot] = SliceState::kRowFilled;
  ss.deps.Publish(dep_slot, value);
  return Status::Ok();
}

void ExecutorStage::ReleaseRowWaitsLocked() {
  if (opt_.row_sender == nullptr) return;
  for (auto& slot : ring_->slots()) {
    for (auto& ss : slot->slices) {
      if (!ss->published) continue;
      for (uint32_t i = 0; i < ss->recv.size(); ++i) {
        if (ss->recv[i] == SliceState::kRowWaiting) {
          ss->recv[i] = SliceState::kRowFilled;
          ss->deps.Publish(i, 0);
        }
      }
    }
  }
}

void ExecutorStage::Loop(uint32_t me) {
  RangeExecutor& ex = *executors_[me];
  for (uint64_t b = ring_->first_batch;; ++b) {
    if (opt_.image_sink != nullptr && b > ring_->first_batch && !ImageBoundary(b - 1, me)) return;  // halted: left
    BatchSlot& slot = ring_->Slot(b);
    ex.log().Clear();
    // Logging starts at the first slice with abortable ops: only from there on can a
    // transaction abort or be affected by an abort (effects only flow forward).
    bool log = false;
    bool given = false;  // replication.point = writes, a follower: the slices carry the batch's result
    for (uint32_t p = 0; p < ring_->planners; ++p) {
      SliceState& ss = *slot.slices[p];
      {
        MutexUniqueLock lk(ring_->mu);
        ring_->published_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) {
          return ring_->Halted() || ring_->PastEnd(b) || Runnable(slot, ss, b);
        });
        // A published slice is run even when stopping: another executor may already be
        // waiting for one of its dependency values, and that wait has no timeout. For the
        // same reason what is parked runs before leaving. But no slice from where another
        // executor left on: it will not publish its share of that slice's values.
        if (!Runnable(slot, ss, b) || std::make_pair(b, p) >= leave_at_) {
          const bool halted = ring_->Halted();
          lk.Unlock();
          ex.Drain();
          // After the drain: until then another executor may still have to run this batch's
          // earlier slices for the values this one's parked fragments wait for.
          if (halted) LeaveAt(b, p);
          return;
        }
        if (slot.exec_start_ns == 0) slot.exec_start_ns = NowNanos();
      }
      log = log || ss.plan.may_abort;
      // Fragments parked behind a dependency value may wait while the next slices run
      // (all of them are published, so alive, until the batch commits): a row node goes on
      // with its next sub-slice while a peer's values are outstanding.
      ex.RunEq(ss.plan, &ss.deps, log, opt_.capture_reads ? ss.read_values.data() : nullptr, /*drain=*/false);
      if (ss.plan.writes.given) {
        given = true;
        if (me < ss.plan.writes.keys.size()) ex.Install(ss.plan.writes.keys[me], ss.plan.writes.images[me]);
      }
    }
    ex.Drain();
    // A batch that logs is captured by its resolving executor, after its aborts are undone.
    if (opt_.capture_writes && !log) ex.Capture(SlicesOf(slot), &slot.written_keys[me], &slot.written_images[me]);
    MutexUniqueLock lk(ring_->mu);
    slot.digest_deltas[me] = ex.TakeDigestDelta();
    if (++slot.exec_done == ring_->executors) {
      // Last one out resolves the batch. The others that logged are waiting below, so the
      // logs and the records of every range are this thread's until `executed`.
      slot.fates.any_abort = false;
      resolver_.set_cow_epoch(ex.cow_epoch());  // everyone waits before the same boundary
      row_resolver_.set_cow_epoch(ex.cow_epoch());
      if (log && opt_.row_sender != nullptr) {
        lk.Unlock();
        uint64_t delta = 0;
        if (!RowResolve(b, slot, opt_.track_digest ? &delta : nullptr)) {  // halted meanwhile
          LeaveAt(b + 1, 0);
          return;
        }
        if (opt_.capture_writes) {
          // After the undo: the images are the batch's final values. The other executors wait below.
          const std::vector<const planner::PlannedSlice*> slices = SlicesOf(slot);
          for (uint32_t r = 0; r < ring_->executors; ++r) {
            executors_[r]->Capture(slices, &slot.written_keys[r], &slot.written_images[r]);
          }
        }
        lk.Lock();
        slot.resolver_delta = delta;
      } else if (log) {
        lk.Unlock();
        std::vector<const planner::PlannedSlice*> slices;
        std::vector<char*> reads;
        for (auto& s : slot.slices) {
          slices.push_back(&s->plan);
          reads.push_back(opt_.capture_reads ? s->read_values.data() : nullptr);
        }
        std::vector<ExecLog*> logs;
        std::vector<WriteHistory*> histories;
        for (auto& e : executors_) {
          logs.push_back(&e->log());
          if (e->history() != nullptr) histories.push_back(e->history());
        }
        uint64_t delta = 0;
        resolver_.Resolve(slices, logs, table_, &slot.fates, reads, opt_.track_digest ? &delta : nullptr, histories);
        if (opt_.capture_writes) {
          for (uint32_t r = 0; r < ring_->executors; ++r) {
            executors_[r]->Capture(slices, &slot.written_keys[r], &slot.written_images[r]);
          }
        }
        lk.Lock();
        slot.resolver_delta = delta;
        reexecuted_ += slot.fates.reexecuted;
      } else if (given) {
        TakeGivenFates(slot);
      }
      slot.executed = true;
      slot.executed_ns = NowNanos();
      // Batches finish execution in order: a logging batch holds every executor until it is
      // resolved, and otherwise the last executor marks it within the same critical section.
      QR_CHECK_EQ(executed_, b);
      executed_ = b + 1;
      // After a halt a row's missing values were filled with 0 (ReleaseRowWaitsLocked, in the
      // same critical section as the halt): such a batch is not reported executed.
      const bool halted = ring_->Halted();
      lk.Unlock();
      ring_->executed_cv.notify_all();
      // Batch b+1 cannot finish executing before this thread returns: the calls come in order.
      if (opt_.on_batch_writes && !halted) {
        ExecutorStageOptions::BatchWrites w;
        w.batch = b;
        w.slices = SlicesOf(slot);
        if (opt_.capture_reads) {
          for (auto& s : slot.slices) w.reads.emplace_back(s->read_values);
        }
        w.keys = &slot.written_keys;
        w.images = &slot.written_images;
        w.fates = &slot.fates;
        opt_.on_batch_writes(w);
      }
      if (opt_.on_batch_executed && !halted) opt_.on_batch_executed(b);
    } else if (log) {
      // Batch b+1 must not run before b's aborts are undone.
      // The monotonic counter, not slot.executed: once b is committed its slot may already be
      // reclaimed (and its flags reset) before this thread wakes up.
      ring_->executed_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) { return ring_->Halted() || executed_ > b; });
      if (executed_ <= b) {
        // Halted first. The resolving executor may still finish batch b and go on, but it
        // starts nothing from b + 1 on (where this one leaves), in the same critical section.
        LeaveAtLocked(b + 1, 0);
        return;
      }
    }
  }
}

std::vector<const planner::PlannedSlice*> ExecutorStage::SlicesOf(BatchSlot& slot) const {
  std::vector<const planner::PlannedSlice*> out;
  out.reserve(slot.slices.size());
  for (auto& s : slot.slices) out.push_back(&s->plan);
  return out;
}

void ExecutorStage::TakeGivenFates(BatchSlot& slot) const {
  BatchFates& f = slot.fates;
  f.any_abort = false;
  f.aborted = 0;
  f.fates.resize(slot.slices.size());
  for (size_t p = 0; p < slot.slices.size(); ++p) {
    const planner::PlannedSlice& s = slot.slices[p]->plan;
    f.fates[p].assign(s.txns.size(), Fate::kCommit);
    if (!s.writes.given) continue;
    for (size_t i = 0; i < s.writes.fates.size() && i < s.txns.size(); ++i) {
      f.fates[p][i] = static_cast<Fate>(s.writes.fates[i]);
      if (f.fates[p][i] != Fate::kCommit) {
        f.any_abort = true;
        ++f.aborted;
      }
    }
  }
}

bool ExecutorStage::ImageBoundary(uint64_t done, uint32_t me) {
  MutexUniqueLock lk(ring_->mu);
  if (done >= image_next_) {
    // The first executor past `done`: every earlier boundary is decided (an executor passes
    // them in order; one with a stopping image holds everyone until it is taken, and a
    // copy-on-write one is kept apart below until every executor passed it).
    QR_CHECK_EQ(done, image_next_);
    image_next_ = done + 1;
    storage::TableImage* image = opt_.image_sink->Want(done);
    if (image != nullptr && image_cow_ && table_->sparse_size() == 0) {
      // Copy-on-write, nobody waits: the first here begins the image's epoch; each takes it as
      // it passes (its range is done with `done`, and its aborts are undone: an executor of a
      // batch that logged waited for its resolution before coming here); the last hands the
      // image over. Others may pass later boundaries before the last one passes this one.
      QR_CHECK(cow_image_ == nullptr, "a second copy-on-write image before the first was taken");
      cow_image_ = image;
      cow_batch_ = done;
      cow_arrived_ = 0;
      image_epoch_ = image->Begin(*table_, /*stopped=*/false);
      image = nullptr;
    }
    image_batch_ = done;
    image_ = image;
    image_arrived_ = image_copied_ = 0;
  }
  if (cow_image_ != nullptr && cow_batch_ == done) {
    executors_[me]->set_cow_epoch(image_epoch_);
    if (++cow_arrived_ == ring_->executors) {
      cow_image_ = nullptr;
      opt_.image_sink->Taken(done);
    }
    return true;
  }
  if (image_batch_ != done || image_ == nullptr) return true;
  if (image_cow_) {
    // Copy-on-write with sparse records: those are copied at the boundary, with every executor
    // stopped there; the last to come begins the image, then everyone goes on.
    if (++image_arrived_ < ring_->executors) {
      ring_->executed_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) {
        return ring_->Halted() || image_complete_ > done;
      });
      if (image_complete_ <= done) {
        LeaveAtLocked(done + 1, 0);
        return false;
      }
      executors_[me]->set_cow_epoch(image_epoch_);
      return true;
    }
    storage::TableImage* image = image_;
    lk.Unlock();
    const uint8_t epoch = image->Begin(*table_, /*stopped=*/true);
    lk.Lock();
    image_epoch_ = epoch;
    executors_[me]->set_cow_epoch(epoch);
    image_ = nullptr;
    image_complete_ = done + 1;
    opt_.image_sink->Taken(done);
    lk.Unlock();
    ring_->executed_cv.notify_all();
    return true;
  }
  if (++image_arrived_ == ring_->executors) ring_->executed_cv.notify_all();
  // Until every range is done with `done` (and its aborts are undone), nobody copies.
  ring_->executed_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) {
    return ring_->Halted() || image_arrived_ == ring_->executors;
  });
  if (image_arrived_ != ring_->executors) {  // halted
    LeaveAtLocked(done + 1, 0);
    return false;
  }
  storage::TableImage* image = image_;
  lk.Unlock();
  image->CopyShare(*table_, me, ring_->executors);
  lk.Lock();
  if (++image_copied_ == ring_->executors) {
    image_ = nullptr;
    image_complete_ = done + 1;
    opt_.image_sink->Taken(done);
    ring_->executed_cv.notify_all();
  }
  // Nobody writes the table until every share is copied.
  ring_->executed_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) { return ring_->Halted() || image_complete_ > done; });
  if (image_complete_ <= done) LeaveAtLocked(done + 1, 0);
  return image_complete_ > done;
}

void ExecutorStage::LeaveAt(uint64_t b, uint32_t p) {
  MutexLock lk(ring_->mu);
  LeaveAtLocked(b, p);
}

void ExecutorStage::LeaveAtLocked(uint64_t b, uint32_t p) { leave_at_ = std::min(leave_at_, std::make_pair(b, p)); }

bool ExecutorStage::RowResolve(uint64_t b, BatchSlot& slot, uint64_t* digest_delta) {
  std::vector<const planner::PlannedSlice*> slices;
  for (auto& s : slot.slices) slices.push_back(&s->plan);
  std::vector<ExecLog*> logs;
  for (auto& e : executors_) logs.push_back(&e->log());
  row_resolver_.Begin(slices, logs, table_);
  if (opt_.row_resolved_by_leader) return ResolvedByLeader(b, slot, digest_delta);
  std::vector<RowTxn> mine = row_resolver_.FiredHere();
  std::vector<RowTxn> fired = mine;  // round 0 is every node's fired votes
  row_resolver_.Add(mine);
  for (uint32_t round = 0;; ++round) {
    QR_CHECK_LE(round, ring_->planners * uint64_t{planner::kMaxSliceTxns});  // each round adds a txn
    for (uint32_t q = 0; q < opt_.row_partitions; ++q) {
      if (q != opt_.row_partition) opt_.row_sender->SendVotes(q, b, round, mine);
    }
    std::vector<std::pair<uint32_t, std::vector<RowTxn>>> peers;
    {
      MutexUniqueLock lk(ring_->mu);
      auto key = std::make_pair(b, round);
      ring_->votes_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) {
        return ring_->Halted() || votes_[key].size() + 1 == opt_.row_partitions;
      });
      if (ring_->Halted()) return false;
      peers = std::move(votes_[key]);
      votes_.erase(key);
      // Kept for recognising a repeat of this round (GivenVotesLocked), until b committed.
      consumed_votes_.erase(consumed_votes_.begin(), consumed_votes_.lower_bound(ring_->committed));
      std::vector<PeerVotes>& consumed = consumed_votes_[b];
      QR_CHECK_EQ(consumed.size(), round);
      consumed.push_back(peers);
    }
    bool any = !mine.empty();
    for (auto& [from, ids] : peers) {
      any = any || !ids.empty();
      row_resolver_.Add(ids);
      if (round == 0) fired.insert(fired.end(), ids.begin(), ids.end());
    }
    if (!any) break;  // nobody added a txn this round: every node stops here, same set
    mine = row_resolver_.Cascade();
  }
  row_resolver_.Undo(fired, &slot.fates, digest_delta);
  if (opt_.on_row_resolved) {
    // The record names the txns with a part here: the follower's resolver knows no others.
    std::vector<RowTxn> aborted = row_resolver_.AbortedHere();
    std::sort(fired.begin(), fired.end());
    fired.erase(std::unique(fired.begin(), fired.end()), fired.end());
    std::vector<RowTxn> fired_here;
    std::set_intersection(fired.begin(), fired.end(), aborted.begin(), aborted.end(), std::back_inserter(fired_here));
    opt_.on_row_resolved(b, fired_here, aborted);
  }
  return true;
}

bool ExecutorStage::ResolvedByLeader(uint64_t b, BatchSlot& slot, uint64_t* digest_delta) {
  std::pair<std::vector<RowTxn>, std::vector<RowTxn>> result;
  {
    MutexUniqueLock lk(ring_->mu);
    ring_->votes_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) { return ring_->Halted() || resolved_.count(b) != 0; });
    if (ring_->Halted()) return false;
    result = std::move(resolved_[b]);
    resolved_.erase(b);
  }
  const auto& [fired, aborted] = result;
  // The leader ran the same sub-slices from the same state: every vote that fired here fired
  // there, and its aborted set is closed under this node's cascade. Anything else is a
  // divergence; the node must not go on from it.
  std::string diverged;
  for (const RowTxn& t : row_resolver_.FiredHere()) {
    if (!std::binary_search(fired.begin(), fired.end(), t)) {
      diverged = "txn (slice " + std::to_string(t.slice) + ", home index " + std::to_string(t.home) +
                 ")'s abort fired here, not on the leader";
      break;
    }
  }
  row_resolver_.Add(aborted);
  if (diverged.empty()) {
    if (std::vector<RowTxn> more = row_resolver_.Cascade(); !more.empty()) {
      diverged = "this node's cascade aborts " + std::to_string(more.size()) + " more txn(s) than the leader's, (slice " +
                 std::to_string(more[0].slice) + ", home index " + std::to_string(more[0].home) + ") first";
    }
  }
  if (!diverged.empty()) {
    MutexLock lk(ring_->mu);
    if (ring_->health.ok()) {
      ring_->health = Status::Corruption("batch " + std::to_string(b) + ": the leader's abort result disagrees with this "
                                         "node's run: " + diverged);
    }
    ring_->NotifyAllLocked();
    return false;
  }
  row_resolver_.Undo(fired, &slot.fates, digest_delta);
  return true;
}

}  // namespace qrstore::executor

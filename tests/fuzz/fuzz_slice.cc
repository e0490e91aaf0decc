// Fuzz target: a planned slice as a follower receives it (planner/eq.h), decoded, validated and
// run. Contract: DecodeSlice never crashes and rejects with a Status saying why; a decoded slice
// re-encodes to a slice that decodes to the same value; a slice that also passes ValidateSlice
// for the executor count it carries (at most 8 here) runs through a small engine (a Pipeline
// with one executor thread per EQ over a 256-record table) and finishes within 10 s: a hang is a
// failure (the watchdog aborts with the input's size). The input's first byte picks how ranges
// map keys (hash or range), the rest is the slice's bytes.
//
// Structure-aware: LLVMFuzzerCustomMutator decodes the input and mutates the slice itself (a
// key moved into or out of its EQ's range, dependency slots swapped between transactions, a
// fragment's kind, op, transaction or argument changed, fragments moved, duplicated, dropped or
// reordered, a transaction cloned or removed, counts nudged, an EQ added or removed), then
// re-encodes it, so most mutants are well-formed slices that reach ValidateSlice and the
// engine instead of dying in the decoder; one mutation in eight, and inputs that do not decode,
// go to libFuzzer's byte-level mutator. The normal build replays the corpus and also runs
// `--mutants N` structural mutants of each input (tests/fuzz/fuzz_driver.cc).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include "common/check.h"
#include "engine/pipeline.h"
#include "planner/eq.h"
#include "storage/record.h"
#include "storage/table.h"
#include "tests/fuzz/run_slice.h"

using namespace qrstore;

namespace {
constexpr uint64_t kKeys = fuzz::kFuzzKeys;
constexpr size_t kMaxExecutors = 8;

// One structural change to a decoded slice; `range_map` is the mapping its input byte chose.
void MutateOnce(planner::PlannedSlice* s, bool range_map, std::mt19937_64& rng) {
  using planner::Fragment;
  using planner::FragKind;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::vector<std::pair<size_t, size_t>> frags;  // (eq, position) of every fragment
  for (size_t e = 0; e < s->eqs.size(); ++e) {
    for (size_t i = 0; i < s->eqs[e].size(); ++i) frags.emplace_back(e, i);
  }
  auto any_frag = [&]() -> Fragment* {
    if (frags.empty()) return nullptr;
    auto [e, i] = frags[pick(frags.size())];
    return &s->eqs[e][i];
  };
  switch (rng() % 16) {
    case 0:  // a key anywhere (often outside its EQ's range, sometimes outside the table)
      if (Fragment* f = any_frag()) f->key = rng() % (kKeys + kKeys / 8);
      break;
    case 1:  // a key inside its EQ's range: a different record, still a valid slice
      if (!frags.empty() && !s->eqs.empty() && s->eqs.size() <= kMaxExecutors) {
        auto [e, i] = frags[pick(frags.size())];
        const storage::KeyMapper m(range_map ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                   static_cast<uint32_t>(s->eqs.size()), kKeys);
        for (int tries = 0; tries < 32; ++tries) {
          const storage::Key k = rng() % kKeys;
          if (m.Of(k) == e) {
            s->eqs[e][i].key = k;
            break;
          }
        }
      }
      break;
    case 2: {  // two dependency or read slots swapped (crosswise sharing between transactions)
      Fragment* a = any_frag();
      Fragment* b = any_frag();
      if (a != nullptr && b != nullptr) std::swap(a->slot, b->slot);
      break;
    }
    case 3:
      if (Fragment* f = any_frag()) f->kind = static_cast<FragKind>(rng() % (planner::kMaxFragKind + 1));
      break;
    case 4:
      if (Fragment* f = any_frag()) f->op = rng() % 2 == 0 ? f->op + 1 : static_cast<uint32_t>(rng() % 20);
      break;
    case 5:
      if (Fragment* f = any_frag(); f != nullptr && !s->txns.empty()) f->txn = static_cast<uint32_t>(pick(s->txns.size()));
      break;
    case 6:
      if (Fragment* f = any_frag()) f->arg = rng() % 3 == 0 ? rng() : rng() % 2000;
      break;
    case 7:  // a fragment moved to another EQ
      if (!frags.empty()) {
        auto [e, i] = frags[pick(frags.size())];
        const Fragment f = s->eqs[e][i];
        s->eqs[e].erase(s->eqs[e].begin() + static_cast<long>(i));
        auto& to = s->eqs[pick(s->eqs.size())];
        to.insert(to.begin() + static_cast<long>(pick(to.size() + 1)), f);
      }
      break;
    case 8:  // a fragment duplicated in place
      if (!frags.empty()) {
        auto [e, i] = frags[pick(frags.size())];
        s->eqs[e].insert(s->eqs[e].begin() + static_cast<long>(i), s->eqs[e][i]);
      }
      break;
    case 9:  // a fragment dropped
      if (!frags.empty()) {
        auto [e, i] = frags[pick(frags.size())];
        s->eqs[e].erase(s->eqs[e].begin() + static_cast<long>(i));
      }
      break;
    case 10:  // two fragments of one EQ swapped (execution order inside the EQ)
      if (!frags.empty()) {
        auto [e, i] = frags[pick(frags.size())];
        std::swap(s->eqs[e][i], s->eqs[e][pick(s->eqs[e].size())]);
      }
      break;
    case 11:  // a transaction cloned at the end, with its own slots: a valid, longer slice
      if (!s->txns.empty() && s->txns.size() < 512) {
        const size_t from = pick(s->txns.size());
        planner::TxnContext t = s->txns[from];
        const auto idx = static_cast<uint32_t>(s->txns.size());
        t.txn_id = s->txns.back().txn_id + 1;
        t.home_index = s->txns.back().home_index + 1;
        t.dep_begin = s->dep_slots;
        t.read_begin = s->read_slots;
        const planner::TxnContext& old = s->txns[from];
        for (auto& eq : s->eqs) {
          const size_t n = eq.size();
          for (size_t i = 0; i < n; ++i) {
            if (eq[i].txn != from) continue;
            Fragment f = eq[i];
            f.txn = idx;
            if (f.kind == FragKind::kDepRead || f.kind == FragKind::kDepWrite || f.kind == FragKind::kDepRecv) {
              f.slot = f.slot - old.dep_begin + t.dep_begin;
            }
            if (f.kind == FragKind::kRead) f.slot = f.slot - old.read_begin + t.read_begin;
            eq.push_back(f);
          }
        }
        s->dep_slots += t.deps;
        s->read_slots += t.reads;
        s->may_abort = s->may_abort || t.may_abort;
        s->txns.push_back(t);
      }
      break;
    case 12:  // the last transaction removed (its fragments and slots with it)
      if (!s->txns.empty()) {
        const auto last = static_cast<uint32_t>(s->txns.size() - 1);
        for (auto& eq : s->eqs) {
          eq.erase(std::remove_if(eq.begin(), eq.end(), [&](const Fragment& f) { return f.txn == last; }), eq.end());
        }
        s->dep_slots -= std::min(s->dep_slots, s->txns.back().deps);
        s->read_slots -= std::min(s->read_slots, s->txns.back().reads);
        s->txns.pop_back();
      }
      break;
    case 13:  // a count nudged
      if (!s->txns.empty()) {
        planner::TxnContext& t = s->txns[pick(s->txns.size())];
        uint32_t* counts[] = {&t.fragments, &t.write_ops, &t.deps, &t.reads, &s->dep_slots, &s->read_slots};
        uint32_t* c = counts[pick(6)];
        *c = rng() % 2 == 0 ? *c + 1 : (*c > 0 ? *c - 1 : 0);
      }
      break;
    case 14:  // may_abort flipped on the slice or a transaction
      if (!s->txns.empty() && rng() % 2 == 0) {
        planner::TxnContext& t = s->txns[pick(s->txns.size())];
        t.may_abort = !t.may_abort;
      } else if (rng() % 4 == 0) {
        s->row = !s->row;  // a row sub-slice read as a node's slice, or the other way round
      } else {
        s->may_abort = !s->may_abort;
      }
      break;
    default:  // an EQ added (empty) or the last one removed: the executor count changes
      if (rng() % 2 == 0 && s->eqs.size() < kMaxExecutors) {
        s->eqs.emplace_back();
      } else if (s->eqs.size() > 1) {
        s->eqs.pop_back();
      }
      break;
  }
}
}  // namespace

#ifdef QRSTORE_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);
#else
// The normal build's stand-in (fuzz_driver.cc runs structural mutants): one bit of the slice's
// bytes flipped, past the mapping byte and the magic, a different one each call.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) {
  static size_t calls = 0;
  if (size <= 4 || max_size < size) return size;
  const size_t at = 4 + (calls * 7919) % (size - 4);
  data[at] ^= static_cast<uint8_t>(1u << (calls % 8));
  ++calls;
  return size;
}
#endif

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  planner::PlannedSlice s;
  if (size < 1 || rng() % 8 == 0 ||
      !planner::DecodeSlice(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), &s).ok()) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  bool range_map = (data[0] & 1) != 0;
  if (rng() % 16 == 0) range_map = !range_map;
  const int n = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < n; ++i) MutateOnce(&s, range_map, rng);
  const std::string bytes = planner::EncodeSlice(s);
  if (bytes.size() + 1 > max_size) return LLVMFuzzerMutate(data, size, max_size);
  data[0] = static_cast<uint8_t>((data[0] & ~1u) | (range_map ? 1u : 0u));
  std::memcpy(data + 1, bytes.data(), bytes.size());
  return bytes.size() + 1;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool range_map = (data[0] & 1) != 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  planner::PlannedSlice s;
  Status st = planner::DecodeSlice(bytes, &s);
  if (!st.ok()) {
    QR_CHECK(st.code() == StatusCode::kCorruption && !st.message().empty());
    return 0;
  }
  planner::PlannedSlice again;
  QR_CHECK(planner::DecodeSlice(planner::EncodeSlice(s), &again).ok(), "a decoded slice re-encodes to garbage");
  QR_CHECK(again == s, "a decoded slice does not survive a round trip");
  if (s.eqs.size() > kMaxExecutors) return 0;
  const auto n = static_cast<uint32_t>(s.eqs.size());
  const storage::KeyMapper ranges(range_map ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash, n,
                                  kKeys);
  if (!planner::ValidateSlice(s, ranges, s.batch, s.planner).ok()) return 0;
  fuzz::RunSlice(s, ranges, "a validated slice");
  return 0;
}

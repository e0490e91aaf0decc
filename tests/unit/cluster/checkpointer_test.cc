// Checkpointer (cluster/recovery/checkpointer.h) without a pipeline: the test plays the executors (Want,
// copying the image, Taken) and the commit stage (OnCommitted), in both orders, and reads the
// files back with storage/checkpoint.h.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>

#include "cluster/recovery/checkpointer.h"
#include "common/hash.h"
#include "storage/checkpoint.h"
#include "storage/table.h"

using namespace qrstore;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/qrstore-checkpointer-test.XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

void Fill(storage::Table* t, uint64_t keys, int64_t base) {
  std::string rec(t->layout().size(), '\0');
  for (uint64_t k = 0; k < keys; ++k) {
    storage::SetCounter(rec.data(), base + static_cast<int64_t>(k));
    if (t->Find(k) != nullptr) {
      std::memcpy(t->Find(k), rec.data(), rec.size());
    } else {
      REQUIRE(t->Insert(k, rec.data()).ok());
    }
  }
}

// Waits (bounded) until the writer has written `n` checkpoints.
bool WaitWritten(const cluster::Checkpointer& c, uint64_t n) {
  for (int i = 0; i < 500; ++i) {
    if (c.Stats().written >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

struct Fixture {
  TempDir dir;
  storage::Table table{storage::RecordLayout{4, 8}, 100};
  cluster::CheckpointerOptions opt;
  std::string sessions = "the session table's bytes";
  Fixture() {
    Fill(&table, 100, 0);
    opt.dir = dir.path + "/n1";
    opt.every_batches = 10;
    opt.keep = 2;
    opt.base.cluster_id = 7;
    opt.base.record_size = table.layout().size();
    opt.base.capacity = table.capacity();
    opt.base.stream_next.assign(2, 0);
    opt.identity = [] { return std::string("[n1 test]"); };
    opt.copy_on_write = false;  // the tests below copy the image themselves (CopyShare), as paused executors do
  }
  storage::CheckpointExpect Expect() const {
    storage::CheckpointExpect e;
    e.cluster_id = 7;
    e.record_size = table.layout().size();
    e.capacity = table.capacity();
    return e;
  }
  // Reads the newest checkpoint: its batch, digest, table digest and blob.
  void ReadNewest(storage::CheckpointMeta* meta, uint64_t* table_digest, std::string* extra) const {
    std::unique_ptr<storage::Table> t;
    auto path = storage::LoadNewestCheckpoint(
        opt.dir, Expect(), [&] { return std::make_unique<storage::Table>(table.layout(), table.capacity()); }, &t,
        meta, extra, nullptr);
    REQUIRE(path.ok());
    *table_digest = t->Digest();
  }
};

}  // namespace

TEST_CASE("checkpointer: only every Nth batch is a candidate, and an image is taken only while idle", "[checkpoint]") {
  Fixture f;
  cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
  REQUIRE(c.Start().ok());
  CHECK(c.Want(8) == nullptr);  // not a candidate: (8 + 1) % 10 != 0
  storage::TableImage* img = c.Want(9);
  REQUIRE(img != nullptr);
  CHECK(c.Want(19) == nullptr);  // busy with batch 9: skipped, not queued
  CHECK(c.Stats().skipped == 1);
  // Executors copy (one share here), then the commit of 9 comes: the file is written.
  img->CopyShare(f.table, 0, 1);
  c.Taken(9);
  const uint64_t digest9 = f.table.Digest() ^ Mix64(1);
  Fill(&f.table, 100, 1000);  // execution goes on after the copy: not in the checkpoint
  c.OnCommitted(9, digest9);
  REQUIRE(WaitWritten(c, 1));
  storage::CheckpointMeta meta;
  uint64_t td = 0;
  std::string extra;
  f.ReadNewest(&meta, &td, &extra);
  CHECK(meta.batch == 9);
  CHECK(meta.digest == digest9);
  CHECK(meta.stream_next == std::vector<uint64_t>{10, 10});
  CHECK(td == (digest9 ^ Mix64(1)));  // the table as copied at the boundary, not as it is now
  CHECK(extra == f.sessions);
  CHECK(c.Stats().last_batch == 9);
}

// Plays an executor writing the table while an image is armed: key k's counter set to `value`,
// preserved first (Table::BeforeWrite).
void WriteArmed(storage::Table* t, uint64_t k, int64_t value, uint8_t epoch) {
  t->BeforeWrite(k, epoch);
  storage::SetCounter(t->Find(k), value);
}

TEST_CASE("checkpointer: copy-on-write, the writer completes the image beside the table's writers", "[checkpoint]") {
  Fixture f;
  f.opt.copy_on_write = true;
  cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
  CHECK(c.CopyOnWrite());
  REQUIRE(c.Start().ok());
  storage::TableImage* img = c.Want(9);
  REQUIRE(img != nullptr);
  const uint64_t digest9 = f.table.Digest() ^ Mix64(1);
  const uint8_t e9 = img->Begin(f.table, /*stopped=*/false);  // the first executor at the boundary
  c.Taken(9);  // the last one passed it
  // Execution goes on at once: what it overwrites is preserved first, so the file still holds
  // the table at the boundary. (The writer thread copies the rest meanwhile, or after.)
  for (uint64_t k = 0; k < 100; k += 3) WriteArmed(&f.table, k, -7, e9);
  // A write that happens to pass the check after the writer is done costs a load only.
  c.OnCommitted(9, digest9);
  REQUIRE(WaitWritten(c, 1));
  for (uint64_t k = 1; k < 100; k += 3) WriteArmed(&f.table, k, -8, e9);  // disarmed by now: not preserved
  storage::CheckpointMeta meta;
  uint64_t td = 0;
  std::string extra;
  f.ReadNewest(&meta, &td, &extra);
  CHECK(meta.batch == 9);
  CHECK(td == (digest9 ^ Mix64(1)));  // the table as it was at the boundary
  const cluster::CheckpointStats st = c.Stats();
  CHECK(st.last_copy_ms >= st.last_pause_ms);
  CHECK(st.last_preserved <= 34);  // at most the 34 records written while armed
  CHECK(img->preserved() == st.last_preserved);
  // The next one is taken the same way from the table as it is now.
  img = c.Want(19);
  REQUIRE(img != nullptr);
  const uint8_t e19 = img->Begin(f.table, /*stopped=*/false);
  CHECK(e19 != e9);
  // A writer still before this boundary (epoch e9) writes without preserving: its own value at
  // the boundary is yet to come (the test plays it: key 2 is then written in e19 too).
  WriteArmed(&f.table, 2, -10, e9);
  WriteArmed(&f.table, 5, -12, 0);  // likewise a writer of a stage that began after image 9 (epoch 0)
  const uint64_t digest19_final = f.table.Digest() ^ Mix64(1);
  WriteArmed(&f.table, 2, -11, e19);
  c.Taken(19);
  c.OnCommitted(19, digest19_final);
  REQUIRE(WaitWritten(c, 2));
  f.ReadNewest(&meta, &td, &extra);
  CHECK(meta.batch == 19);
  CHECK(td == (digest19_final ^ Mix64(1)));  // key 2 as its old-epoch writer left it, not as the new one did
}

TEST_CASE("checkpointer: an image armed when the checkpointer stops is completed, the table disarmed", "[checkpoint]") {
  Fixture f;
  f.opt.copy_on_write = true;
  storage::TableImage* img = nullptr;
  {
    cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
    REQUIRE(c.Start().ok());
    img = c.Want(9);
    REQUIRE(img != nullptr);
    img->Begin(f.table, /*stopped=*/true);
    c.Stop();      // the writer leaves before Taken comes (no commit either)
    c.Taken(9);    // an executor at the boundary as the server stopped
    CHECK(img->armed());
  }  // the destructor completes it: the table no longer points at the destroyed image
  WriteArmed(&f.table, 5, -9, 1);  // under ASan, a use after free if the table were still armed
  CHECK(storage::GetCounter(f.table.Find(5)) == -9);
}

TEST_CASE("checkpointer: the commit of a batch may come before its image", "[checkpoint]") {
  Fixture f;
  cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
  REQUIRE(c.Start().ok());
  const uint64_t digest = f.table.Digest() ^ Mix64(2);
  c.OnCommitted(19, digest);  // idle: the state of 19 is kept until its image comes
  storage::TableImage* img = c.Want(19);
  REQUIRE(img != nullptr);
  img->CopyShare(f.table, 0, 1);
  c.Taken(19);
  REQUIRE(WaitWritten(c, 1));
  storage::CheckpointMeta meta;
  uint64_t td = 0;
  std::string extra;
  f.ReadNewest(&meta, &td, &extra);
  CHECK(meta.batch == 19);
  CHECK(meta.digest == digest);
  // A commit of another batch never completes an image of this one.
  img = c.Want(29);
  REQUIRE(img != nullptr);
  img->CopyShare(f.table, 0, 1);
  c.Taken(29);
  c.OnCommitted(28, digest);
  c.OnCommitted(39, digest);  // a later candidate while taking 29: ignored
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(c.Stats().written == 1);
  c.OnCommitted(29, digest);
  REQUIRE(WaitWritten(c, 2));
  f.ReadNewest(&meta, &td, &extra);
  CHECK(meta.batch == 29);
}

TEST_CASE("checkpointer: the final checkpoint at a clean stop, only of a committed state", "[checkpoint]") {
  Fixture f;
  {
    cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
    REQUIRE(c.Start().ok());
    c.WriteFinal(f.table, 3);  // nothing committed since start: nothing written
    CHECK(c.Stats().written == 0);
  }
  {
    cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
    REQUIRE(c.Start().ok());
    c.OnCommitted(4, f.table.Digest() ^ Mix64(3));  // not a candidate: only remembered
    c.WriteFinal(f.table, 3);
    CHECK(c.Stats().written == 1);
    storage::CheckpointMeta meta;
    uint64_t td = 0;
    std::string extra;
    f.ReadNewest(&meta, &td, &extra);
    CHECK(meta.batch == 4);
    CHECK(td == f.table.Digest());
  }
  {
    // The table moved on past the last committed batch (executed, never committed): skipped.
    cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
    REQUIRE(c.Start().ok());
    c.OnCommitted(5, f.table.Digest() ^ Mix64(3));
    Fill(&f.table, 100, 5000);
    c.WriteFinal(f.table, 3);
    CHECK(c.Stats().written == 0);
  }
}

TEST_CASE("checkpointer: a directory it cannot create is an error naming it", "[checkpoint]") {
  Fixture f;
  f.opt.dir = "/proc/qrstore-no-such/n1";
  cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
  Status st = c.Start();
  CHECK(!st.ok());
  CHECK(st.message().find("/proc/qrstore-no-such/n1") != std::string::npos);
}

TEST_CASE("checkpointer: a group's members take their checkpoints at their own phase", "[checkpoint]") {
  // Three rows, every 250 batches: rows 1 and 2 a third and two thirds of the interval later.
  CHECK(cluster::CheckpointPhase(250, 0, 3, true) == 0);
  CHECK(cluster::CheckpointPhase(250, 1, 3, true) == 83);
  CHECK(cluster::CheckpointPhase(250, 2, 3, true) == 166);
  CHECK(cluster::CheckpointPhase(250, 2, 3, false) == 0);
  CHECK(cluster::CheckpointPhase(250, 0, 1, true) == 0);   // one member: nothing to spread
  CHECK(cluster::CheckpointPhase(1, 1, 2, true) == 0);     // every batch: every node each time
  CHECK(cluster::CheckpointPhase(2, 1, 3, true) == 0);
  CHECK(cluster::CheckpointPhase(2, 2, 3, true) == 1);
  // Every phase is below the interval, also for intervals whose product with the row overflows.
  const uint64_t huge = std::numeric_limits<uint64_t>::max();
  CHECK(cluster::CheckpointPhase(huge, 2, 3, true) < huge);
  CHECK(cluster::CheckpointPhase(huge, 2, 3, true) > huge / 2);

  Fixture f;
  f.opt.phase = 3;  // candidates: b + 1 = 3, 13, 23, ...
  cluster::Checkpointer c(f.opt, f.table, [&] { return f.sessions; });
  REQUIRE(c.Start().ok());
  CHECK_FALSE(c.Candidate(9));
  CHECK(c.Candidate(2));
  CHECK(c.Candidate(12));
  CHECK(c.Want(9) == nullptr);
  storage::TableImage* img = c.Want(12);
  REQUIRE(img != nullptr);
  img->CopyShare(f.table, 0, 1);
  c.Taken(12);
  c.OnCommitted(12, f.table.Digest() ^ Mix64(1));
  REQUIRE(WaitWritten(c, 1));
  CHECK(c.Stats().last_batch == 12);
  CHECK(std::filesystem::exists(f.opt.dir + "/checkpoint-00000000000000000012.qrc"));
}

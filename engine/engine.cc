#include "engine/engine.h"

#include <string>
#include <vector>

#include "common/logging.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "storage/key_map.h"
#include "workloads/workload.h"

namespace qrstore::engine {

// The single-node engine: a Pipeline fed by a LocalPlanner whose slices need no replication.
class EngineImpl {
 public:
  EngineImpl(const EngineConfig& opt, storage::Table* table, CommitSink sink)
      : opt_(opt), pipeline_(opt.pipeline, table, std::move(sink)), planner_(opt.planner, &pipeline_) {}

  Status Start() EXCLUDES(control_mu_) {
    MutexLock control(control_mu_);
    if (started_) return Status::InvalidArgument("engine: Start called twice");
    if (stopped_) return Status::Aborted("engine: Start after Stop");
    started_ = true;
    Logger("engine")->info("starting: {} planner(s), {} executor(s), {} committer(s), batch {} txns / {} ms, sync={}",
                           opt_.planner.planners, opt_.pipeline.executors, opt_.pipeline.committers,
                           opt_.planner.batch_txns, opt_.planner.batch_timeout_ns / 1'000'000,
                           opt_.pipeline.batches_in_flight == 1 ? "node" : "thread");
    // Downstream first, so every stage finds its consumer running.
    QR_RETURN_IF_ERROR(pipeline_.Start());
    return planner_.Start();
  }

  bool Submit(storage::Txn txn) { return planner_.Submit(std::move(txn)); }
  size_t SubmitMany(std::vector<storage::Txn>& txns) {
    const size_t n = planner_.SubmitMany(txns);
    planner_.LendSpareOps(txns, 0, n);
    return n;
  }

  void Finish() EXCLUDES(control_mu_) {
    planner_.CloseInput();
    {
      MutexLock control(control_mu_);
      if (!started_) return;
    }
    (void)pipeline_.WaitIdle();  // OK, or stopped: either way nothing more will come
  }

  void Stop() EXCLUDES(control_mu_) {
    MutexLock control(control_mu_);
    stopped_ = true;
    // The pipeline first: planners waiting for a batch slot are released by it.
    pipeline_.Stop();
    planner_.Stop();
  }

  EngineStats Stats() const {
    const PipelineStats p = pipeline_.Stats();
    EngineStats s;
    s.batches = p.committed_batches;
    s.batches_closed_by_timeout = planner_.batches_closed_by_timeout();
    s.committed = p.committed;
    s.aborted = p.aborted;
    s.reexecuted = p.reexecuted;
    if (s.batches > 0) {
      const double n = static_cast<double>(s.batches);
      s.mean_cut_ms = static_cast<double>(p.phase_sums.cut_ns) / 1e6 / n;
      s.mean_plan_ms = static_cast<double>(p.phase_sums.plan_ns) / 1e6 / n;
      s.mean_exec_ms = static_cast<double>(p.phase_sums.exec_ns) / 1e6 / n;
      s.mean_commit_ms = static_cast<double>(p.phase_sums.commit_ns) / 1e6 / n;
    }
    return s;
  }

 private:
  const EngineConfig opt_;
  Pipeline pipeline_;
  LocalPlanner planner_;
  Mutex control_mu_;  // serializes Start, Finish's check and Stop
  bool started_ GUARDED_BY(control_mu_) = false;
  bool stopped_ GUARDED_BY(control_mu_) = false;
};

// ---------------------------------------------------------------------------------------------


Result<std::unique_ptr<Engine>> Engine::Create(const Config& config, storage::Table* table, CommitSink sink) {
  std::vector<std::string> errors;
  if (table == nullptr) errors.push_back("engine: table is null");
  if (!sink) errors.push_back("engine: commit sink is empty");
  auto opt_or = OptionsFromConfig(config);
  if (!opt_or.ok()) errors.push_back(opt_or.status().message());
  if (!errors.empty()) {
    std::string msg = "invalid engine config:";
    for (const auto& e : errors) msg += "\n  " + e;
    return Status::InvalidArgument(msg);
  }
  return std::unique_ptr<Engine>(new Engine(std::make_unique<EngineImpl>(opt_or.value(), table, std::move(sink))));
}

Result<EngineConfig> Engine::OptionsFromConfig(const Config& config) {
  std::vector<std::string> errors;
  struct {
    uint32_t batch_txns, planners, executors, committers, client_queue_txns, batches_in_flight;
    int64_t batch_timeout_ns;
    bool node_sync;
  } opt;
  opt.batch_txns = static_cast<uint32_t>(config.GetInt("batch.txns"));
  opt.batch_timeout_ns = config.GetInt("batch.timeout_ms") * 1'000'000;
  opt.planners = static_cast<uint32_t>(config.GetInt("threads.planners"));
  opt.executors = static_cast<uint32_t>(config.GetInt("threads.executors"));
  opt.committers = static_cast<uint32_t>(config.GetInt("threads.committers"));
  opt.node_sync = config.GetString("engine.sync") == "node";
  opt.client_queue_txns = static_cast<uint32_t>(config.GetInt("engine.client_queue_txns"));
  opt.batches_in_flight = static_cast<uint32_t>(config.GetInt("engine.batches_in_flight"));
  const bool range_fn = config.GetString("engine.range_function") == "range";
  // Only range ranges cut a key space (the workload's keys unless given); hash ignores it.
  const auto key_space = range_fn ? static_cast<int64_t>(workloads::EngineKeySpace(config)) : int64_t{1} << 62;
  if (opt.planners > opt.batch_txns) {
    errors.push_back("threads.planners (" + std::to_string(opt.planners) + ") must be <= batch.txns (" +
                     std::to_string(opt.batch_txns) + "): every planner's slice needs room for a txn");
  }
  if (range_fn && key_space < static_cast<int64_t>(opt.executors)) {
    errors.push_back("engine.key_space (" + std::to_string(key_space) + (config.GetInt("engine.key_space") > 0 ? "" : ", the workload's key count") +
                     ") must be >= threads.executors (" + std::to_string(opt.executors) +
                     ") when engine.range_function=range");
  }
  QR_CHECK(opt.batches_in_flight >= 2, "engine.batches_in_flight below its schema range");
  if (!errors.empty()) {
    std::string msg;
    for (const auto& e : errors) msg += (msg.empty() ? "" : "\n  ") + e;
    return Status::InvalidArgument(msg);
  }
  EngineConfig out;
  const storage::KeyMapper ranges(range_fn ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                  opt.executors, static_cast<uint64_t>(key_space));
  out.pipeline.planners = opt.planners;
  out.pipeline.executors = opt.executors;
  out.pipeline.committers = opt.committers;
  out.pipeline.batches_in_flight = opt.node_sync ? 1 : opt.batches_in_flight;
  out.pipeline.ranges = ranges;
  // A read returns its record (YCSB): the sink gets the values read.
  out.pipeline.capture_reads = true;
  out.planner.batch_txns = opt.batch_txns;
  out.planner.batch_timeout_ns = opt.batch_timeout_ns;
  out.planner.planners = opt.planners;
  out.planner.client_queue_txns = opt.client_queue_txns;
  out.planner.recycle_ops = true;  // SubmitMany lends them back
  out.planner.ranges = ranges;
  return out;
}

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() { Stop(); }
Status Engine::Start() { return impl_->Start(); }
bool Engine::Submit(storage::Txn txn) { return impl_->Submit(std::move(txn)); }
size_t Engine::SubmitMany(std::vector<storage::Txn>& txns) { return impl_->SubmitMany(txns); }
void Engine::Finish() { impl_->Finish(); }
void Engine::Stop() { impl_->Stop(); }
EngineStats Engine::Stats() const { return impl_->Stats(); }

}  // namespace qrstore::engine

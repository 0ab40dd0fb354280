// arraybridge-soak: a long run of the workload (workload.hpp) on many threads,
// asking whether anything grows. Every --sample-every transfers the threads
// pause between steps and it samples the process (resident memory, open
// descriptors, threads) and the runtime (pinned pool, CUDA device cache). After
// the warm-up (the first 20% of the transfers) each figure's least-squares slope
// per 10^5 transfers must stay under its threshold (see kFigures); the report
// (text on stdout, JSON with --json) gives the throughput, the samples and the
// slopes, and the exit status is 0 only when every figure is flat and every
// value came back right. CUDA is whatever ARRAYBRIDGE_CUDA_LIBRARY names (the
// fake driver under `make soak`, the real one on a GPU machine).
#include <arraybridge/arraybridge.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/machine.hpp"
#include "tests/soak/samples.hpp"
#include "tests/soak/workload.hpp"

namespace {

struct Options {
  uint64_t transfers = 1000000;
  int threads = 8;
  uint64_t sample_every = 100000;
  std::string json, commit;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "arraybridge-soak: %s\nusage: arraybridge-soak [--transfers N] [--threads T] [--sample-every K] "
               "[--json FILE] [--commit TEXT]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(("no value after " + flag).c_str());
    const char* value = argv[++i];
    char* end = nullptr;
    const unsigned long long number = std::strtoull(value, &end, 10);
    const bool numeric = end != value && *end == '\0' && number > 0;
    if (flag == "--transfers" && numeric)
      o.transfers = number;
    else if (flag == "--threads" && numeric && number <= 256)
      o.threads = static_cast<int>(number);
    else if (flag == "--sample-every" && numeric)
      o.sample_every = number;
    else if (flag == "--json")
      o.json = value;
    else if (flag == "--commit")
      o.commit = value;
    else
      usage(("bad option or value: " + flag + " " + value).c_str());
  }
  if (o.sample_every > o.transfers) usage("--sample-every is larger than --transfers");
  return o;
}

// Workers run steps until `target` transfers are done; the sampler pauses them
// between steps (every worker parked, none mid-transfer) to take a sample.
class Run {
 public:
  Run(const soak::Workload& work, const Options& options) : work_(work), options_(options) {}

  void go(soak::Samples& samples) {
    const auto start = std::chrono::steady_clock::now();
    samples.add(0, 0.0, work_.rt);
    running_ = options_.threads;  // before any starts: none has stopped yet
    std::vector<std::thread> workers;
    for (int t = 0; t < options_.threads; ++t) workers.emplace_back([this, t] { work(t); });
    uint64_t next = options_.sample_every;
    while (next <= options_.transfers) {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return done_ >= next || running_ == 0; });
      if (done_ < next) break;  // every worker has stopped (an error)
      pause_ = true;
      changed_.wait(lock, [&] { return parked_ == running_; });
      settle(work_.rt);
      samples.add(done_, seconds_since(start), work_.rt);
      while (next <= done_) next += options_.sample_every;
      pause_ = false;
      changed_.notify_all();
    }
    for (std::thread& w : workers) w.join();
    seconds_ = seconds_since(start);
  }
  uint64_t transfers() const { return done_; }
  double seconds() const { return seconds_; }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  // Streams let go (abr_stream_release) are destroyed on the runtime's next call
  // once their work is done: one call of nothing, so the counts are exact.
  static void settle(abr_runtime* rt) {
    float one = 1, other = 0;
    int64_t shape = 1;
    const DLTensor from{&one, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &shape, nullptr, 0};
    const DLTensor to{&other, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &shape, nullptr, 0};
    abr_copy(rt, &from, &to, nullptr, nullptr);
  }

  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void work(int thread) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (uint64_t n = static_cast<uint64_t>(thread);; ++n) {
      if (pause_) {
        ++parked_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return !pause_; });
        --parked_;
      }
      if (done_ >= options_.transfers || !errors_.empty()) break;
      lock.unlock();
      const soak::StepResult step = soak::run_step(work_, thread, n);
      lock.lock();
      done_ += step.transfers;
      if (!step.error.empty()) errors_.push_back(step.error);
      changed_.notify_all();
    }
    --running_;
    changed_.notify_all();
  }

  const soak::Workload& work_;
  const Options& options_;
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t done_ = 0;
  int running_ = 0, parked_ = 0;
  bool pause_ = false;
  std::vector<std::string> errors_;
  double seconds_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  abr_runtime* rt = nullptr;
  if (abr_runtime_create(nullptr, &rt) != ABR_OK) {
    std::fprintf(stderr, "arraybridge-soak: no runtime: %s\n", abr_last_error());
    return 1;
  }
  soak::Machine machine;
  machine.cpu = bench::cpu_model();
  machine.cores = static_cast<int>(std::thread::hardware_concurrency());
  machine.commit = !options.commit.empty() ? options.commit : bench::checkout_commit();
  soak::Workload work;
  work.rt = rt;
  int32_t count = 0;
  abr_device_count(rt, &count);
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    if (abr_device_info(rt, i, &info) != ABR_OK) continue;
    char name[ABR_NAME_MAX];
    abr_device_format(info.device, name, sizeof name);
    machine.devices.push_back(std::string(name) + " (" + info.name + ", " + info.platform + ")");
    // The CPU, and the first CUDA and OpenCL device: every path, without repeating one.
    const DLDeviceType type = info.device.device_type;
    bool seen = type != kDLCPU && type != kDLCUDA && type != kDLOpenCL;
    for (const DLDevice& d : work.devices) seen = seen || d.device_type == type;
    if (!seen) work.devices.push_back(info.device);
  }
  for (const abr_backend backend : {ABR_BACKEND_CUDA, ABR_BACKEND_OPENCL}) {
    struct abr_backend_info info = ABR_BACKEND_INFO_INIT;
    abr_backend_info(rt, backend, &info);
    if (!info.available)
      machine.missing.push_back(std::string(backend == ABR_BACKEND_CUDA ? "cuda" : "opencl") + ": " + info.detail);
  }

  soak::Samples samples;
  Run run(work, options);
  run.go(samples);
  const soak::Verdict verdict = samples.judge(run.transfers());
  soak::Summary summary{
      options.transfers, options.threads, options.sample_every, run.transfers(), run.seconds(), run.errors(), {}};
  for (int k = 0; k < soak::kinds(); ++k) summary.kinds.push_back(soak::kind_name(k));
  std::fputs(soak::text_report(machine, summary, samples, verdict).c_str(), stdout);
  if (!options.json.empty()) {
    std::ofstream out(options.json);
    out << soak::json_report(machine, summary, samples, verdict);
    if (!out) std::fprintf(stderr, "arraybridge-soak: cannot write %s\n", options.json.c_str());
  }
  abr_runtime_destroy(rt);
  return verdict.flat && run.errors().empty() && run.transfers() >= options.transfers ? 0 : 1;
}

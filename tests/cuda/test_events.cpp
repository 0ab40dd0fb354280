// Events and streams let go of without waiting (abr_event_*, abr_stream_release)
// against the fake driver's lagging streams: a result read before its event is
// wrong there, as on a GPU, and a stream that reads before a wait is a race the
// fake reports.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/cuda/cuda_helpers.hpp"

using namespace test;

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA events: a D2H on a lagging stream is right after its event, not before") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  const std::size_t n = 1 << 16;
  std::vector<int32_t> data = iota(n, 77);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned device(move_to(rt, &source.managed, cuda0));
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  {
    Lag lag(50000);
    Owned host(copy_to(rt, take(device), cuda_host, stream));  // pinned: one DMA queued behind the lag
    abr_event* done = nullptr;
    REQUIRE(abr_event_record(stream, &done) == ABR_OK);
    if (lag.fake) {
      CHECK(abr_event_query(done) == ABR_NOT_READY);
#if !defined(__SANITIZE_THREAD__)  // the early read races the fake's copy on purpose: TSan would say so
      CHECK(std::memcmp(host->data, data.data(), n * 4) != 0);  // read without the wait: not there yet
#endif
    }
    REQUIRE(abr_event_synchronize(done) == ABR_OK);
    CHECK(abr_event_query(done) == ABR_OK);
    CHECK(std::memcmp(host->data, data.data(), n * 4) == 0);
    abr_event_destroy(done);
  }
  abr_stream_destroy(stream);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA abr_stream_wait_event orders a second stream on the device; without it the read is early") {
  Runtime rt;
  if (!cuda_devices(rt)) return;
  Fake fake;
  const std::size_t n = 1 << 14;
  std::vector<int32_t> data = iota(n, -5);
  Managed source(data.data(), i32, {static_cast<int64_t>(n)});
  Owned device(move_to(rt, &source.managed, cuda0));
  abr_stream *producer = nullptr, *consumer = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &producer) == ABR_OK);
  REQUIRE(abr_stream_create(rt, cuda0, &consumer) == ABR_OK);
  // Without the wait first, while no block in the device cache holds these values yet.
  for (const bool wait : {false, true}) {
#if defined(__SANITIZE_THREAD__)
    if (!wait) continue;  // the early read races the fake's copy on purpose: TSan would say so
#endif
    if (!wait && !fake) continue;  // only the fake lags one stream and not the other
    CAPTURE(wait);
    std::vector<int32_t> seen(n, 0);
    if (fake) fake.control("delay_us", 100000);  // the producer's copy starts 100 ms late
    Managed view(device->data, i32, {static_cast<int64_t>(n)}, {}, 0, cuda0);
    Owned copy(copy_to(rt, &view.managed, cuda0, producer));
    abr_event* written = nullptr;
    REQUIRE(abr_event_record(producer, &written) == ABR_OK);
    if (fake) {  // once the producer's worker has taken the copy (its 100 ms hold), the consumer's work does not lag
      REQUIRE(wait_until([&] { return fake.stat("delayed_ops") > 0; }));
      fake.control("delay_us", 0);
    }
    if (wait) {
      REQUIRE(abr_stream_wait_event(consumer, written) == ABR_OK);
      if (fake) CHECK(abr_event_query(written) == ABR_NOT_READY);  // the host did not wait
    }
    Managed into(seen.data(), i32, {static_cast<int64_t>(n)});
    REQUIRE(abr_copy(rt, &*copy, &into.tensor(), nullptr, consumer) == ABR_OK);
    REQUIRE(abr_stream_synchronize(consumer) == ABR_OK);
    if (wait)
      CHECK(seen == data);
    else
      CHECK(seen != data);  // read before the copy landed: what a missing wait costs
    REQUIRE(abr_event_synchronize(written) == ABR_OK);
    abr_event_destroy(written);
    REQUIRE(abr_stream_synchronize(producer) == ABR_OK);  // lets go of `view` while it lives
    CHECK(view.deleted == 1);
  }
  abr_stream_destroy(consumer);
  abr_stream_destroy(producer);
}

TEST_CASE_FIXTURE(NoDriverFindings,
                  "CUDA abr_stream_release: returns at once; the source lives until its work is done, then goes") {
  Fake fake;
  for (const bool wrapped : {false, true}) {
    CAPTURE(wrapped);
    abr_runtime* rt = nullptr;
    REQUIRE(abr_runtime_create(nullptr, &rt) == ABR_OK);
    if (!cuda_devices(rt)) {
      abr_runtime_destroy(rt);
      return;
    }
    const std::size_t n = 1 << 14;
    std::vector<int32_t> data = iota(n, 1000);
    Managed host(data.data(), i32, {static_cast<int64_t>(n)});
    Owned device(move_to(rt, &host.managed, cuda0));
    Managed source(device->data, i32, {static_cast<int64_t>(n)}, {}, 0, cuda0);  // counts its deleter
    CUstream native = nullptr;
    std::unique_ptr<RawDriver> raw;
    abr_stream* stream = nullptr;
    if (wrapped) {
      raw = std::make_unique<RawDriver>();
      native = raw->stream();
      REQUIRE(abr_stream_wrap(rt, cuda0, native, &stream) == ABR_OK);
    } else {
      REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
    }
    abr_event* done = nullptr;
    DLManagedTensorVersioned* copy = nullptr;
    {
      Lag lag(50000);
      copy = copy_to(rt, &source.managed, cuda0, stream);
      REQUIRE(abr_event_record(stream, &done) == ABR_OK);
      abr_stream_release(stream);  // the copy still lags: release cannot have waited for it
      if (fake) {
        CHECK(abr_event_query(done) == ABR_NOT_READY);
        CHECK(source.deleted == 0);
      }
      REQUIRE(abr_event_synchronize(done) == ABR_OK);
      CHECK(source.deleted == 1);  // the wait released what the work kept, not the runtime's next call
    }
    Owned result(copy);
    CHECK(read_back(rt, *result) == data);
    CHECK(source.deleted == 1);
    abr_event_destroy(done);
    if (raw) raw->stream_destroy(native);
    result.reset();
    device.reset();
    abr_runtime_destroy(rt);
  }
}

TEST_CASE_FIXTURE(NoDriverFindings, "CUDA abr_runtime_destroy waits for what released streams still run") {
  Fake fake;
  abr_runtime* rt = nullptr;
  REQUIRE(abr_runtime_create(nullptr, &rt) == ABR_OK);
  if (!cuda_devices(rt)) {
    abr_runtime_destroy(rt);
    return;
  }
  const std::size_t n = 1 << 14;
  std::vector<int32_t> data = iota(n, 3);
  Managed host(data.data(), i32, {static_cast<int64_t>(n)});
  Owned device(move_to(rt, &host.managed, cuda0));
  Managed source(device->data, i32, {static_cast<int64_t>(n)}, {}, 0, cuda0);
  abr_stream* stream = nullptr;
  REQUIRE(abr_stream_create(rt, cuda0, &stream) == ABR_OK);
  Lag lag(30000);
  Owned copy(copy_to(rt, &source.managed, cuda0, stream));
  abr_stream_release(stream);
  if (fake) CHECK(source.deleted == 0);
  abr_runtime_destroy(rt);  // waits for the copy, then releases its source
  CHECK(source.deleted == 1);
  copy.reset();
  device.reset();
}

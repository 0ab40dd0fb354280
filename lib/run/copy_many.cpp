// abr_copy_many: many caller-given pairs in one call, each moved as abr_copy would,
// in order.
#include <string>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/base/text.hpp"
#include "lib/run/batch_items.hpp"

namespace abr {

// abr_copy_many: every pair validated and planned before anything moves. Pageable
// pairs to or from one device context that no other pair's order matters to are
// streamed through one pipeline first (plan_copy_batch); then the rest in order.
// Consecutive moves on one device context share one submission, finished when the
// next pair is elsewhere (another context, the host engine, the pipeline, a peer
// copy) and at the end; before a host-side step the caller's stream is waited for
// too, so every pair sees the ones before it.
void Runtime::copy_many(const DLTensor* const* srcs, const DLTensor* const* dsts, std::size_t count,
                        const abr_transfer_options* options, Stream* stream, abr_batch_report& report) {
  collect_releases();
  check_batch_count(count, "pairs");
  TransferOptions opts = resolve_options(options);
  opts.report = nullptr;
  opts.describe = false;
  opts.staging = staging_choice();
  struct Pair : BatchEntry {
    Layout src, dst;
  };
  std::vector<Pair> pairs(count);
  CheckedAllocations checked;
  bool by_address = true;  // every pair's memory known by its address: the order check can see overlaps
  for (std::size_t i = 0; i < count; ++i) {
    try {
      if (!srcs[i] || !dsts[i])
        fail(ABR_ERR_INVALID_ARGUMENT, "{} is NULL", srcs[i] ? "the destination" : "the source");
      Pair& pair = pairs[i];
      pair.src = validate_tensor(*srcs[i], Role::Source, "source");
      pair.dst = validate_tensor(*dsts[i], Role::Destination, "destination");
      const Endpoint* known_src = checked.covering(pair.src);
      const Endpoint from = known_src ? *known_src : endpoint_of(pair.src, pair.dst.device, "source");
      if (!known_src) checked.add(from);
      const Endpoint* known_dst = checked.covering(pair.dst);
      const Endpoint to = known_dst ? *known_dst : endpoint_of(pair.dst, pair.src.device, "destination");
      if (!known_dst) checked.add(to);
      pair.plan = plan_copy(pair.src, from, pair.dst, to, opts);
      check_stream(stream, pair.src.device, pair.dst.device);
      pair.bytes = pair.src.numel * pair.dst.itemsize;
      by_address = by_address && is_direct_address(pair.src.device.device_type) &&
          is_direct_address(pair.dst.device.device_type);
    } catch (const Error& e) {
      throw Error(e.status(), fmt::format("pair {}: {}", i, e.what()), e.backend_code());
    }
  }

  std::vector<BatchEntry*> entries(count);
  std::vector<CopySpans> spans;  // none: nothing streams
  if (by_address) spans.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    entries[i] = &pairs[i];
    if (by_address) spans.push_back({bytes_of(pairs[i].src), bytes_of(pairs[i].dst)});
  }
  std::vector<StreamedPipeline> streamed = plan_copy_batch(entries, spans, opts.staging);

  std::vector<OrderedMove> moves;
  std::vector<std::vector<OrderedMove>> pipelines(streamed.size());
  std::vector<std::size_t> pair_of;  // each ordered move's pair
  moves.reserve(count);
  uint64_t moved = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const Pair& pair = pairs[i];
    moved += pair.bytes;
    // Never gathered: a later pair may read or write a destination, which must hold
    // its bytes by then (a gathered read lands only at the submission's end).
    const OrderedMove move{&pair.plan, &pair.src, &pair.dst, /*gather=*/false, /*allocation=*/0, false, false};
    if (pair.streamed) {
      pipelines[pair.pipeline].push_back(move);
      continue;
    }
    moves.push_back(move);
    pair_of.push_back(i);
  }
  const std::size_t one_by_one = move_pipelines(pipelines, streamed, "pair {}", stream);
  std::size_t at = 0;
  uint32_t submissions = 0, joined = 0;  // no pair is gathered, so none joins another's read
  try {
    submissions = move_in_order(moves, stream, at, joined);
  } catch (const Error& e) {
    if (at == moves.size()) throw;  // the last submission's wait: no one pair
    throw Error(e.status(), fmt::format("pair {}: {}", pair_of[at], e.what()), e.backend_code());
  }
  report.tensors = static_cast<uint32_t>(count);
  report.copies = static_cast<uint32_t>(count);
  report.bytes_moved = moved;
  fit_text(report.detail, sizeof report.detail,
           fmt::format("{} copies; the device moves in {} submission(s){}", count, submissions,
                       streamed_words(streamed, one_by_one)));
  // Last: a call that fails (the words above may throw) leaves them as they were.
  if (report.paths)
    for (std::size_t i = 0; i < count; ++i) report.paths[i] = pairs[i].plan.path;
  if (report.result_flags)
    for (std::size_t i = 0; i < count; ++i) report.result_flags[i] = pairs[i].plan.report_flags();
}

}  // namespace abr

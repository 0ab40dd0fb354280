// views_share_bytes against every byte each view touches, and the copies it spares a
// temporary: interleaved views (x[0::2] and x[1::2]) share no byte, though their
// bounding boxes meet.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "lib/tensor/layout.hpp"
#include "lib/tensor/shared_bytes.hpp"
#include "tests/support/helpers.hpp"

using namespace test;

namespace {

abr::Layout layout_of(std::vector<int64_t>& shape, std::vector<int64_t>& strides, DLDataType dtype,
                      uint64_t byte_offset) {
  DLTensor t{reinterpret_cast<void*>(uintptr_t{1} << 20),
             cpu,
             static_cast<int32_t>(shape.size()),
             dtype,
             shape.data(),
             strides.data(),
             byte_offset};
  return abr::validate_tensor(t, abr::Role::Source, "view");
}

std::set<int64_t> bytes_of(const abr::Layout& view) {
  std::set<int64_t> bytes;
  std::vector<int64_t> index(view.ndim(), 0);
  for (uint64_t n = 0; n < view.numel; ++n) {
    int64_t at = static_cast<int64_t>(view.byte_offset);
    for (int k = 0; k < view.ndim(); ++k) at += index[k] * view.strides[k] * static_cast<int64_t>(view.itemsize);
    for (std::size_t b = 0; b < view.itemsize; ++b) bytes.insert(at + static_cast<int64_t>(b));
    for (int k = view.ndim() - 1; k >= 0 && ++index[k] == view.shape[k]; --k) index[k] = 0;
  }
  return bytes;
}

// Small random layouts: a fixed sequence (a failure repeats), steps of both signs.
struct RandomLayouts {
  uint64_t state;
  int64_t operator()(int64_t below) {  // in [0, below)
    state = state * 6364136223846793005u + 1442695040888963407u;
    return static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(below));
  }
  DLDataType dtype() {
    const DLDataType dtypes[] = {u8, dt(kDLInt, 16), i32, f64};
    return dtypes[(*this)(4)];
  }
};

}  // namespace

TEST_CASE("views_share_bytes answers as every byte of both views does") {
  RandomLayouts next{12345};
  int shared = 0, apart = 0, apart_boxes_meeting = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<int64_t> shape[2], strides[2];
    abr::Layout views[2];
    for (int v = 0; v < 2; ++v) {
      const int ndim = 1 + static_cast<int>(next(3));
      for (int k = 0; k < ndim; ++k) {
        shape[v].push_back(1 + next(5));
        strides[v].push_back(next(25) - 12);
      }
      const DLDataType dtype = next.dtype();
      views[v] = layout_of(shape[v], strides[v], dtype, static_cast<uint64_t>(200 + next(64)));
    }
    const std::set<int64_t> a = bytes_of(views[0]), b = bytes_of(views[1]);
    bool truth = false;
    for (int64_t byte : a) truth = truth || b.count(byte);
    const bool boxes_meet = *a.begin() <= *b.rbegin() && *b.begin() <= *a.rbegin();
    INFO("round " << round);
    CHECK(abr::views_share_bytes(views[0], 0, views[1], 0) == truth);
    (truth ? shared : apart) += 1;
    apart_boxes_meeting += !truth && boxes_meet;
  }
  MESSAGE(shared << " pairs share bytes, " << apart << " do not (" << apart_boxes_meeting << " of them boxes meeting)");
  CHECK(apart_boxes_meeting > 1000);  // the cases a bounding box gets wrong are well covered
}

// Equal steps searched value by value gave up past 8K elements (a temporary for every
// large x[0::2] = x[1::2]) after about 25 us of search; merged, they answer at once.
TEST_CASE("views_share_bytes tells large interleaved views apart") {
  std::vector<int64_t> half{1 << 20}, every_other{2};
  abr::Layout even = layout_of(half, every_other, f32, 0), odd = layout_of(half, every_other, f32, 4);
  CHECK_FALSE(abr::views_share_bytes(even, 0, odd, 0));
  CHECK(abr::views_share_bytes(even, 0, odd, 4));  // odd moved by one element: it meets even
  std::vector<int64_t> halves{4096, 2048}, rows{4096, 1};
  abr::Layout left = layout_of(halves, rows, f32, 0), right = layout_of(halves, rows, f32, 2048 * 4);
  abr::Layout shifted = layout_of(halves, rows, f32, 2047 * 4);  // one column to the left: they meet
  CHECK_FALSE(abr::views_share_bytes(left, 0, right, 0));
  CHECK(abr::views_share_bytes(left, 0, shifted, 0));
}

TEST_CASE("abr_copy between interleaved views of one array needs no temporary, and copies them right") {
  Runtime rt;
  std::vector<float> data(64);
  for (int i = 0; i < 64; ++i) data[i] = static_cast<float>(i);
  // x[0::2] = x[1::2]
  std::vector<int64_t> half{32}, every_other{2};
  DLTensor odd{data.data(), cpu, 1, f32, half.data(), every_other.data(), 4};
  DLTensor even{data.data(), cpu, 1, f32, half.data(), every_other.data(), 0};
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  options.report = &report;
  REQUIRE(abr_copy(rt, &odd, &even, &options, nullptr) == ABR_OK);
  CHECK(std::string(report.detail).find("temporary") == std::string::npos);
  for (int i = 0; i < 64; ++i) CHECK(data[i] == static_cast<float>(i % 2 ? i : i + 1));
  // The left half of an 8 x 8 matrix into its right half.
  std::vector<int64_t> shape{8, 4}, rows{8, 1};
  DLTensor left{data.data(), cpu, 2, f32, shape.data(), rows.data(), 0};
  DLTensor right{data.data(), cpu, 2, f32, shape.data(), rows.data(), 16};
  REQUIRE(abr_copy(rt, &left, &right, &options, nullptr) == ABR_OK);
  CHECK(std::string(report.detail).find("temporary") == std::string::npos);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 4; ++c) CHECK(data[r * 8 + 4 + c] == data[r * 8 + c]);
  // Shifted by one element they do meet: through the temporary.
  DLTensor shifted{data.data(), cpu, 2, f32, shape.data(), rows.data(), 4};
  REQUIRE(abr_copy(rt, &left, &shifted, &options, nullptr) == ABR_OK);
  CHECK(std::string(report.detail).find("temporary") != std::string::npos);
}

// A destination's strides: the quick rule (each stride past the smaller ones' span)
// refused interleaved layouts whose elements are apart; the search tells them apart.
TEST_CASE("elements_share_bytes answers as every element of the view does") {
  RandomLayouts next{777};
  int share = 0, apart = 0, interleaved_apart = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<int64_t> shape, strides;
    const int ndim = 1 + static_cast<int>(next(4));
    for (int k = 0; k < ndim; ++k) {
      shape.push_back(1 + next(5));
      strides.push_back(next(25) - 12);
    }
    const abr::Layout view = layout_of(shape, strides, next.dtype(), 4096);
    std::set<int64_t> starts;  // strides are whole elements: two elements meet only where they start together
    std::vector<int64_t> index(view.ndim(), 0);
    for (uint64_t n = 0; n < view.numel; ++n) {
      int64_t at = 0;
      for (int k = 0; k < view.ndim(); ++k) at += index[k] * view.strides[k];
      starts.insert(at);
      for (int k = view.ndim() - 1; k >= 0 && ++index[k] == view.shape[k]; --k) index[k] = 0;
    }
    const bool truth = starts.size() < view.numel;
    INFO("round " << round << ": shape " << abr::shape_string(view.shape) << " strides "
                  << abr::shape_string(view.strides));
    CHECK(abr::elements_share_bytes(view) == (truth ? abr::Sharing::Share : abr::Sharing::Apart));
    (truth ? share : apart) += 1;
    std::vector<std::pair<int64_t, int64_t>> steps;  // the quick rule's view: |stride|, extent
    for (int k = 0; k < view.ndim(); ++k)
      if (view.shape[k] > 1) steps.emplace_back(std::abs(view.strides[k]), view.shape[k]);
    std::sort(steps.begin(), steps.end());
    int64_t span = 0;
    bool ordered = true;
    for (const auto& [stride, extent] : steps) {
      ordered = ordered && stride > span;
      span += stride * (extent - 1);
    }
    interleaved_apart += !truth && !ordered;
  }
  MESSAGE(share << " views give two elements one place, " << apart << " do not (" << interleaved_apart
                << " of them past the quick rule)");
  CHECK(interleaved_apart > 1000);
}

TEST_CASE("elements_share_bytes answers a layout and its transpose alike") {
  std::vector<int64_t> long_first{5000, 2}, small_step_first{2, 10001}, wide{2, 5000}, transposed{10001, 2};
  CHECK(abr::elements_share_bytes(layout_of(long_first, small_step_first, f32, 0)) == abr::Sharing::Apart);
  CHECK(abr::elements_share_bytes(layout_of(wide, transposed, f32, 0)) == abr::Sharing::Apart);
}

TEST_CASE("abr_copy into an interleaved destination whose elements are apart") {
  Runtime rt;
  // NumPy's as_strided(b, (3, 2), (8, 12)) of float32: offsets 0, 3, 2, 5, 4, 7.
  float values[6] = {1, 2, 3, 4, 5, 6}, b[8] = {};
  int64_t shape[2] = {3, 2}, interleaved[2] = {2, 3}, aliasing[2] = {1, 1};
  DLTensor src{values, cpu, 2, f32, shape, nullptr, 0}, dst{b, cpu, 2, f32, shape, interleaved, 0};
  REQUIRE(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_OK);
  const float expected[8] = {1, 0, 3, 2, 5, 4, 0, 6};
  for (int i = 0; i < 8; ++i) CHECK(b[i] == expected[i]);
  dst.strides = aliasing;
  CHECK(abr_copy(rt, &src, &dst, nullptr, nullptr) == ABR_ERR_DLPACK_STRIDES);
  CHECK(error_mentions("strides [1, 1] over shape [3, 2] give two elements the same memory"));
  // Six dimensions of large, unrelated strides: past the search's bound, refused as unproven.
  int64_t six[6] = {4, 9, 8, 10, 7, 11}, sparse[6] = {47434, 21127, 93737, 85841, -64228, 65283},
          zeros[6] = {0, 0, 0, 0, 0, 0};
  uint8_t one = 1;
  DLTensor ones{&one, cpu, 6, u8, six, zeros, 0};
  DLTensor far{reinterpret_cast<void*>(uintptr_t{1} << 40), cpu, 6, u8, six, sparse, 0};
  CHECK(abr_copy(rt, &ones, &far, nullptr, nullptr) == ABR_ERR_DLPACK_STRIDES);
  CHECK(error_mentions("interleave too intricately to prove that no two elements share memory"));
}

// libFuzzer target over DLPack import, validation and the planner: every input is
// decoded into a (possibly malformed) managed tensor and one request for the C API.
// The harness, not the library, knows which bytes really exist: it lets the runtime
// touch memory only when the descriptor's own span lies inside its buffer, and
// otherwise asks for a view (ABR_COPY_NEVER), which must not touch data at all.
// Traps on any broken ownership rule: the source's deleter must run exactly once,
// by the runtime on success and never on failure.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <arraybridge/arraybridge.h>

namespace {

constexpr int64_t kArena = 1 << 20;  // the bytes that exist; data points at the middle
constexpr int64_t kMaxElements = 1 << 18;
alignas(256) unsigned char arena[kArena];

// The input's fixed header; missing bytes read as zero, so short inputs count too.
struct Header {
  uint8_t op;  // what to ask for (see run())
  int8_t ndim;
  uint8_t code, bits;
  uint16_t lanes;
  uint8_t has_strides, dst_kind;
  int32_t device_type, device_id;
  uint32_t version_major, version_minor;
  uint64_t flags;
  uint64_t byte_offset;
  int64_t data_offset;  // from the middle of the arena; INT64_MIN = NULL
  uint8_t cast_code, cast_bits;
  uint16_t cast_lanes;
  uint32_t transfer_flags;
};

static_assert(sizeof(Header) == 56, "tests/fuzz/make_corpus.py packs this layout");

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  void read(void* out, size_t n) {
    std::memset(out, 0, n);
    const size_t take = pos_ < size_ ? std::min(n, size_ - pos_) : 0;
    if (take) std::memcpy(out, data_ + pos_, take);
    pos_ += n;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

int deleted = 0;
void count_delete(DLManagedTensorVersioned*) { ++deleted; }
void count_delete_legacy(DLManagedTensor*) { ++deleted; }

void require(bool ok) {
  if (!ok) __builtin_trap();
}

abr_runtime* runtime() {
  static abr_runtime* rt = [] {
    abr_runtime_options options = ABR_RUNTIME_OPTIONS_INIT;
    abr_runtime_options_init(&options, ABR_RUNTIME_OPTIONS_VERSION);
    options.flags = ABR_RUNTIME_DISABLE_CUDA | ABR_RUNTIME_DISABLE_OPENCL;  // host paths only: fast and deterministic
    abr_runtime* made = nullptr;
    require(abr_runtime_create(&options, &made) == ABR_OK);
    abr_log_set_level(ABR_LOG_OFF);
    return made;
  }();
  return rt;
}

// Whether every byte the descriptor addresses lies inside the arena (128-bit
// arithmetic: the descriptor may overflow 64 bits on purpose).
bool span_inside(const DLTensor& t, int64_t* elements_out) {
  *elements_out = 0;
  if (t.ndim < 0 || t.ndim > ABR_MAX_NDIM || (t.ndim > 0 && !t.shape)) return false;
  __int128 elements = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) return false;
    elements *= t.shape[i];
    if (elements > (__int128(1) << 40)) return false;  // keeps the 128-bit products below exact
  }
  __int128 lo = 0, hi = 0, step = 1;
  for (int i = t.ndim - 1; elements && i >= 0; --i) {
    const __int128 stride = t.strides ? __int128(t.strides[i]) : step;
    step *= t.shape[i];
    if (t.shape[i] > 1) (stride > 0 ? hi : lo) += (t.shape[i] - 1) * stride;
  }
  *elements_out = int64_t(elements);
  if (elements == 0) return true;
  // Copies write `elements` items: zero strides can make that far more than the
  // span. Bound it so each input stays fast (the library itself takes any size).
  if (elements > kMaxElements) return false;
  if (!t.data) return false;
  const __int128 itemsize = (__int128(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  const __int128 base = __int128(reinterpret_cast<uintptr_t>(t.data)) + t.byte_offset;
  const __int128 first = base + lo * itemsize, last = base + hi * itemsize + itemsize;
  const __int128 arena_start = reinterpret_cast<uintptr_t>(arena);
  return first >= arena_start && last <= arena_start + kArena;
}

DLDevice device_of(uint8_t kind, const Header& h) {
  switch (kind % 4) {
    case 0: return {kDLCPU, 0};
    case 1: return {kDLOpenCL, 0};  // disabled here: must fail cleanly
    case 2: return {kDLCUDA, 0};
    default: return {static_cast<DLDeviceType>(h.device_type), h.device_id};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  Header h;
  in.read(&h, sizeof h);
  const int ndim = h.ndim;
  const int stored = ndim > 0 ? std::min(ndim, ABR_MAX_NDIM + 2) : 0;
  std::vector<int64_t> shape(stored), strides(stored);
  if (stored) in.read(shape.data(), stored * sizeof(int64_t));
  if (stored && (h.has_strides & 1)) in.read(strides.data(), stored * sizeof(int64_t));

  DLTensor t{};
  t.data = h.data_offset == INT64_MIN ? nullptr : arena + kArena / 2 + (h.data_offset % (kArena / 2));
  t.device = {static_cast<DLDeviceType>(h.device_type), h.device_id};
  t.ndim = ndim;
  t.dtype = {h.code, h.bits, h.lanes};
  t.shape = stored ? shape.data() : (ndim > 0 ? nullptr : shape.data());
  t.strides = (h.has_strides & 1) && stored ? strides.data() : nullptr;
  t.byte_offset = h.byte_offset;

  int64_t elements = 0;
  const bool touchable = t.device.device_type == kDLCPU && span_inside(t, &elements);
  abr_transfer_options options = ABR_TRANSFER_OPTIONS_INIT;
  abr_transfer_options_init(&options, ABR_TRANSFER_OPTIONS_VERSION);
  options.flags = h.transfer_flags & 3u;
  options.casting = static_cast<abr_casting>((h.transfer_flags >> 2) % 6);  // 5: not an abr_casting
  abr_transfer_report report = ABR_TRANSFER_REPORT_INIT;
  options.report = &report;

  deleted = 0;
  DLManagedTensorVersioned* out = nullptr;
  abr_status status;
  const uint8_t op = touchable ? h.op % 5 : 0;
  if (!touchable) options.copy = ABR_COPY_NEVER;  // a view must not touch the data
  switch (op) {
    case 0:
    case 1:
    case 2: {  // versioned: a view (or refusal), a forced host copy, or a cast
      DLManagedTensorVersioned src{{h.version_major, h.version_minor}, nullptr, count_delete, h.flags, t};
      if (op == 1) options.copy = ABR_COPY_ALWAYS;
      if (op == 2) options.dtype = {h.cast_code, h.cast_bits, h.cast_lanes};
      const DLDevice dst = touchable ? DLDevice{kDLCPU, 0} : device_of(h.dst_kind, h);
      status = abr_to_device(runtime(), &src, dst, &options, nullptr, &out);
      if (status == ABR_OK) {
        require(out && deleted <= 1);
        out->deleter(out);
        require(deleted == 1);
      } else {
        require(!out && deleted == 0 && abr_last_error()[0] != '\0');
      }
      break;
    }
    case 3: {  // legacy source
      DLManagedTensor src{t, nullptr, count_delete_legacy};
      status = abr_to_device_legacy(runtime(), &src, {kDLCPU, 0}, &options, nullptr, &out);
      if (status == ABR_OK) {
        out->deleter(out);
        require(deleted == 1);
      } else {
        require(!out && deleted == 0);
      }
      break;
    }
    default: {  // abr_copy into a compact destination of the cast dtype, when it fits
      DLTensor dst = t;
      dst.dtype = {h.cast_code, h.cast_bits, h.cast_lanes};
      dst.strides = nullptr;
      dst.byte_offset = 0;
      const int64_t item = (int64_t(dst.dtype.bits) * dst.dtype.lanes + 7) / 8;
      if (item <= 0 || elements > kArena / 2 / std::max<int64_t>(item, 1)) return 0;
      std::vector<unsigned char> target(size_t(elements * item) + 1);
      dst.data = target.data();
      abr_copy(runtime(), &t, &dst, &options, nullptr);  // any status; sanitizers judge the memory
      break;
    }
  }
  abr_clear_error();
  return 0;
}

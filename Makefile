# libarraybridge build. `make` builds the library and tools; `make test` runs the
# whole suite; `make demo` shows this machine's devices and a quick benchmark.
# Both test and demo install missing Debian packages first (dev/bootstrap.sh).
# Folders: lib/ cuda/ opencl/ capi/ the library, tools/ programs on its public API,
# bench/ the benchmark (it measures internals too), dev/ scripts for this tree.

# The version lives in the public header only; the soname and file names follow it.
version_part = $(shell sed -n 's/^\#define ABR_VERSION_$(1) \([0-9]*\).*/\1/p' include/arraybridge/arraybridge.h)
VERSION_MAJOR := $(call version_part,MAJOR)
VERSION := $(VERSION_MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)
PREFIX ?= /usr/local
BUILD ?= build

CXX ?= g++
CC ?= gcc
CXXSTD := -std=c++17
WARN := -Wall -Wextra -Wshadow -Wno-missing-field-initializers
# fmt's compiled part is built once, in lib/base/fmt_build.cpp, and spdlog is used
# header-only on top of it, so the library links nothing but libc/libstdc++.
DEFS :=
# The CUDA toolkit: nvcc builds the kernels and cuda.h declares the driver API,
# which the library opens at run time (no CUDA library is linked).
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# Without the toolkit the CUDA backend is left out: cuda/descriptor.cpp alone is
# built, and every CUDA device says why. CUDA=0 leaves it out on purpose.
CUDA ?= $(if $(wildcard $(NVCC)),1,0)
ifeq ($(CUDA),0)
DEFS += -DABR_CUDA_LEFT_OUT='"nvcc was not found; install the CUDA Toolkit, or pass NVCC=/path/to/nvcc, and rebuild"'
$(info CUDA left out of this build: nvcc was not found at $(NVCC) (the library, tools and bench build without it))
endif
CPPFLAGS_ALL := -I. -Iinclude -isystem $(CUDA_HOME)/include $(DEFS)
OPT ?= -O2 -g
CXXFLAGS_LIB := $(CXXSTD) $(OPT) $(WARN) -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -pthread

LIB_SRCS := $(wildcard lib/*/*.cpp)
CAPI_SRCS := $(wildcard capi/*.cpp)
OPENCL_SRCS := $(wildcard opencl/*.cpp)
CUDA_SRCS := $(if $(filter 1,$(CUDA)),$(wildcard cuda/*.cpp),cuda/descriptor.cpp)
CORE_SRCS := $(LIB_SRCS) $(OPENCL_SRCS) $(CUDA_SRCS) $(CAPI_SRCS)
# The doctest suites, one folder per layer they test: core (planner, pipeline, pool,
# host copies, the runtime on the CPU), opencl (on PoCL) and abi (the C boundary);
# tests/support holds the shared main and helpers. tests/cuda builds its own program.
UNIT_SRCS := $(wildcard tests/support/*.cpp tests/core/*.cpp tests/opencl/*.cpp tests/abi/*.cpp)

# Before 1.0 every minor version may change the ABI, so it is part of the soname.
VERSION_MINOR := $(call version_part,MINOR)
SONAME := libarraybridge.so.$(if $(filter 0,$(VERSION_MAJOR)),0.$(VERSION_MINOR),$(VERSION_MAJOR))
SHLIB := $(BUILD)/lib/libarraybridge.so.$(VERSION)
STATIC := $(BUILD)/lib/libarraybridge_core.a
TOOLS := $(BUILD)/bin/arraybridge-info
BENCH := $(BUILD)/bin/arraybridge-bench

JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# Quiet by default: one line per target ("  CXX   lib/run/runtime.cpp"); `make V=1`
# prints the full commands instead.
V ?= 0
ifeq ($(V),0)
Q := @
say = @printf '  %-5s %s\n' '$(1)' '$(2)'
else
Q :=
say = @:
endif
ASAN_DIR := $(BUILD)/asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

.PHONY: all lib tools bench test check gpu-check test-cuda test-unit test-tsan test-asan test-c test-abi test-install test-rust test-python python fuzz demo install uninstall clean bootstrap

all: lib tools bench

bootstrap:
	@bash dev/bootstrap.sh

lib: $(SHLIB) $(BUILD)/lib/$(SONAME) $(BUILD)/lib/libarraybridge.so $(BUILD)/lib/arraybridge.pc

# ---------------------------------------------------------------- library

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(call say,CXX,$<)
	$(Q)$(CXX) $(CPPFLAGS_ALL) $(CXXFLAGS_LIB) -MMD -MP -c $< -o $@

# The tests' own code (and the sanitizer builds below): -O1 with line tables only,
# which is what a failure's or a sanitizer's backtrace reads, and builds in half the
# time of -O2 -g (CI has a budget); the library they drive is built as shipped.
TEST_OPT := -O1 -g1
$(BUILD)/obj/tests/%.o: tests/%.cpp
	@mkdir -p $(dir $@)
	$(call say,CXX,$<)
	$(Q)$(CXX) $(CPPFLAGS_ALL) $(filter-out $(OPT),$(CXXFLAGS_LIB)) $(TEST_OPT) -MMD -MP -c $< -o $@

# The kernels: a fatbin for sm_80 and sm_90 plus PTX (JIT-compiled by newer
# drivers), built on every `make` so a broken kernel fails CI without a GPU, and
# embedded in the library by cuda/fatbin.S. Every build flavour links the same object.
FATBIN := $(BUILD)/cuda/kernels.fatbin
FATBIN_OBJ := $(if $(filter 1,$(CUDA)),$(BUILD)/obj/cuda/fatbin.o)
NVCC_ARCHS := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
$(FATBIN): cuda/kernels.cu cuda/kernel_params.hpp lib/tensor/half_bits.hpp
	@mkdir -p $(dir $@)
	@test -x $(NVCC) || { echo "nvcc not found (looked on PATH and at $(NVCC)): install the CUDA Toolkit or pass NVCC=/path/to/nvcc" >&2; exit 1; }
	$(call say,NVCC,$<)
	$(Q)$(NVCC) -std=c++17 -O3 -I. --fatbin $(NVCC_ARCHS) -Werror all-warnings -o $@ $<

$(BUILD)/obj/cuda/fatbin.o: cuda/fatbin.S $(FATBIN)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) -c -DABR_CUDA_FATBIN='"$(FATBIN)"' $< -o $@

CORE_OBJS := $(CORE_SRCS:%.cpp=$(BUILD)/obj/%.o) $(FATBIN_OBJ)

# What ABR_CUDA_LEFT_OUT changes is rebuilt when the choice changes.
CUDA_CHOICE := $(BUILD)/obj/cuda-choice-$(CUDA)
$(BUILD)/obj/cuda/descriptor.o $(BUILD)/obj/bench/cuda_cases.o: $(CUDA_CHOICE)
$(CUDA_CHOICE):
	@mkdir -p $(dir $@) && rm -f $(BUILD)/obj/cuda-choice-* && touch $@

$(SHLIB): $(CORE_OBJS) capi/arraybridge.map
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -shared -pthread -Wl,-soname,$(SONAME) -Wl,--version-script=capi/arraybridge.map \
	  -Wl,--no-undefined -o $@ $(CORE_OBJS)

$(BUILD)/lib/$(SONAME): $(SHLIB)
	$(call say,LN,$@)
	$(Q)ln -sf $(notdir $(SHLIB)) $@

$(BUILD)/lib/libarraybridge.so: $(BUILD)/lib/$(SONAME)
	$(call say,LN,$@)
	$(Q)ln -sf $(SONAME) $@

$(STATIC): $(CORE_OBJS)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# pkg-config files: the build tree's points here; `make install` writes its own.
PC_SED = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@LIBDIR@|$(1)|g' -e 's|@INCLUDEDIR@|$(2)|g' capi/arraybridge.pc.in

$(BUILD)/lib/arraybridge.pc: capi/arraybridge.pc.in Makefile
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)
	$(Q)$(call PC_SED,$(abspath $(BUILD)/lib),$(abspath include)) > $@

# ---------------------------------------------------------------- tools

tools: $(TOOLS)

$(BUILD)/bin/arraybridge-info: tools/info/arraybridge_info.c $(SHLIB) $(BUILD)/lib/libarraybridge.so
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) -std=c99 -O2 -Wall -Wextra -Iinclude $< -L$(BUILD)/lib -larraybridge -Wl,-rpath,'$$ORIGIN/../lib' -o $@

# ---------------------------------------------------------------- benchmark

bench: $(BENCH)

BENCH_SRCS := $(wildcard bench/*.cpp)
# Linked with the static core: the pool and host-copy cases measure internals
# (the pinned pool, the staging threads) that the shared library does not export.
BENCH_OBJS := $(BENCH_SRCS:%.cpp=$(BUILD)/obj/%.o)
$(BENCH): $(BENCH_OBJS) $(STATIC)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread -o $@ $(BENCH_OBJS) $(STATIC) -ldl -lOpenCL

# ---------------------------------------------------------------- tests

# A stand-in for another LLVM in the process (TensorFlow's), for the OpenCL namespace tests.
FAKE_LLVM := $(BUILD)/fake-llvm/libfake-llvm.so
$(FAKE_LLVM): tests/opencl/fake_llvm/llvm_option.cpp
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) $(CXXSTD) -O1 -fPIC -shared -o $@ $<
$(BUILD)/obj/tests/opencl/test_opencl_namespace.o $(ASAN_DIR)/obj/tests/opencl/test_opencl_namespace.o: \
  CPPFLAGS_ALL += -DABR_FAKE_LLVM_PATH='"$(abspath $(FAKE_LLVM))"'

UNIT_OBJS := $(UNIT_SRCS:%.cpp=$(BUILD)/obj/%.o)
$(BUILD)/bin/unit-tests: $(UNIT_OBJS) $(STATIC) | $(FAKE_LLVM)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread -o $@ $(UNIT_OBJS) $(STATIC) -ldl -lOpenCL

# The same sources again with AddressSanitizer + UndefinedBehaviorSanitizer, and
# with the fault-injection points armed (lib/base/fault.hpp): a failure injected
# anywhere must leave no leak, which LeakSanitizer checks at exit.
$(ASAN_DIR)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(call say,CXX,$@)
	$(Q)$(CXX) $(CPPFLAGS_ALL) -DABR_FAULT_INJECTION $(CXXSTD) $(TEST_OPT) $(WARN) -pthread $(ASAN_FLAGS) -MMD -MP -c $< -o $@

ASAN_OBJS := $(CORE_SRCS:%.cpp=$(ASAN_DIR)/obj/%.o) $(UNIT_SRCS:%.cpp=$(ASAN_DIR)/obj/%.o)
ASAN_CORE_OBJS := $(CORE_SRCS:%.cpp=$(ASAN_DIR)/obj/%.o) $(FATBIN_OBJ)
$(ASAN_DIR)/bin/unit-tests: $(ASAN_OBJS) $(FATBIN_OBJ) | $(FAKE_LLVM)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread $(ASAN_FLAGS) -o $@ $^ -ldl -lOpenCL

# The CUDA tests run in CI against a fake driver (tests/cuda/fake_driver.cpp, a
# libcuda.so.1 that works on the CPU); ARRAYBRIDGE_CUDA_LIBRARY=libcuda.so.1
# runs the same binary on a real GPU.
FAKE_CUDA := $(BUILD)/fake-cuda/libcuda.so.1
# A library with pthread keys of its own, opened where OpenCL's loader would be
# (tests/cuda/test_namespace_keys.cpp).
KEY_NEIGHBOUR := $(BUILD)/key-neighbour/libkey-neighbour.so
$(KEY_NEIGHBOUR): tests/cuda/key_neighbour/key_neighbour.cpp
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) $(CXXSTD) -O1 -fPIC -shared -pthread -o $@ $<
$(BUILD)/obj/tests/cuda/test_namespace_keys.o $(ASAN_DIR)/obj/tests/cuda/test_namespace_keys.o: CPPFLAGS_ALL += \
  -DABR_KEY_NEIGHBOUR_PATH='"$(abspath $(KEY_NEIGHBOUR))"' -DABR_FAKE_LLVM_PATH='"$(abspath $(FAKE_LLVM))"'
# An OpenCL library that counts reads, writes and waits, forwarding to the ICD
# loader: tests/cuda/main.cpp opens OpenCL through it (tests/cuda/test_staged_paths.cpp).
OPENCL_COUNTER := $(BUILD)/opencl-counter/libopencl-counter.so
$(OPENCL_COUNTER): tests/cuda/opencl_counter/opencl_counter.cpp
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) $(CXXSTD) -O1 $(WARN) -fPIC -shared -o $@ $< -Wl,--no-as-needed -lOpenCL -ldl
# An OpenCL library whose devices have no double precision (as many integrated GPUs),
# forwarding the rest to the ICD loader: tests/python/test_casting.py opens OpenCL through it.
OPENCL_NO_FP64 := $(BUILD)/opencl-no-fp64/libopencl-no-fp64.so
$(OPENCL_NO_FP64): tests/opencl/no_fp64/no_fp64.cpp
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) $(CXXSTD) -O1 $(WARN) -fPIC -shared -o $@ $< -Wl,--no-as-needed -lOpenCL -ldl
CUDA_TEST_SRCS := tests/cuda/main.cpp tests/cuda/test_cuda.cpp tests/cuda/test_cuda_lifetimes.cpp tests/cuda/test_fake_rules.cpp \
  tests/cuda/test_report_detail.cpp tests/cuda/test_staged_paths.cpp tests/cuda/test_sticky_child.cpp tests/cuda/test_ipc.cpp \
  tests/cuda/test_device_cache.cpp tests/cuda/test_driver_calls.cpp tests/cuda/test_batch.cpp \
  tests/cuda/test_events.cpp tests/cuda/test_namespace_keys.cpp tests/cuda/test_exit.cpp tests/support/failing_new.cpp
$(FAKE_CUDA): tests/cuda/fake_driver.cpp cuda/kernel_params.hpp $(STATIC)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) $(CXXSTD) -O1 -g $(WARN) $(CPPFLAGS_ALL) -fPIC -shared -pthread -Wl,-soname,libcuda.so.1 -o $@ $< $(STATIC)

$(BUILD)/obj/tests/cuda/main.o $(ASAN_DIR)/obj/tests/cuda/main.o: CPPFLAGS_ALL += -DABR_FAKE_CUDA_PATH='"$(abspath $(FAKE_CUDA))"' \
  -DABR_OPENCL_COUNTER_PATH='"$(abspath $(OPENCL_COUNTER))"'

$(BUILD)/bin/cuda-tests: $(CUDA_TEST_SRCS:%.cpp=$(BUILD)/obj/%.o) $(STATIC) | $(FAKE_CUDA) $(KEY_NEIGHBOUR) $(FAKE_LLVM) $(OPENCL_COUNTER)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread -o $@ $(CUDA_TEST_SRCS:%.cpp=$(BUILD)/obj/%.o) $(STATIC) -ldl -lOpenCL

$(ASAN_DIR)/bin/cuda-tests: $(CUDA_TEST_SRCS:%.cpp=$(ASAN_DIR)/obj/%.o) $(ASAN_CORE_OBJS) | $(FAKE_CUDA) $(KEY_NEIGHBOUR) $(FAKE_LLVM) $(OPENCL_COUNTER)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread $(ASAN_FLAGS) -o $@ $^ -ldl -lOpenCL

test-cuda: $(BUILD)/bin/cuda-tests
	$(BUILD)/bin/cuda-tests

# The soak (tests/soak/): 10^6 transfers on 8 threads over every path and device,
# sampled every 10^5 for growth; about a minute here, so not in make test (the
# soak-short suite is). CUDA is the fake driver unless SOAK_CUDA_LIBRARY names
# another: make soak SOAK_CUDA_LIBRARY=libcuda.so.1 on a GPU machine.
SOAK := $(BUILD)/bin/arraybridge-soak
SOAK_SRCS := tests/soak/soak.cpp tests/soak/workload.cpp tests/soak/samples.cpp bench/machine.cpp
SOAK_CUDA_LIBRARY ?= $(abspath $(FAKE_CUDA))
SOAK_ARGS ?= --transfers 1000000 --threads 8 --sample-every 100000
$(SOAK): $(SOAK_SRCS:%.cpp=$(BUILD)/obj/%.o) $(SHLIB) $(BUILD)/lib/libarraybridge.so
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread -o $@ $(SOAK_SRCS:%.cpp=$(BUILD)/obj/%.o) -L$(BUILD)/lib -larraybridge -Wl,-rpath,'$$ORIGIN/../lib'

.PHONY: soak
soak: $(SOAK) $(FAKE_CUDA)
	@mkdir -p $(BUILD)/soak
	ARRAYBRIDGE_CUDA_LIBRARY=$(SOAK_CUDA_LIBRARY) $(SOAK) $(SOAK_ARGS) --json $(BUILD)/soak/soak.json \
	  > $(BUILD)/soak/soak.txt; status=$$?; cat $(BUILD)/soak/soak.txt; exit $$status

$(BUILD)/bin/c-abi-test: tests/abi/abi_test.c include/arraybridge/arraybridge.h $(SHLIB) $(BUILD)/lib/libarraybridge.so
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) -std=c99 -pedantic -Wall -Wextra -Werror -Iinclude $< -L$(BUILD)/lib -larraybridge \
	  -Wl,-rpath,'$$ORIGIN/../lib' -o $@

$(BUILD)/bin/concurrent-create: tests/abi/concurrent_create.c include/arraybridge/arraybridge.h $(SHLIB) $(BUILD)/lib/libarraybridge.so
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) -std=c99 -Wall -Wextra -Werror -Iinclude $< -L$(BUILD)/lib -larraybridge -pthread \
	  -Wl,-rpath,'$$ORIGIN/../lib' -o $@

# libFuzzer over DLPack import, validation and the planner (tests/fuzz/): clang with
# ASan + UBSan, the core compiled again with coverage instrumentation.
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SECONDS ?= 300
FUZZ_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# The host engine's element loops are left uninstrumented for coverage (why: tests/fuzz/coverage_ignore.txt).
FUZZ_COVERAGE_IGNORE := tests/fuzz/coverage_ignore.txt
$(FUZZ_DIR)/obj/%.o: %.cpp $(FUZZ_COVERAGE_IGNORE)
	@mkdir -p $(dir $@)
	$(call say,CXX,$@)
	$(Q)clang++ $(CPPFLAGS_ALL) $(CXXSTD) $(TEST_OPT) $(WARN) -pthread $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link \
	  -fsanitize-coverage-ignorelist=$(FUZZ_COVERAGE_IGNORE) -MMD -MP -c $< -o $@

$(FUZZ_DIR)/fuzz-transfer: tests/fuzz/fuzz_transfer.cpp $(CORE_SRCS:%.cpp=$(FUZZ_DIR)/obj/%.o) $(FATBIN_OBJ)
	$(call say,LD,$@)
	$(Q)clang++ $(CPPFLAGS_ALL) $(CXXSTD) $(TEST_OPT) -pthread $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ -ldl

# abr_ipc_import against the fake CUDA driver (tests/fuzz/fuzz_ipc_import.cpp), which it loads at run time.
$(FUZZ_DIR)/fuzz-ipc-import: tests/fuzz/fuzz_ipc_import.cpp $(CORE_SRCS:%.cpp=$(FUZZ_DIR)/obj/%.o) $(FATBIN_OBJ) | $(FAKE_CUDA)
	$(call say,LD,$@)
	$(Q)clang++ $(CPPFLAGS_ALL) -DABR_FAKE_CUDA_PATH='"$(abspath $(FAKE_CUDA))"' $(CXXSTD) $(TEST_OPT) -pthread $(FUZZ_FLAGS) \
	  -fsanitize=fuzzer -o $@ $^ -ldl

fuzz: bootstrap $(FUZZ_DIR)/fuzz-transfer $(FUZZ_DIR)/fuzz-ipc-import
	bash tests/fuzz/run.sh transfer $(BUILD) $(FUZZ_SECONDS)
	bash tests/fuzz/run.sh ipc $(BUILD) $(FUZZ_SECONDS)

# The C ABI program again, linked with the ASan + UBSan core (statically: that
# build is not position-independent). concurrent_create is not: ASan's own thread
# teardown fails a CHECK ("unable to unmap") on a PoCL thread there.
$(ASAN_DIR)/bin/%: tests/abi/%.c $(ASAN_CORE_OBJS)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) -std=c99 -Wall -Wextra -Iinclude $(ASAN_FLAGS) -g -c $< -o $@.o
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread $(ASAN_FLAGS) -o $@ $@.o $(ASAN_CORE_OBJS) -ldl -lOpenCL

# ThreadSanitizer build of the tests that run threads (the stress test, the pool's
# many-thread test, concurrent runtime creation, the pipeline): all of the core, only those tests.
TSAN_DIR := $(BUILD)/tsan
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
TSAN_TESTS := tests/support/main.cpp tests/core/test_concurrency.cpp tests/core/test_pinned_pool.cpp tests/core/test_host_threads.cpp \
              tests/core/test_pipeline.cpp tests/core/test_plugin_backend.cpp
$(TSAN_DIR)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(call say,CXX,$@)
	$(Q)$(CXX) $(CPPFLAGS_ALL) $(CXXSTD) $(TEST_OPT) $(WARN) -pthread $(TSAN_FLAGS) -MMD -MP -c $< -o $@

$(TSAN_DIR)/bin/thread-tests: $(CORE_SRCS:%.cpp=$(TSAN_DIR)/obj/%.o) $(TSAN_TESTS:%.cpp=$(TSAN_DIR)/obj/%.o) $(FATBIN_OBJ)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread $(TSAN_FLAGS) -o $@ $^ -ldl -lOpenCL

# The CUDA tests under TSan, against a fake driver built for TSan too: the fake's
# stream threads run the DMA, so a pinned block packed by one transfer while
# another's copy still reads it is a data race TSan reports.
TSAN_STATIC := $(TSAN_DIR)/lib/libarraybridge_core.a
TSAN_FAKE_CUDA := $(TSAN_DIR)/fake-cuda/libcuda.so.1
$(TSAN_STATIC): $(CORE_SRCS:%.cpp=$(TSAN_DIR)/obj/%.o) $(FATBIN_OBJ)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# The fake needs only the host casts of the core (its cast kernel), compiled in;
# one list serves as prerequisites and sources, so they cannot drift apart.
TSAN_FAKE_SRCS := tests/cuda/fake_driver.cpp lib/host/host_cast.cpp lib/tensor/dtype.cpp lib/base/text.cpp lib/base/fmt_build.cpp
$(TSAN_FAKE_CUDA): $(TSAN_FAKE_SRCS) cuda/kernel_params.hpp
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) $(CXXSTD) -O1 -g $(WARN) $(CPPFLAGS_ALL) $(TSAN_FLAGS) -fPIC -shared -pthread -Wl,-soname,libcuda.so.1 \
	  -Wl,--no-undefined -o $@ $(TSAN_FAKE_SRCS)

$(TSAN_DIR)/obj/tests/cuda/main.o: CPPFLAGS_ALL += -DABR_FAKE_CUDA_PATH='"$(abspath $(TSAN_FAKE_CUDA))"' \
  -DABR_OPENCL_COUNTER_PATH='"$(abspath $(OPENCL_COUNTER))"'
$(TSAN_DIR)/obj/tests/cuda/test_namespace_keys.o: CPPFLAGS_ALL += -DABR_KEY_NEIGHBOUR_PATH='"$(abspath $(KEY_NEIGHBOUR))"' \
  -DABR_FAKE_LLVM_PATH='"$(abspath $(FAKE_LLVM))"'

$(TSAN_DIR)/bin/cuda-tests: $(CUDA_TEST_SRCS:%.cpp=$(TSAN_DIR)/obj/%.o) $(TSAN_STATIC) | $(TSAN_FAKE_CUDA) $(KEY_NEIGHBOUR) $(FAKE_LLVM) $(OPENCL_COUNTER)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) -pthread $(TSAN_FLAGS) -o $@ $(CUDA_TEST_SRCS:%.cpp=$(TSAN_DIR)/obj/%.o) $(TSAN_STATIC) -ldl -lOpenCL

test-tsan: $(TSAN_DIR)/bin/thread-tests $(TSAN_DIR)/bin/cuda-tests
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath tests/tsan.supp)" $(TSAN_DIR)/bin/thread-tests
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath tests/tsan.supp)" $(TSAN_DIR)/bin/cuda-tests

TEST_PROGRAMS := $(FAKE_LLVM) $(KEY_NEIGHBOUR) $(OPENCL_COUNTER) $(OPENCL_NO_FP64) $(BUILD)/bin/cuda-tests $(ASAN_DIR)/bin/cuda-tests $(FAKE_CUDA) $(TSAN_DIR)/bin/cuda-tests $(ASAN_DIR)/bin/abi_test $(TSAN_DIR)/bin/thread-tests $(BUILD)/bin/unit-tests $(ASAN_DIR)/bin/unit-tests $(BUILD)/bin/c-abi-test $(BUILD)/bin/concurrent-create \
  $(FUZZ_DIR)/fuzz-transfer $(FUZZ_DIR)/fuzz-ipc-import $(SOAK)

# Both run the suites of tests/suites.txt: `make test` all of them (what CI runs),
# `make check` the quick tier (no sanitizers, fuzzing or valgrind).
# `make test` installs the Python environment (minutes of downloads, mostly waiting on
# the network) while the C++ builds on every core, and shows its log once both are done.
test: bootstrap
	@mkdir -p $(BUILD)
	@bash dev/setup_python.sh test > $(BUILD)/setup-python.log 2>&1 & setup=$$!; \
	  $(MAKE) --no-print-directory -j$(JOBS) all $(TEST_PROGRAMS); built=$$?; \
	  wait $$setup; installed=$$?; cat $(BUILD)/setup-python.log; \
	  [ $$installed -eq 0 ] || echo "make test: dev/setup_python.sh test failed (its log is above)"; \
	  [ $$built -eq 0 ] && [ $$installed -eq 0 ]
	@$(MAKE) --no-print-directory python
	bash tests/run_all.sh $(BUILD) full

QUICK_TEST_PROGRAMS := $(FAKE_LLVM) $(KEY_NEIGHBOUR) $(OPENCL_COUNTER) $(OPENCL_NO_FP64) $(BUILD)/bin/unit-tests $(BUILD)/bin/cuda-tests $(FAKE_CUDA) $(BUILD)/bin/c-abi-test \
  $(BUILD)/bin/concurrent-create
check: bootstrap
	@bash dev/setup_python.sh test
	@$(MAKE) --no-print-directory -j$(JOBS) all $(QUICK_TEST_PROGRAMS)
	@$(MAKE) --no-print-directory python
	bash tests/run_all.sh $(BUILD) quick

# Everything a GPU machine can tell us (dev/gpu_check.sh): real-driver CUDA tests,
# compute-sanitizer, every OpenCL driver, the Python suite, the CUDA benchmark and the soak,
# in one dated folder with a summary. Without a GPU it runs on the fake, saying so.
gpu-check: all $(BUILD)/bin/cuda-tests $(BUILD)/bin/unit-tests $(SOAK)
	bash dev/gpu_check.sh --no-build

test-unit: $(BUILD)/bin/unit-tests
	$(BUILD)/bin/unit-tests

test-asan: $(ASAN_DIR)/bin/unit-tests
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 $(ASAN_DIR)/bin/unit-tests

test-c: $(BUILD)/bin/c-abi-test
	$(BUILD)/bin/c-abi-test

test-abi: $(SHLIB)
	bash tests/abi/check_abi.sh $(SHLIB)

test-install: all
	bash tests/install/test_install.sh $(BUILD)

test-rust: lib
	bash rust/run.sh $(BUILD)

# ---------------------------------------------------------------- Python package

# The cffi package, built against this tree's header and library and installed into
# the project's .venv (no build isolation: the venv already has cffi and setuptools).
PY_STAMP := $(BUILD)/python.stamp
python: $(PY_STAMP)
$(PY_STAMP): $(wildcard python/*.py python/*.toml python/arraybridge/* python/arraybridge/_core/* \
              python/arraybridge/nixl/*) $(SHLIB) $(BUILD)/lib/libarraybridge.so
	@bash dev/setup_python.sh demo
	@echo "  PIP   python/ (the arraybridge package, into .venv)"
	$(Q)ARRAYBRIDGE_BUILD=$(abspath $(BUILD)) .venv/bin/python -m pip install -q --disable-pip-version-check \
	  --no-build-isolation --no-deps --force-reinstall ./python
	@touch $@

test-python: python
	.venv/bin/python -m pytest -q -rs tests/python

# The self-contained wheel in dist/ (libarraybridge bundled by auditwheel; CUDA and
# OpenCL stay the system's), and the Python suite against it in a fresh venv.
.PHONY: wheel test-wheel
wheel: lib
	@bash dev/setup_python.sh demo
	bash dev/build_wheel.sh $(BUILD)

test-wheel: wheel $(FAKE_CUDA) $(FAKE_LLVM)
	@bash dev/setup_python.sh test
	bash dev/build_wheel.sh test $(BUILD)

# ---------------------------------------------------------------- docs and style

# The references generated from the code (docs/reference/: the C API from the header's
# comments, the Python API from the docstrings), then the links of every Markdown file.
# `make test` and `make check` run dev/check_docs.sh: the committed references must be
# current, every public function documented, every relative link resolving.
.PHONY: docs format
docs: python
	python3 dev/docs_c_api.py
	.venv/bin/python dev/docs_python_api.py
	.venv/bin/python -W error -m pdoc arraybridge -o $(BUILD)/docs/python
	python3 dev/check_links.py

# Rewrites every C and C++ file but the public headers in the style of .clang-format
# (`make check` fails on one that differs: dev/check_format.sh).
format:
	bash dev/check_format.sh --fix

# ---------------------------------------------------------------- demo

demo: bootstrap
	@bash dev/setup_python.sh demo
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@$(MAKE) --no-print-directory python
	@echo
	$(BUILD)/bin/arraybridge-info
	@echo
	$(BUILD)/bin/arraybridge-bench --quick

# ---------------------------------------------------------------- install

install: all
	install -d $(DESTDIR)$(PREFIX)/include/arraybridge $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/arraybridge/*.h $(DESTDIR)$(PREFIX)/include/arraybridge/
	install -m 755 $(SHLIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libarraybridge.so
	$(call say,GEN,$@)
	$(Q)$(call PC_SED,$(PREFIX)/lib,$(PREFIX)/include) > $(DESTDIR)$(PREFIX)/lib/pkgconfig/arraybridge.pc
	for t in $(TOOLS) $(BENCH); do install -m 755 $$t $(DESTDIR)$(PREFIX)/bin/; done

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/arraybridge
	rm -f $(DESTDIR)$(PREFIX)/lib/libarraybridge.so* $(DESTDIR)$(PREFIX)/lib/pkgconfig/arraybridge.pc
	rm -f $(DESTDIR)$(PREFIX)/bin/arraybridge-info $(DESTDIR)$(PREFIX)/bin/arraybridge-bench

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

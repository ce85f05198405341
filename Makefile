# Lockstep — the two commands a reader needs:
#   make chapter4 && mpirun -n 2 ./chapter4
#   make test
# Both first install any missing Debian packages (as root), so a fresh Debian 12 machine needs
# nothing else. As root, `make chapterN` also installs tools/mpirun-as-root as
# /usr/local/bin/mpirun (Open MPI refuses root otherwise). CMake does the real work in build/.

BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

# Debian packages the build, the tests, the docs and the data need.
DEBIAN_PACKAGES := g++ make cmake pkg-config openmpi-bin libopenmpi-dev libstb-dev zlib1g-dev \
  nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev doxygen graphviz dataset-fashion-mnist \
  iproute2 python3

# The chapters written so far: chapters/chNN_topic/chapterN.cpp.
CHAPTERS := $(sort $(basename $(notdir $(wildcard chapters/ch*/chapter*.cpp))))

# The exercises: chapters/chNN_topic/exercises/<name>/ is exercise chNN_<name>.
exercise_name = $(firstword $(subst _, ,$(word 2,$(subst /, ,$(1)))))_$(word 4,$(subst /, ,$(1)))
EXERCISES := $(sort $(foreach test,$(wildcard chapters/ch*/exercises/*/test.cpp),$(call exercise_name,$(test))))

.PHONY: all deps configure build test cpu-only-check docs pdf figures clean help compare-torch exercise handout grade gpu-deps gpu-check mpirun-as-root bench-ddp bench-amp bench-torch bench-shard perf-guard results \
  sanitize tsan fuzz sanitizer-deps $(CHAPTERS)

all: build

help:
	@echo "make chapterN   build chapter N and copy ./chapterN here (then run it: ./chapterN --help)"
	@echo "make test       install missing packages, build everything, run all tests (ctest)"
	@echo "make build      library, chapters, tests and benchmarks"
	@echo "make cpu-only-check  build without CUDA in build-cpu-only/ and check it runs and refuses --device cuda"
	@echo "make docs       the book as HTML in build/docs/html (Doxygen)"
	@echo "make pdf        the book as one PDF, build/docs/lockstep.pdf (headless Chromium, qpdf)"
	@echo "make exercise EX=ch01_softplus  test your starter.cpp of that exercise (FILE=path: another file)"
	@echo "make handout DEST=dir  a student's copy without the exercises' solutions and answer keys"
	@echo "make grade EX=ch01_softplus FILE=path  a student's file against the exercise's test: its score"
	@echo "make figures    rerun the small training runs behind the book's figures and redraw their SVGs"
	@echo "make deps       install missing Debian packages (as root) or print the command"
	@echo "make compare-torch  chapter 2 beside PyTorch on the same settings (COMPARE_ARGS=...)"
	@echo "make bench-ddp  chapter 4's benchmarks: scaling over 2 ranks, bucketed vs raw all-reduce, overlap"
	@echo "make bench-shard  chapter 8's benchmark: DDP, ZeRO-1, ZeRO-2, FSDP with and without prefetch, alternated (ROUNDS=3)"
	@echo "make bench-amp  chapter 5's benchmark: f32 and bf16 autocast, Lockstep beside PyTorch (ROUNDS=3)"
	@echo "make bench-torch  Lockstep beside PyTorch: MLP, CNN at 1 and 2 threads, DDP over 1 and 2 ranks (ROUNDS=3)"
	@echo "make perf-guard  speeds against floors: bf16/f32, 2 ranks/1 rank, each chapter vs its baseline (a .ci/run step)"
	@echo "make results    chapter 7's table: one model on one device, DataParallel, DDP, DDP + mixed precision (RESULTS_*=...)"
	@echo "make gpu-deps   copy the Debian headers/libraries a GPU machine without them needs into .deps/"
	@echo "make gpu-check  on a GPU machine: build, GPU tests, compute-sanitizer, chapters, benchmarks"
	@echo "make sanitize   unit, MPI and fuzz-replay tests and a subset of the chapter runs under AddressSanitizer + UBSan (build-asan/; Clang)"
	@echo "make tsan       DataLoader, trace, DataParallel and MPI tests under ThreadSanitizer (build-tsan/; Clang)"
	@echo "make fuzz       replay past crashes, then run each libFuzzer target for FUZZ_SECONDS (60) (build-asan/, as make sanitize)"
	@echo "make clean      remove build/ and the copied chapter programs"

# Shell code that sets $$missing to those of the Debian packages $(1) that are not installed
# (empty when all are).
define find_missing
missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done
endef

# Installs only what is missing of the packages $(1) (tools/debian_packages.sh): nothing to do
# prints nothing; as root, one line naming the packages, apt-get's own output going to APT_LOG
# (its last lines printed if it fails); otherwise it prints the one apt-get command to run.
APT_LOG ?= $(BUILD_DIR)/apt.log
install_missing = @tools/debian_packages.sh install $(APT_LOG) $(1)

deps:
	$(call install_missing,$(DEBIAN_PACKAGES))

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# One test at a time: each test already uses every core through OpenMP, and two at once make
# their spinning threads wait for each other (about 7x slower overall on 2 cores).
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure

# The build without CUDA (as on a machine without nvcc) still compiles and explains itself when
# asked for a GPU (tests/build/cpu_only_build.cmake). A CUDA build never compiles the CPU-only
# fallbacks, so a CPU-only build is what keeps them from rotting. .ci/run leaves this target
# out: make sanitize's build is CPU only too and runs the same checks (tools/sanitize.sh).
CPU_ONLY_BUILD_DIR ?= build-cpu-only
cpu-only-check: deps
	@cmake -DSOURCE_DIR=$(CURDIR) -DBINARY_DIR=$(abspath $(CPU_ONLY_BUILD_DIR)) -DJOBS=$(JOBS) \
	  -P tests/build/cpu_only_build.cmake

docs: configure
	@cmake --build $(BUILD_DIR) --target docs
	@echo "The book: $(BUILD_DIR)/docs/html/index.html"

# The book as one PDF (front page, chapters, glossary, cheat sheet), printed from the HTML by
# headless Chromium and joined with qpdf (tools/make_pdf.sh). Not part of make test.
PDF_PACKAGES := chromium qpdf
pdf: docs
	$(call install_missing,$(PDF_PACKAGES))
	@tools/make_pdf.sh $(BUILD_DIR)/docs/html $(BUILD_DIR)/docs/lockstep.pdf

# Open MPI will not start as root without --allow-run-as-root. For root only, put a wrapper that
# allows it first on the PATH (/usr/local/bin comes before /usr/bin), and say so; an mpirun
# already in /usr/local/bin that is not ours is left alone.
MPIRUN_WRAPPER := /usr/local/bin/mpirun
mpirun-as-root: deps
	@if [ "$$(id -u)" = 0 ] && [ -x /usr/bin/mpirun ] && ! cmp -s tools/mpirun-as-root $(MPIRUN_WRAPPER); then \
	  if [ -e $(MPIRUN_WRAPPER) ] && ! grep -q "Lockstep's Makefile" $(MPIRUN_WRAPPER); then \
	    echo "Note: $(MPIRUN_WRAPPER) exists; as root, run mpirun with --allow-run-as-root"; \
	  else \
	    install -m 755 tools/mpirun-as-root $(MPIRUN_WRAPPER); \
	    echo "Installed $(MPIRUN_WRAPPER): mpirun for root (Open MPI's --allow-run-as-root; see tools/mpirun-as-root)"; \
	  fi; \
	fi

# make chapterN: build that program and copy it to the repository root.
$(CHAPTERS): chapter%: configure mpirun-as-root
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target $@
	@cp $(BUILD_DIR)/$@ ./$@
	@echo "Built ./$@ (run ./$@ --help for its flags)"

# make exercise EX=chNN_name [FILE=path]: builds the exercise's test with the student's file
# (the exercise's starter.cpp, or FILE) and runs it (chapters/EXERCISES.md). Each run sets the
# file again, so leaving FILE out goes back to starter.cpp.
EXERCISE_DIR = $(dir $(wildcard chapters/$(firstword $(subst _, ,$(EX)))_*/exercises/$(patsubst $(firstword $(subst _, ,$(EX)))_%,%,$(EX))/test.cpp))
exercise: deps
	@if [ -z "$(filter $(EX),$(EXERCISES))" ]; then \
	  echo "make exercise EX=<name>: expected one of the exercises: $(EXERCISES)"; exit 1; fi
	@if [ -n "$(FILE)" ] && [ ! -f "$(FILE)" ]; then echo "make exercise: FILE=$(FILE) is not a file"; exit 1; fi
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) \
	  "-DLOCKSTEP_EXERCISE_FILE_$(EX)=$(abspath $(or $(FILE),$(EXERCISE_DIR)starter.cpp))" >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target check_exercise_$(EX)

# A student's copy of the book's code (tools/make_handout.sh): no solutions, no answer keys.
handout:
	@sh tools/make_handout.sh "$(DEST)"

# A student's file graded against this checkout's test of the exercise: the cases that pass, of
# all. Builds it as `make exercise` does, then puts the exercise's starter back in the build.
grade: deps
	@if [ -z "$(filter $(EX),$(EXERCISES))" ]; then \
	  echo "make grade EX=<name> FILE=path: expected one of the exercises: $(EXERCISES)"; exit 1; fi
	@if [ -z "$(FILE)" ] || [ ! -f "$(FILE)" ]; then echo "make grade: FILE=$(FILE) is not a file (the student's file)"; exit 1; fi
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) \
	  "-DLOCKSTEP_EXERCISE_FILE_$(EX)=$(abspath $(FILE))" >/dev/null
	@if cmake --build $(BUILD_DIR) -j $(JOBS) --target exercise_$(EX) >$(BUILD_DIR)/grade-$(EX).log 2>&1; then \
	  cmake --build $(BUILD_DIR) --target grade_exercise_$(EX) 2>&1 | grep -E '^\[  FAILED  \] [A-Za-z]|: score ' | grep -v ' ms)$$'; \
	else echo "$(EX): score 0 ($(FILE) does not compile; $(BUILD_DIR)/grade-$(EX).log has the compiler's messages)"; fi; \
	cmake -S . -B $(BUILD_DIR) "-DLOCKSTEP_EXERCISE_FILE_$(EX)=$(abspath $(EXERCISE_DIR)starter.cpp)" >/dev/null

# Chapter 2 beside PyTorch on the same workload (needs Debian's python3-torch; not part of CI).
COMPARE_ARGS ?= --model cnn --epochs 2 --batch-size 64 --lr 0.05 --threads 2
TORCH_PYTHON ?= /usr/bin/python3
# The first line of a recipe that needs PyTorch: stops, naming the target and what to install,
# when $(TORCH_PYTHON) cannot import torch.
need_torch = @$(TORCH_PYTHON) -c "import torch" 2>/dev/null || \
  { echo "$@ needs PyTorch: apt-get install python3-torch libopenblas0-pthread"; exit 1; }
compare-torch: chapter2
	$(need_torch)
	@cmake --build $(BUILD_DIR) --target gradient_parity
	@mkdir -p $(BUILD_DIR)/parity
	$(BUILD_DIR)/tests/gradient_parity cnn $(BUILD_DIR)/parity
	$(TORCH_PYTHON) tests/reference/gradient_parity.py cnn $(BUILD_DIR)/parity
	./chapter2 $(COMPARE_ARGS) | tee $(BUILD_DIR)/compare-lockstep.txt
	$(TORCH_PYTHON) tests/reference/chapter2_torch.py $(COMPARE_ARGS) | tee $(BUILD_DIR)/compare-torch.txt
	@$(TORCH_PYTHON) tests/reference/compare.py $(BUILD_DIR)/compare-lockstep.txt $(BUILD_DIR)/compare-torch.txt

clean:
	rm -rf $(BUILD_DIR) $(CHAPTERS)

# A GPU machine may have CUDA but none of the Debian packages above and no package registry.
# `make gpu-deps` (here, with network) unpacks the packages' files into .deps/root; copy the
# repository with .deps to the GPU machine and run `make gpu-check` there: CMake finds
# everything under .deps/root/usr through CMAKE_PREFIX_PATH.
GPU_DEPS := libcli11-dev nlohmann-json3-dev libstb-dev libgtest-dev libbenchmark-dev libbenchmark1debian \
  zlib1g-dev dataset-fashion-mnist
gpu-deps:
	@tools/debian_packages.sh unpack .deps .deps/apt.log $(GPU_DEPS)

# Regressions caught (tests/bench/perf_guard.sh): bf16 over f32 on the CNN, 2 ranks over 1, and each
# chapter's samples/s against tests/bench/perf_baseline.txt, each against a floor. A step of .ci/run.
perf-guard: build mpirun-as-root
	@tests/bench/perf_guard.sh $(BUILD_DIR)

# Chapter 4's benchmarks (scaling over 2 ranks, bucketed vs raw all-reduce, overlap); not tests.
bench-ddp: build
	@tests/bench/ddp_benchmarks.sh $(BUILD_DIR)

# Chapter 8's benchmark: every way of sharding, alternated ROUNDS times (tests/bench/shard_benchmarks.py):
# samples/s against DDP, peak model state and bytes per step, and the model state with 4 ranks.
bench-shard: build mpirun-as-root
	@/usr/bin/python3 tests/bench/shard_benchmarks.py $(BUILD_DIR) $(ROUNDS)

# Needs Debian's python3-torch (apt-get install python3-torch libopenblas0-pthread).
ROUNDS ?= 3
bench-amp: build
	$(need_torch)
	@TORCH_PYTHON=$(TORCH_PYTHON) tests/bench/amp_benchmarks.sh $(BUILD_DIR) $(ROUNDS)

# Chapter 7's results table: the same model, data, per-device batch and epochs on one device,
# DataParallel, DDP and DDP with mixed precision (4 ranks and two nodes where the machine allows),
# written to $(RESULTS_DIR)/results-<device>.{csv,md,svg} with the machine, date and commit
# (tools/results/results.py --help). A device is a GPU where nvidia-smi lists one, else a CPU
# core; without a GPU an epoch is the first RESULTS_TRAIN_IMAGES training images, so that the
# whole table takes minutes, not hours (0: the whole training set). RESULTS_TORCH=/usr/bin/python3
# adds PyTorch's one device as a row (for resnet50 it needs torchvision on PYTHONPATH: see
# tests/reference/resnet50_torchvision.py). A CIFAR-10 subset has RESULTS_TRAIN_IMAGES / 5 test
# images (its loader wants as many records in every file), so RESULTS_TEST_IMAGES is Fashion-MNIST's.
RESULTS_MODEL ?= resnet50
RESULTS_DATASET ?= fashion-mnist
RESULTS_DATA ?=
HAVE_GPU = $(shell nvidia-smi -L 2>/dev/null | grep -q GPU && echo yes)
RESULTS_DEVICES ?= $(if $(HAVE_GPU),cuda,cpu)
RESULTS_TRAIN_IMAGES ?= $(if $(HAVE_GPU),0,10240)
RESULTS_TEST_IMAGES ?= $(if $(HAVE_GPU),0,2000)
RESULTS_BATCH ?= 256
RESULTS_EPOCHS ?= 1
RESULTS_DIR ?= $(BUILD_DIR)/results
RESULTS_TORCH ?=
results: configure mpirun-as-root
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target chapter2 chapter3 chapter4 chapter5 chapter6 chapter8
	@/usr/bin/python3 tools/results/results.py --build $(BUILD_DIR) --out $(RESULTS_DIR) --model $(RESULTS_MODEL) \
	  --dataset $(RESULTS_DATASET) $(if $(RESULTS_DATA),--data $(RESULTS_DATA)) --devices $(RESULTS_DEVICES) \
	  --batch-size $(RESULTS_BATCH) --epochs $(RESULTS_EPOCHS) --train-images $(RESULTS_TRAIN_IMAGES) \
	  $(if $(filter cifar10,$(RESULTS_DATASET)),,--test-images $(RESULTS_TEST_IMAGES)) \
	  $(if $(RESULTS_TORCH),--torch-python $(RESULTS_TORCH))

# Lockstep beside PyTorch on the CPU, alternated, ROUNDS times (tests/bench/torch_benchmarks.sh):
# the table of the CPU kernels' work, with every run and the ratio of the medians.
BENCH_STEPS ?= 300
bench-torch: build
	$(need_torch)
	@TORCH_PYTHON=$(TORCH_PYTHON) tests/bench/torch_benchmarks.sh $(BUILD_DIR) $(ROUNDS) $(BENCH_STEPS)

GPU_LOGS ?= $(BUILD_DIR)/gpu-logs
gpu-check:
	@tests/gpu/check_on_gpu.sh $(GPU_LOGS) $(GPU_STEPS)

# The book's figures: small runs of the chapters on the CPU, then tools/figures/ draws each SVG
# into chapters/chNN_*/figures/, where they are committed (tools/figures/make_figures.sh runs
# them; tools/figures/README.md lists each command and the machine). Needs Debian's
# python3-matplotlib, not needed by the build or the tests.
FIGURE_PACKAGES := python3-matplotlib
figures: configure mpirun-as-root
	@$(call find_missing,$(FIGURE_PACKAGES)); \
	if [ -n "$$missing" ]; then echo "make figures needs:$$missing (apt-get install -y$$missing)"; exit 1; fi
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target chapter2 chapter3 chapter4 chapter5 chapter6 chapter8 sampler_indices cnn_roofline
	@tools/figures/make_figures.sh $(BUILD_DIR)

# Sanitizers and fuzzing (README, "Sanitizers and fuzzing"), CPU only, with Clang: libFuzzer
# needs it, and ThreadSanitizer needs LLVM's OpenMP runtime (GCC's libgomp is not instrumented,
# so every parallel loop would look like a race). make sanitize and make fuzz share one build
# folder (AddressSanitizer + UBSan), make tsan has its own. Those packages are installed by
# these targets only, never by make test.
SANITIZER_PACKAGES := clang libclang-rt-dev libomp-dev
ASAN_BUILD_DIR ?= build-asan
TSAN_BUILD_DIR ?= build-tsan
FUZZ_SECONDS ?= 60
sanitizer-deps:
	$(call install_missing,$(SANITIZER_PACKAGES))

# TESTS=regex runs only the tests it matches (ctest -R).
sanitize: deps sanitizer-deps
	@TESTS='$(value TESTS)' tools/sanitize.sh asan $(ASAN_BUILD_DIR)

tsan: deps sanitizer-deps
	@TESTS='$(value TESTS)' tools/sanitize.sh tsan $(TSAN_BUILD_DIR)

fuzz: deps sanitizer-deps
	@tools/fuzz.sh $(ASAN_BUILD_DIR) $(FUZZ_SECONDS)

# cellblock - build, test, install.
#
#   make            build everything into build/ (kernelspec included)
#   make test       build, then C unit tests and the Python suites
#   make demo       build, then run examples/demo.ipynb through the kernel
#   make install    PREFIX=/usr/local DESTDIR=...
#   make SANITIZE=address,undefined test
#
# Missing Debian packages are installed by scripts/deps.sh when run as root;
# otherwise it prints the exact apt-get command and stops.  Each target asks
# only for the groups it uses: building and `make demo` the core group,
# `make test` also test, tiers, fuzz and guest, `make fuzz` fuzz (`make deps-GROUP`
# installs one group; `sh scripts/deps.sh --list GROUP` lists it).

PREFIX    ?= /usr/local
DESTDIR   ?=
CC        ?= cc
SANITIZE  ?=
# A sanitizer build lives in its own tree so objects never mix.
ifneq ($(SANITIZE),)
BUILD     ?= build-sanitize
else
BUILD     ?= build
endif
PYTEST_ARGS ?=

# A Python that has jupyter_client (the pyenv python3 on PATH may not).
TEST_PYTHON ?= $(shell for p in /usr/bin/python3 python3; do \
    $$p -c 'import jupyter_client' >/dev/null 2>&1 && { command -v $$p; break; }; done)
# The interpreter that runs inside the sandbox (baked into the kernelspec).
SANDBOX_PYTHON ?= /usr/bin/python3
# Where `make install` puts the client package (cellblock.Sandbox); on Debian
# $(PREFIX)/lib/python3/dist-packages is on /usr/bin/python3's path.
PYTHON_SITE ?= $(PREFIX)/lib/python3/dist-packages

PKGS      := libzmq libczmq jansson libsodium libseccomp
# libcrypto: the kernel's HMAC-SHA256 (kernel/auth.c), SHA-256 of paused sessions' images
# (launcher/snapimage.c)
PKGS      += libcrypto
# protobuf-c: the two records of a CRIU image the launcher edits (launcher/criu_img.c)
PKGS      += libprotobuf-c
# zstd: the memory pages of a paused --pausable session, compressed in its image
# (launcher/criu_pack.c)
PKGS      += libzstd
DEPS_OK   := $(BUILD)/.deps-ok
DEPS_TEST := $(BUILD)/.deps-test-ok $(BUILD)/.deps-tiers-ok $(BUILD)/.deps-fuzz-ok \
             $(BUILD)/.deps-guest-ok $(BUILD)/.deps-criu-ok

CFLAGS_BASE := -std=gnu11 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Werror -Wformat=2 \
               -Wformat-nonliteral -Wshadow -Wvla -fno-strict-aliasing -iquote . \
               -iquote $(BUILD)/gen
ifneq ($(SANITIZE),)
CFLAGS_BASE += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -O1
LDFLAGS     += -fsanitize=$(SANITIZE)
endif

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread

ISOLATE_SRC   := $(wildcard isolate/*.c)
ARTIFACTS_SRC := $(wildcard artifacts/*.c)
LAUNCHER_SRC  := $(filter-out launcher/main.c,$(wildcard launcher/*.c))
# tiers/: the isolation tiers' launcher side; init.c is cellblock-init, a
# program of its own (static, below)
TIERS_SRC     := $(filter-out tiers/init.c tiers/init_%.c,$(wildcard tiers/*.c))
KERNEL_SRC    := $(filter-out kernel/main.c,$(wildcard kernel/*.c))
LIB_SRC       := $(ISOLATE_SRC) $(ARTIFACTS_SRC) $(TIERS_SRC) $(LAUNCHER_SRC) $(KERNEL_SRC)
LIB_OBJ       := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
# One static archive per folder, linked in docs/ARCHITECTURE.md's dependency order
# (kernel -> launcher -> tiers -> isolate, kernel -> artifacts -> isolate): a single
# pass over the archives means a call against that direction (isolate
# calling up into the kernel, say) fails to link.  The launcher links
# without artifacts/ and kernel/ at all.
ISOLATE_A     := $(BUILD)/lib/libcb_isolate.a
ARTIFACTS_A   := $(BUILD)/lib/libcb_artifacts.a
TIERS_A       := $(BUILD)/lib/libcb_tiers.a
LAUNCHER_A    := $(BUILD)/lib/libcb_launcher.a
KERNEL_A      := $(BUILD)/lib/libcb_kernel.a
KERNEL_LIBS   := $(KERNEL_A) $(LAUNCHER_A) $(TIERS_A) $(ARTIFACTS_A) $(ISOLATE_A)
LAUNCHER_LIBS := $(LAUNCHER_A) $(TIERS_A) $(ISOLATE_A)
UNIT_SRC      := $(wildcard tests/unit/test_*.c)
UNIT_BIN      := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

KERNEL_BIN   := $(BUILD)/bin/cellblock-kernel
LAUNCHER_BIN := $(BUILD)/libexec/cellblock/cellblock-launcher
RUNNER_DIR   := $(BUILD)/share/cellblock/runner
RUNNER_SRC   := $(wildcard runner/*.py)
RUNNER_OUT   := $(RUNNER_SRC:runner/%=$(RUNNER_DIR)/%)
KSPEC_DIR    := $(BUILD)/share/jupyter/kernels/cellblock
KSPEC        := $(KSPEC_DIR)/kernel.json

.PHONY: all deps test unit pytest demo install clean bench indent
all: $(KERNEL_BIN) $(LAUNCHER_BIN) $(RUNNER_OUT) $(RUNNER_DIR)/.compiled $(KSPEC)

deps: $(DEPS_OK)
$(DEPS_OK): scripts/deps.sh
	@sh scripts/deps.sh core
	@mkdir -p $(@D) && touch $@
# the other groups (scripts/deps.sh): one stamp each
$(BUILD)/.deps-%-ok: scripts/deps.sh
	@sh scripts/deps.sh $*
	@mkdir -p $(@D) && touch $@
# a criu that dumps on this kernel (Debian 13's beside Debian 12's where the
# kernel is 6.13 or later; nothing elsewhere): after the guest group's criu
$(BUILD)/.deps-criu-ok: scripts/criu.sh $(BUILD)/.deps-guest-ok
	@sh scripts/criu.sh
	@mkdir -p $(@D) && touch $@
.PHONY: deps-criu
deps-criu:
	@sh scripts/criu.sh
.PHONY: deps-core deps-test deps-tiers deps-fuzz deps-guest deps-all
deps-core deps-test deps-tiers deps-fuzz deps-guest deps-all:
	@sh scripts/deps.sh $(@:deps-%=%)

$(BUILD)/obj/%.o: %.c $(DEPS_OK)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_BASE) $(PKG_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# launcher/criu_img.proto -> $(BUILD)/gen/launcher/criu_img.pb-c.[ch] (protoc-c)
CRIU_PB := $(BUILD)/gen/launcher/criu_img.pb-c
$(CRIU_PB).c $(CRIU_PB).h &: launcher/criu_img.proto $(DEPS_OK)
	@mkdir -p $(@D)
	@echo "  PROTOC  $<"
	@protoc-c --proto_path=launcher --c_out=$(@D) $<
$(BUILD)/obj/launcher/criu_img.o: $(CRIU_PB).h
$(BUILD)/obj/gen/launcher/criu_img.pb-c.o: $(CRIU_PB).c $(CRIU_PB).h
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_BASE) $(PKG_CFLAGS) $(CFLAGS) -c $< -o $@

$(ISOLATE_A): $(ISOLATE_SRC:%.c=$(BUILD)/obj/%.o)
$(ARTIFACTS_A): $(ARTIFACTS_SRC:%.c=$(BUILD)/obj/%.o)
$(TIERS_A): $(TIERS_SRC:%.c=$(BUILD)/obj/%.o)
$(LAUNCHER_A): $(LAUNCHER_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/launcher/criu_img.pb-c.o
$(KERNEL_A): $(KERNEL_SRC:%.c=$(BUILD)/obj/%.o)
$(BUILD)/lib/%.a:
	@mkdir -p $(@D)
	@rm -f $@
	@ar rcs $@ $^

$(KERNEL_BIN): $(BUILD)/obj/kernel/main.o $(KERNEL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
	ln -sf cellblock-kernel $(@D)/cellblock

$(LAUNCHER_BIN): $(BUILD)/obj/launcher/main.o $(LAUNCHER_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(RUNNER_DIR)/%.py: runner/%.py
	@mkdir -p $(@D)
	cp $< $@

# Bytecode for the runner, made once here: inside the sandbox its directory
# is read-only, so without it every start would recompile (~4 ms).  Also
# matplotlib's font list (when the sandboxed Python has matplotlib), which
# every fresh sandbox would otherwise rebuild on first use (~130 ms).
$(RUNNER_DIR)/.compiled: $(RUNNER_OUT)
	@$(SANDBOX_PYTHON) -m compileall -q $(RUNNER_DIR) >/dev/null
	@sh scripts/mplcache.sh $(SANDBOX_PYTHON) $(RUNNER_DIR)/mplcache
	@touch $@

$(KSPEC): $(KERNEL_BIN) kernelspec/kernel.json.in $(wildcard kernelspec/logo-*)
	@mkdir -p $(@D)
	sed -e 's|@KERNEL@|$(abspath $(KERNEL_BIN))|g' \
	    -e 's|@PYTHON@|$(SANDBOX_PYTHON)|g' kernelspec/kernel.json.in > $@
	cp kernelspec/logo-* $(@D)/ 2>/dev/null || true

$(BUILD)/tests/test_artifacts $(BUILD)/tests/test_artifacts_abuse: tests/unit/artifacts_kit.h
# the guest's multiplexer is part of cellblock-init, in no library: linked in directly
$(BUILD)/tests/test_vm_mux: tests/unit/test_vm_mux.c tiers/init_mux.c tests/unit/tap.h $(KERNEL_LIBS)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_BASE) $(PKG_CFLAGS) $(CFLAGS) $(LDFLAGS) -iquote tests/unit -o $@ $< \
	    tiers/init_mux.c $(KERNEL_LIBS) $(PKG_LIBS)
$(BUILD)/tests/%: tests/unit/%.c tests/unit/tap.h $(KERNEL_LIBS)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_BASE) $(PKG_CFLAGS) $(CFLAGS) $(LDFLAGS) -iquote tests/unit -o $@ $< \
	    $(KERNEL_LIBS) $(PKG_LIBS)

unit: $(UNIT_BIN) all check-layers
	@set -e; for t in $(UNIT_BIN); do echo "# $$t"; $$t; done

# docs/ARCHITECTURE.md's layers, for headers too: each folder includes only
# itself and the folders below it (tiers/ of launcher/ only options.h); inside
# kernel/, the server/dispatch/relay layers and the session driver below relay
# and dispatch (includes, and the built objects' symbols).  The script says it
# all (scripts/check-layers.sh).
.PHONY: check-layers
check-layers: $(KERNEL_A)
	@BUILD=$(BUILD) sh scripts/check-layers.sh

# npm deps of tests/frontends (playwright-core; the browser is Debian's chromium)
.PHONY: frontend-deps
frontend-deps:
	@sh tests/frontends/setup.sh

pytest: all frontend-deps guest-image $(BUILD)/tests/test_criu_dump | $(DEPS_TEST)
	@test -n "$(TEST_PYTHON)" || { echo "no Python with jupyter_client found; run: sh scripts/deps.sh core test"; exit 1; }
	CELLBLOCK_BUILD=$(abspath $(BUILD)) \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	$(TEST_PYTHON) -m pytest -q -p no:cacheprovider tests $(PYTEST_ARGS)

# what `make test` runs needs the test, tiers and fuzz groups too (unit and
# pytest wait for them; so does the guest image, below, which is made from
# the kernel the tiers group brings)
test: unit fuzz-smoke pytest

demo: all
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) examples/demo.py

# each script rewrites only its own section of $(BENCH_RESULTS)
BENCH_RESULTS ?= bench/RESULTS.md
bench: all
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) bench/bench.py --write $(BENCH_RESULTS)
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) bench/ipython.py --write $(BENCH_RESULTS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/libexec/cellblock \
	    $(DESTDIR)$(PREFIX)/share/cellblock/runner $(DESTDIR)$(PREFIX)/share/jupyter/kernels/cellblock
	install -m 755 $(KERNEL_BIN) $(DESTDIR)$(PREFIX)/bin/
	ln -sf cellblock-kernel $(DESTDIR)$(PREFIX)/bin/cellblock
	install -m 755 $(LAUNCHER_BIN) $(DESTDIR)$(PREFIX)/libexec/cellblock/
	install -m 644 $(RUNNER_OUT) $(DESTDIR)$(PREFIX)/share/cellblock/runner/
	$(SANDBOX_PYTHON) -m compileall -q $(DESTDIR)$(PREFIX)/share/cellblock/runner >/dev/null
	sh scripts/mplcache.sh $(SANDBOX_PYTHON) $(DESTDIR)$(PREFIX)/share/cellblock/runner/mplcache
	sed -e 's|@KERNEL@|$(PREFIX)/bin/cellblock-kernel|g' \
	    -e 's|@PYTHON@|$(SANDBOX_PYTHON)|g' kernelspec/kernel.json.in \
	    > $(DESTDIR)$(PREFIX)/share/jupyter/kernels/cellblock/kernel.json
	cp kernelspec/logo-* $(DESTDIR)$(PREFIX)/share/jupyter/kernels/cellblock/ 2>/dev/null || true
	install -d $(DESTDIR)$(PYTHON_SITE)/cellblock
	install -m 644 client/cellblock/*.py $(DESTDIR)$(PYTHON_SITE)/cellblock/

# Deployment paths (container image, podman kube play, JupyterHub, Node.js
# agent), as their users run them; needs root and minutes: not part of `make test`.
.PHONY: deploy-check bench-density
deploy-check: all
	TEST_PYTHON=$(TEST_PYTHON) CELLBLOCK_BUILD=$(abspath $(BUILD)) sh deploy/check.sh

# N idle kernels (PSS, responsiveness) and kernels started at once, beside
# ipykernel; writes the density section of bench/RESULTS.md.  200 ipykernels
# take ~11 GiB: once measured they are kept (build/density.json, --keep).
bench-density: all
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) bench/density.py --keep --write $(BENCH_RESULTS)

indent:
	clang-format -i $(wildcard */*.c */*.h tests/unit/*.c tests/unit/*.h)

clean:
	rm -rf $(BUILD)

# ---- cellblock-proxy: the egress proxy of --network allow: (proxy/) --------
# Installed next to the launcher, which starts one per sandbox; the allowlist
# grammar it shares with the kernel and the launcher is launcher/netrules.c.  c-ares
# resolves names inside its poll loop; libseccomp builds its own filter.
PROXY_PKGS := libcares libseccomp libssl libcrypto
PROXY_SRC  := $(filter-out proxy/main.c,$(wildcard proxy/*.c))
PROXY_OBJ  := $(PROXY_SRC:%.c=$(BUILD)/obj/%.o)
PROXY_BIN  := $(BUILD)/libexec/cellblock/cellblock-proxy
PROXY_LIBS  = $(shell pkg-config --libs $(PROXY_PKGS) 2>/dev/null)
PROXY_UNIT := $(filter $(BUILD)/tests/test_proxy%,$(UNIT_BIN))

all: $(PROXY_BIN)

$(PROXY_BIN): $(BUILD)/obj/proxy/main.o $(PROXY_OBJ) $(LAUNCHER_LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PROXY_LIBS)

# unit tests of the proxy link its objects and libraries too
$(PROXY_UNIT): $(PROXY_OBJ)
$(PROXY_UNIT): PKG_LIBS += $(PROXY_OBJ) $(KERNEL_LIBS) $(PROXY_LIBS)

.PHONY: install-proxy
install: install-proxy
install-proxy: all
	install -d $(DESTDIR)$(PREFIX)/libexec/cellblock
	install -m 755 $(PROXY_BIN) $(DESTDIR)$(PREFIX)/libexec/cellblock/

-include $(PROXY_OBJ:.o=.d) $(BUILD)/obj/proxy/main.d
-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/kernel/main.d $(BUILD)/obj/launcher/main.d

# ---- isolation tiers (--isolation gvisor|microvm; docs/SECURITY.md) -------------
# cellblock-init (tiers/init.c) is pid 1 under gVisor and /init of the micro-VM: static, never
# sanitized (it runs where no sanitizer runtime exists).  The micro-VM's guest
# kernel and initramfs are extracted once here, from the installed Debian kernel
# (scripts/vmimage.sh); without one the microvm tier fails closed at start.
TIER_INIT    := $(BUILD)/libexec/cellblock/cellblock-init
VM_DIR       := $(BUILD)/share/cellblock/vm
TIER_CFLAGS  := -std=gnu11 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Werror -Wformat=2 \
                -Wformat-nonliteral -Wshadow -Wvla -iquote .
TIERS_PYTEST ?= tests/integration/test_tiers.py tests/integration/test_tiers_microvm.py

.PHONY: vm-image test-tiers
all: $(TIER_INIT) vm-image

TIER_INIT_SRC := tiers/init.c tiers/init_gvisor.c tiers/init_mux.c tiers/snap_agent.c \
                 tiers/snap_agent_image.c \
                 tiers/snap_proc.c tiers/snap_tree.c tiers/splice.c
$(TIER_INIT): $(TIER_INIT_SRC) $(wildcard tiers/*.h) isolate/sandbox_limits.h isolate/cb_limits.h \
              isolate/snap_limits.h $(DEPS_OK)
	@mkdir -p $(@D)
	@echo "  CC      $< (static)"
	@$(CC) $(TIER_CFLAGS) -static -o $@ $(TIER_INIT_SRC)

vm-image: $(TIER_INIT) $(if $(filter test pytest test-tiers,$(MAKECMDGOALS)),| $(DEPS_TEST))
	@sh scripts/vmimage.sh $(VM_DIR) $(TIER_INIT)

# `make install` also installs cellblock-init and, when built, the guest image.
.PHONY: install-tiers
install: install-tiers
install-tiers: all
	install -d $(DESTDIR)$(PREFIX)/libexec/cellblock
	install -m 755 $(TIER_INIT) $(DESTDIR)$(PREFIX)/libexec/cellblock/
	if [ -f $(VM_DIR)/vmlinuz ]; then \
	    install -d $(DESTDIR)$(PREFIX)/share/cellblock/vm && \
	    install -m 644 $(VM_DIR)/vmlinuz $(VM_DIR)/initrd.img $(VM_DIR)/release \
	        $(DESTDIR)$(PREFIX)/share/cellblock/vm/; fi

# The tiers' longer runs (about 6 minutes here): the output and security suites
# under gVisor, the output suite in the micro-VM (TCG), and the slower micro-VM
# tests.  `make test` keeps test_tiers*.py (about 1 minute).
test-tiers: all | $(DEPS_TEST)
	CELLBLOCK_BUILD=$(abspath $(BUILD)) CB_TEST_KERNEL_ARGS="--isolation gvisor" \
	$(TEST_PYTHON) -m pytest -q -p no:cacheprovider tests/integration/test_outputs.py tests/security $(PYTEST_ARGS)
	CELLBLOCK_BUILD=$(abspath $(BUILD)) CB_TEST_KERNEL_ARGS="--isolation microvm" \
	$(TEST_PYTHON) -m pytest -q -p no:cacheprovider tests/integration/test_outputs.py $(PYTEST_ARGS)
	CELLBLOCK_BUILD=$(abspath $(BUILD)) CB_TIERS_FULL=1 \
	$(TEST_PYTHON) -m pytest -q -p no:cacheprovider $(TIERS_PYTEST) $(PYTEST_ARGS)

# ---- the test guest: cgroup v2 on Debian's own kernel (issue 19, guest/) -----
# QEMU (TCG here) boots the installed Debian kernel on the host's system
# (read-only 9p under a tmpfs overlay), cgroup v2 alone, and runs the limit,
# OOM and teardown tests in it as root and as an ordinary user with and
# without a delegated cgroup.  `make test` runs a subset (tests/guest, about
# 3 minutes); `make test-guest` the full set and the container check;
# `make bench-guest` the launch bench (CLONE_INTO_CGROUP on/off beside
# ipykernel), which rewrites the guest section of bench/RESULTS.md (a test
# run leaves the tree as it was).
GUEST_DIR := $(BUILD)/guest
.PHONY: guest-image test-guest bench-guest
# (not part of `all`: the guest needs the guest and tiers groups, `make` only core)
guest-image: $(DEPS_OK) $(BUILD)/.deps-tiers-ok $(BUILD)/.deps-guest-ok
	@sh scripts/guestimage.sh $(GUEST_DIR) guest/initrd-init

test-guest: all guest-image $(BUILD)/tests/test_criu_dump
	CELLBLOCK_BUILD=$(abspath $(BUILD)) CB_GUEST_FULL=1 \
	$(TEST_PYTHON) -m pytest -q -p no:cacheprovider tests/guest $(PYTEST_ARGS)

bench-guest: all guest-image
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) bench/guest.py --write $(BENCH_RESULTS)

# ---- fuzzing: libFuzzer harnesses in fuzz/ (issue 10) ------------------------
# Built with clang (Debian's clang-14 + libclang-rt-14-dev, installed by
# scripts/deps.sh) into their own tree, never mixed with the gcc build: the
# library sources again with coverage (fuzzer-no-link) and ASan+UBSan, one
# binary per harness.  LeakSanitizer is on in every run: a leak is a finding.
#   make fuzz          each harness for FUZZ_SECONDS (600) on its corpus
#   make fuzz-smoke    replay every saved input (fuzz/corpus/<t>/), then
#                      FUZZ_SMOKE_SECONDS (4) of fuzzing each; part of `make test`
#   make fuzz-merge    inputs of the long runs that add coverage -> fuzz/corpus/
#   FUZZ_TARGETS="wire frame" narrows any of them to some harnesses.
FUZZ_CC            ?= $(shell command -v clang-14 || command -v clang || echo clang-14)
FUZZ_BUILD         ?= build-fuzz
FUZZ_SECONDS       ?= 600
FUZZ_SMOKE_SECONDS ?= 4
FUZZ_TARGETS       ?= wire conn frame artifacts dispatch proxy_http proxy_body proxy_secrets
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# (-Wno-missing-field-initializers: clang flags libseccomp's own SCMP_A0() macro)
FUZZ_CFLAGS := $(filter-out -O% -fsanitize=%,$(CFLAGS_BASE)) -O1 $(FUZZ_SAN) \
               -Wno-missing-field-initializers
FUZZ_LIBS   := $(foreach l,kernel launcher tiers artifacts isolate,$(FUZZ_BUILD)/lib/libcb_$(l).a)
FUZZ_BINS    = $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

.PHONY: fuzz fuzz-smoke fuzz-merge fuzz-build
fuzz-build: $(FUZZ_BINS)

$(FUZZ_BUILD)/obj/%.o: %.c $(DEPS_OK) | $(BUILD)/.deps-fuzz-ok
	@mkdir -p $(@D)
	@echo "  FUZZCC  $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/lib/libcb_isolate.a: $(ISOLATE_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
$(FUZZ_BUILD)/lib/libcb_artifacts.a: $(ARTIFACTS_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
$(FUZZ_BUILD)/lib/libcb_tiers.a: $(TIERS_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
$(FUZZ_BUILD)/lib/libcb_launcher.a: $(LAUNCHER_SRC:%.c=$(FUZZ_BUILD)/obj/%.o) \
    $(FUZZ_BUILD)/obj/gen/launcher/criu_img.pb-c.o
$(FUZZ_BUILD)/obj/launcher/criu_img.o: $(CRIU_PB).h
$(FUZZ_BUILD)/obj/gen/launcher/criu_img.pb-c.o: $(CRIU_PB).c $(CRIU_PB).h | $(BUILD)/.deps-fuzz-ok
	@mkdir -p $(@D)
	@echo "  FUZZCC  $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -c $< -o $@
$(FUZZ_BUILD)/lib/libcb_kernel.a: $(KERNEL_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
$(FUZZ_BUILD)/lib/%.a:
	@mkdir -p $(@D)
	@rm -f $@
	@ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/common.h $(FUZZ_LIBS)
	@echo "  FUZZLD  $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -MMD -MP -o $@ $< \
	    $(FUZZ_LIBS) $(PKG_LIBS)

# the proxy's harnesses (fuzz_proxy_*) link its objects first, and its libraries
FUZZ_PROXY_A := $(FUZZ_BUILD)/lib/libcb_proxy.a
$(FUZZ_PROXY_A): $(PROXY_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
$(FUZZ_BUILD)/fuzz_proxy_%: fuzz/fuzz_proxy_%.c fuzz/common.h $(FUZZ_PROXY_A) $(FUZZ_LIBS)
	@echo "  FUZZLD  $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -MMD -MP -o $@ $< \
	    $(FUZZ_PROXY_A) $(FUZZ_LIBS) $(PKG_LIBS) $(PROXY_LIBS)

fuzz: $(FUZZ_BINS)
	@sh fuzz/run.sh long $(FUZZ_SECONDS) $(FUZZ_BUILD) $(FUZZ_TARGETS)

fuzz-smoke: $(FUZZ_BINS)
	@sh fuzz/run.sh smoke $(FUZZ_SMOKE_SECONDS) $(FUZZ_BUILD) $(FUZZ_TARGETS)

fuzz-merge: $(FUZZ_BINS)
	@sh fuzz/run.sh merge 0 $(FUZZ_BUILD) $(FUZZ_TARGETS)

-include $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.d) $(PROXY_SRC:%.c=$(FUZZ_BUILD)/obj/%.d) \
    $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%.d)

# ---- bench: the kernel under a hostile runner (issue 10) -------------------
# RSS and CPU of the kernel process during an output flood, an amplification
# and an ack flood, beside the stock ipykernel's; `make bench` runs it too.
.PHONY: bench-hostile
bench: bench-hostile
bench-hostile: all
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) bench/hostile.py --write $(BENCH_RESULTS)

# ---- warm start: the template's shared object (issue 21; docs/ARCHITECTURE.md) ------
# libcellblock-warm.so: what a template's fork calls to become a sandbox's runner
# (isolate/warm_enter.c and the isolate/ steps it shares with the cold path),
# loaded by runner/cb_warm.py with ctypes.  Position-independent, never sanitized
# (it runs inside a Python process that has no sanitizer runtime, like
# cellblock-init).  The launcher hands it to the template as a memfd.
WARM_SO      := $(BUILD)/libexec/cellblock/libcellblock-warm.so
WARM_SO_SRC  := isolate/warm_enter.c isolate/caps.c isolate/landlock.c isolate/childstep.c \
                isolate/util.c isolate/seccomp_install.c
WARM_SO_OBJ  := $(WARM_SO_SRC:%.c=$(BUILD)/obj-pic/%.o)

all: $(WARM_SO)

$(BUILD)/obj-pic/%.o: %.c $(DEPS_OK)
	@mkdir -p $(@D)
	@echo "  CC      $< (pic)"
	@$(CC) $(TIER_CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(WARM_SO): $(WARM_SO_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-z,defs -Wl,-z,now -o $@ $^

# The security suites and the IPython comparison tests with every kernel a
# template's fork (--warm wait: the first kernel waits for its template
# instead of starting cold).  `make test` covers the warm path too: its
# kernels are warm by default (--warm auto) once the first has built the
# template, and tests/security/test_warm.py starts them with --warm wait.
WARM_PYTEST ?= tests/security tests/integration/test_ipython.py \
               tests/integration/test_widgets_compare.py tests/notebooks
.PHONY: test-warm
test-warm: all
	CELLBLOCK_BUILD=$(abspath $(BUILD)) CB_TEST_KERNEL_ARGS="--warm wait" \
	$(TEST_PYTHON) -m pytest -q -p no:cacheprovider $(WARM_PYTEST) $(PYTEST_ARGS)

# Issue 21's figures beside ipykernel (warm, cold, ipykernel; bench/warm.py);
# `make bench` runs it too.
.PHONY: bench-warm
bench: bench-warm
bench-warm: all
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) bench/warm.py --write $(BENCH_RESULTS)

.PHONY: install-warm
install: install-warm
install-warm: all
	install -d $(DESTDIR)$(PREFIX)/libexec/cellblock
	install -m 644 $(WARM_SO) $(DESTDIR)$(PREFIX)/libexec/cellblock/

-include $(WARM_SO_OBJ:.o=.d)

# README's Options block is `cellblock-kernel --help`; a test compares them
.PHONY: readme-options
readme-options: all
	@$(TEST_PYTHON) scripts/readme-options.py $(KERNEL_BIN)

# ---- bench: snapshots (issue 20) -------------------------------------------
# checkpoint in place, rollback, pause/resume and fork (gvisor, as root) beside
# a cold start of the same session; writes its section of bench/RESULTS.md.
# Not part of `make bench` (it holds 1.5 GiB and starts six gVisor kernels).
.PHONY: bench-snapshots
bench-snapshots: all
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) bench/snapshots.py --write $(BENCH_RESULTS)

# the namespaces tier's pause, resume and fork by CRIU, where Debian's criu
# works: in the test guest (Debian's 6.1 kernel under TCG, so ratios only)
.PHONY: bench-snapshots-guest
bench-snapshots-guest: all guest-image
	CELLBLOCK_BUILD=$(abspath $(BUILD)) $(TEST_PYTHON) bench/snapshots.py --guest --write $(BENCH_RESULTS)

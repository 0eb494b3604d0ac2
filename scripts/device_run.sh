#!/usr/bin/env bash
# Runs on the GPU machine (the device tool), from the repository root:
#
#   bash scripts/device_run.sh STAGE...
#
# Stages (each bounded by `timeout`; a failed stage does not stop the rest):
#   bench     step benchmark of resnetlab and of the PyTorch peer's recipe
#             (fixed batch on the device, scripts/torch_step_bench.py), and the
#             peer's synthetic epoch (fp32 and --amp): speed ratios
#   quick     every plugin for 1 Fashion-MNIST epoch, 2 ranks sharing the GPU
#   gemini    gemini at unlimited, 1/2 and 1/4 of the measured footprint
#   gemini2   the same three runs with [gemini] max_prefetch (GEM_PREFETCH,
#             default 4): chunk moves on the copy stream, prefetched; the
#             budgets come from gem_full's peak when stage gemini ran in
#             this call, else GEM_PEAK, else gem2_full's own peak
#   mover     the copy-stream device tests: .dev/cudatest (round trip,
#             ordering, overlap) and .dev/memory_gpu.test (sync vs async vs
#             prefetch at two budgets: bit-identical weights, ms/step)
#   fmnist    every plugin 12 epochs beside the PyTorch peer (fp32 and amp,
#             in the background), then the interop stage
#   interop   scripts/interop_device.sh (PyTorch loads our exports and back)
#   resume    2 epochs straight == 1 epoch + resume in a new process + 1
#   shared2   torch_ddp_fp16 with 2 ranks sharing the GPU, 1 epoch
#   concurrent  two runs at once on the GPU (concurrent = true) give the
#             model digests they give one after another; with
#             share_devices = false they fall back to one after another
#   batches   issue 3's input pipeline: torch_ddp fp32 and fp16, BATCH_EPOCHS
#             (default 3) Fashion-MNIST epochs with device_batches = true (data
#             sets resident, batches built on the GPU) and false (host); epoch
#             times, wall times and model sha256 (must be equal) side by side
#   graphs    issue 3's cuda_graphs: resnetlab bench --graphs (ms/step eager vs
#             graph replay and the state sha256 of both, which must be equal),
#             the device test TestCUDAGraphsOnGPU (.dev/runner.test), then
#             GRAPH_EPOCHS (default 2) Fashion-MNIST epochs of torch_ddp fp32,
#             torch_ddp_fp16 and low_level_zero with cuda_graphs = true and
#             false: epoch times and model sha256 (must be equal) side by side
#   backends  20 training steps on the CPU backend and on the GPU, losses
#             compared (.dev/runner.test)
#   multigpu  issue 8 (2+ GPUs): every plugin on 1 GPU and one rank per GPU
#             over NCCL and over DeviceComm, MG_EPOCHS (12) epochs, scaling table
#   table80   issue 9's 80-epoch table: every plugin and both peers at once,
#             each resuming from its own checkpoint; call it again on the warm
#             machine until done (T80_DEADLINE seconds per call)
#   t80bg     table80 in its own process session: it trains on while later
#             calls run other stages (keep the machine warm: a call every 30 s)
#   t80wait   wait for t80bg's table80 (T80_WAIT seconds), progress each minute
#   comm      issue 4: the device communicator's GPU tests and all-reduce
#             benchmark (.dev/comm.test), then torch_ddp_fp16,
#             low_level_zero and gemini 1 epoch with 2 ranks sharing GPU 0 over
#             comm = "device"; with 2+ GPUs also one rank per GPU over
#             "device" and "nccl" (COMM_HOST=1 adds the old host-staged path)
#   fp16      issue 3's "fp16 step faster than fp32": PTX from kernels/cuda/src
#             with the staged kernels/cuda/next/*.cu, device tests, per-op
#             profiles and step benchmarks with the new and the old kernels
#             (about 2 minutes; needs .dev/cudatest too, see stage_fp16)
#
# Expects (carried in .dev/): resnetlab (CGO_ENABLED=0 build), torch_peer.py,
# fmnist/*.gz; test binaries for some stages, built here:
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .dev/comm.test ./comm       (comm)
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .dev/runner.test ./runner           (backends, graphs)
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .dev/cudatest ./kernels/cuda        (fp16, mover)
#   CGO_ENABLED=0 go test -c -tags gpu -ldflags='-s -w' -o .dev/memory_gpu.test ./memory   (mover)
# Everything printed goes to $OUT/device.log too; result JSON, logs and specs
# come back in $OUT/device.tgz.
set -u
OUT=${OUT:-/tmp/out}
EPOCHS=${EPOCHS:-12}
mkdir -p "$OUT" /tmp/w
B=${B:-$PWD/.dev/resnetlab}
export DATA=$PWD/.dev/fmnist PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
LOG=$OUT/device.log
exec > >(tee -a "$LOG") 2>&1
step() { echo; echo "=== $(date +%T) $*"; }

# spec NAME EPOCHS [TOML lines...]: writes a Fashion-MNIST spec to /tmp/w.
spec() {
	local name=$1 epochs=$2
	shift 2
	{
		echo "name = \"$name\""
		echo 'dataset = "fashion-mnist"'
		echo "epochs = $epochs"
		echo 'device = "cuda"'
		echo "checkpoint = \"/tmp/w/ckpt/{name}/{plugin}-{precision}-{gpus}\""
		echo "interval = $epochs"
		echo 'results_dir = "/tmp/w/results"'
		printf '%s\n' "$@"
	} >"/tmp/w/$name.toml"
	echo "/tmp/w/$name.toml"
}

# peak NAME: the first run's peak device bytes in the results of spec NAME.
peak() {
	python3 - "$1" <<'EOF'
import glob, json, sys
for f in sorted(glob.glob(f"/tmp/w/results/{sys.argv[1]}-*.json")):
    r = json.load(open(f))
    print(max(r.get("peak_device_bytes_per_rank") or [0])); break
EOF
}

# fp16_ptx STAGE: use the PTX the fp16 stage built in this call, if it ran
# (its switches too); call it from a subshell stage so it does not leak
# into later stages.
fp16_ptx() {
	if [ -f /tmp/w/fp16/env ]; then
		. /tmp/w/fp16/env
		echo "$1: kernels from the fp16 stage (RESNETLAB_PTX_DIR=$RESNETLAB_PTX_DIR)"
	else
		echo "$1: the embedded kernels"
	fi
}

# A subshell, as stage_graphs: the fp16 stage's PTX when it ran here.
stage_bench() (
	fp16_ptx bench
	step "machine"
	nvidia-smi -L
	nproc
	step "resnetlab bench: one rank, fixed batch of 100 on the device"
	timeout 120 "$B" bench --device cuda --steps 300 --warmup 30 --precision fp32,fp16,bf16
	timeout 60 "$B" bench --device cuda --steps 200 --warmup 20 --precision fp16 --plugin low_level_zero
	step "PyTorch peer's train step (scripts/torch_step_bench.py: fixed batch on the device, as resnetlab bench)"
	timeout 120 python3 scripts/torch_step_bench.py --steps 300 --warmup 30
	step "PyTorch peer, synthetic data, 1 epoch (speed)"
	timeout 120 python3 .dev/torch_peer.py --data synthetic --epochs 1
	timeout 120 python3 .dev/torch_peer.py --data synthetic --epochs 1 --amp
)

stage_quick() {
	step "every plugin, 1 Fashion-MNIST epoch, one after another"
	timeout 240 "$B" run --headless "$(spec quick 1 '[grid]' \
		'plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero", "gemini"]')"
	step "2 ranks sharing the GPU, 1 epoch"
	timeout 200 "$B" run --headless "$(spec shared 1 '[grid]' \
		'plugin = ["torch_ddp", "low_level_zero", "gemini"]' 'gpus = [2]')"
}

stage_shared2() {
	step "torch_ddp_fp16, 2 ranks sharing the GPU, 1 epoch"
	timeout 100 "$B" run --headless "$(spec shared2 1 '[[run]]' 'plugin = "torch_ddp_fp16"' 'gpus = 2')"
}

stage_concurrent() {
	step "concurrent = true: torch_ddp_fp16 and gemini at once on the GPU, then one after another"
	local runs=('[[run]]' 'plugin = "torch_ddp_fp16"' '[[run]]' 'plugin = "gemini"')
	timeout 200 "$B" run --headless "$(spec cc_at_once 1 'concurrent = true' "${runs[@]}")" |
		grep -E 'train at once|started|done:|FAILED'
	timeout 200 "$B" run --headless "$(spec cc_in_turn 1 "${runs[@]}")" | grep -E 'started|done:|FAILED'
	grep -H model_sha256 /tmp/w/results/cc_at_once-*.json /tmp/w/results/cc_in_turn-*.json
	timeout 200 "$B" run --headless "$(spec cc_no_share 1 'concurrent = true' 'share_devices = false' "${runs[@]}")" |
		grep -E 'one after another|started|done:|FAILED'
}

# The unlimited run builds its batches on the host, as the budgeted runs do
# (gemini's device_budget is not shared with a resident data set): its peak
# is then the model's footprint, without the ~205 MiB of data.
stage_gemini() {
	step "gemini budgets: unlimited, then 1/2 and 1/4 of its peak"
	timeout 120 "$B" run --headless "$(spec gem_full 1 'device_batches = false' '[[run]]' 'plugin = "gemini"')"
	local p
	p=$(peak gem_full)
	echo "gemini unlimited peak: $p bytes"
	for frac in 2 4; do
		timeout 200 "$B" run --headless "$(spec "gem_1_$frac" 1 '[[run]]' 'plugin = "gemini"' \
			'[gemini]' 'placement = "auto"' "device_budget = $((p / frac))")"
	done
}

# Issue 5's prefetch: stage_gemini's runs with the chunk moves on the copy
# stream and the next GEM_PREFETCH chunks uploaded ahead. The end-of-run
# log line "gemini rank 0: ... moves, ... prefetched, ... stalls" says how
# much traffic there was and how much of it the prefetch hid.
stage_gemini2() {
	local pf=${GEM_PREFETCH:-4} p
	step "gemini budgets with max_prefetch = $pf: unlimited, then 1/2 and 1/4 of the unlimited peak"
	timeout 120 "$B" run --headless "$(spec gem2_full 1 'device_batches = false' '[[run]]' 'plugin = "gemini"' '[gemini]' "max_prefetch = $pf")"
	p=${GEM_PEAK:-$(peak gem_full)}
	if [ -z "$p" ] || [ "$p" = 0 ]; then
		p=$(peak gem2_full)
	fi
	echo "budgets from an unlimited peak of $p bytes"
	for frac in 2 4; do
		timeout 220 "$B" run --headless "$(spec "gem2_1_$frac" 1 '[[run]]' 'plugin = "gemini"' \
			'[gemini]' 'placement = "auto"' "device_budget = $((p / frac))" "max_prefetch = $pf")"
	done
}

stage_mover() {
	step "copy-stream device tests"
	if [ -x .dev/cudatest ]; then
		timeout 120 .dev/cudatest -test.run Mover -test.v
	else
		echo "no .dev/cudatest (build: CGO_ENABLED=0 go test -c -o .dev/cudatest ./kernels/cuda)"
	fi
	if [ -x .dev/memory_gpu.test ]; then
		timeout 400 .dev/memory_gpu.test -test.run GPUPrefetch -test.v
	else
		echo "no .dev/memory_gpu.test (build: CGO_ENABLED=0 go test -c -tags gpu -o .dev/memory_gpu.test ./memory)"
	fi
}

stage_fmnist() {
	step "PyTorch peer fp32 and amp, $EPOCHS epochs (background), beside every plugin, then interop"
	(timeout 420 python3 .dev/torch_peer.py --data .dev/fmnist --epochs "$EPOCHS" >/tmp/w/peer_fp32.log 2>&1) &
	(timeout 420 python3 .dev/torch_peer.py --data .dev/fmnist --epochs "$EPOCHS" --amp >/tmp/w/peer_amp.log 2>&1) &
	stage_long &
	timeout 300 "$B" run --headless "$(spec fmnist "$EPOCHS" '[grid]' \
		'plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero", "gemini"]')"
	stage_interop
	wait
	tail -n 3 /tmp/w/peer_fp32.log /tmp/w/peer_amp.log
}

# The reference's 80 epochs for torch_ddp fp32 (issue 9), in the background:
# SIGTERM at the timeout checkpoints it, and `LONG_RESUME=E` continues it
# from epoch E in a later call on the same (warm) machine.
stage_long() {
	local plugins=${LONG_PLUGINS:-'"torch_ddp"'} f from=${LONG_RESUME:-0}
	if [ "$from" = auto ]; then # the latest checkpoint of the first run
		from=$(ls /tmp/w/ckpt/long80/*/ 2>/dev/null | sed -n 's/^model_\([0-9]*\)\.pth$/\1/p' | sort -n | tail -1)
		from=${from:-0}
	fi
	f=$(spec long80 80 'interval = 10' 'milestones = [20, 40, 60, 80]' "resume = $from" \
		'[grid]' "plugin = [$plugins]")
	sed -i '/^interval = 80$/d' "$f"
	timeout "${LONG_TIMEOUT:-480}" "$B" run --headless "$f" >/tmp/w/long80.log 2>&1
	tail -n 4 /tmp/w/long80.log
}

# Resume on the GPU: 2 epochs straight vs 1 epoch, a new process, resume 1,
# one more epoch; the model files must be bit-identical.
stage_resume() {
	step "resume on the GPU is bit-exact (torch_ddp fp16)"
	timeout 60 "$B" run --headless "$(spec rs_a 2 '[[run]]' 'plugin = "torch_ddp_fp16"')" | tail -n 1
	timeout 60 "$B" run --headless "$(spec rs_b 1 '[[run]]' 'plugin = "torch_ddp_fp16"')" | tail -n 1
	timeout 60 "$B" run --headless "$(spec rs_b 2 'resume = 1' '[[run]]' 'plugin = "torch_ddp_fp16"')" | tail -n 1
	grep -h model_sha256 /tmp/w/results/rs_a-*.json /tmp/w/results/rs_b-*.json
}

# t80_run PLUGIN: one 80-epoch run, from its latest checkpoint (if any).
t80_run() {
	local plugin=$1 f from
	from=$(ls /tmp/w/ckpt/t80_"$plugin"/*/ 2>/dev/null | sed -n 's/^model_\([0-9]*\)\.pth$/\1/p' | sort -n | tail -1)
	from=${from:-0}
	[ "$from" = 80 ] && return
	f=$(spec t80_"$plugin" 80 'interval = 10' 'milestones = [20, 40, 60, 80]' "resume = $from" \
		'[[run]]' "plugin = \"$plugin\"")
	sed -i '/^interval = 80$/d' "$f"
	exec "$B" run --headless "$f" >>/tmp/w/t80_"$plugin".log 2>&1
}

# Issue 9: four resnetlab processes and both PyTorch peers share the GPU. At
# the deadline every one gets SIGTERM: resnetlab checkpoints the epoch it is
# in, the peer (scripts/torch_peer_resume.py) saved its last epoch; the next
# call continues both.
stage_table80() {
	local p pids=() killer
	step "80-epoch table, every plugin beside the peers (deadline ${T80_DEADLINE:-540} s)"
	for p in fp32 amp; do
		grep -q '"summary"' /tmp/w/peer80_$p.log 2>/dev/null && continue
		python3 scripts/torch_peer_resume.py --data .dev/fmnist --epochs 80 \
			$([ $p = amp ] && echo --amp) --ckpt /tmp/w/peer80_$p.pt >>/tmp/w/peer80_$p.log 2>&1 &
		pids+=($!)
	done
	for p in ${T80_PLUGINS:-torch_ddp torch_ddp_fp16 low_level_zero gemini}; do
		t80_run $p &
		pids+=($!)
	done
	(sleep "${T80_DEADLINE:-540}" && kill -TERM "${pids[@]}" 2>/dev/null) &
	killer=$!
	wait "${pids[@]}"
	kill "$killer" 2>/dev/null
	for p in /tmp/w/t80_*.log /tmp/w/peer80_*.log; do
		echo "--- $p"
		tail -n 2 "$p"
	done
}

# t80bg: stage table80 in a new process session (setsid), so it outlives
# this call and trains while later calls run other stages or wait; its own
# log is /tmp/w/t80out/device.log. The machine must stay warm (a call at least every
# 30 s) or the runs and their checkpoints are lost.
# t80_running: whether a background table80 (t80bg) is still training.
t80_running() { pgrep -f 'device_run.sh table80' >/dev/null; }

stage_t80bg() {
	step "table80 in the background (deadline ${T80_DEADLINE:-540} s): /tmp/w/t80out/device.log"
	OUT=/tmp/w/t80out setsid bash "$0" table80 >/dev/null 2>&1 </dev/null &
	sleep 2
	t80_running && echo "t80bg: started" || echo "t80bg: did not start"
}

# t80wait: wait for the background table80 (up to T80_WAIT seconds, default
# 500), printing each run's last line every minute.
stage_t80wait() {
	local end=$((SECONDS + ${T80_WAIT:-500}))
	step "waiting for the background table80 (up to ${T80_WAIT:-500} s)"
	while t80_running && [ $SECONDS -lt $end ]; do
		sleep 60
		date +%T
		for f in /tmp/w/t80_*.log /tmp/w/peer80_*.log; do
			printf '%s: %s\n' "$(basename "$f")" "$(grep -E 'epoch|"epoch"' "$f" | tail -n 1 | cut -c1-150)"
		done
	done
	t80_running && echo "t80wait: still running" || echo "t80wait: table80 ended"
}

# commtable SPEC...: step time of each run of the given specs (1 epoch).
commtable() {
	python3 - "$@" <<'EOF'
import glob, json, sys
print(f"{'run':<40} {'comm':<12} {'epoch s':>8} {'step ms':>8} {'img/s':>8} {'peak MiB':>9} {'acc':>7}")
for spec in sys.argv[1:]:
    for f in sorted(glob.glob(f"/tmp/w/results/{spec}-*.json")):
        r = json.load(open(f))
        steps = 60000 // (r["batch_size"] * r["world_size"])
        peak = max(r.get("peak_device_bytes_per_rank") or [0]) / 2**20
        print(f"{spec + '/' + r['run']:<40} {r.get('comm', '?'):<12} {r['train_seconds']:>8.1f} "
              f"{1000 * r['train_seconds'] / steps:>8.1f} {r['images_per_second']:>8.0f} {peak:>9.1f} "
              f"{100 * r['final_test_acc']:>6.2f}% {r['status']}")
EOF
}

# Issue 4. Device tests and benchmark of comm.DeviceComm from the test
# binary, then 1 epoch of the three plugins that communicate most, with 2
# ranks sharing GPU 0 (CUDA_VISIBLE_DEVICES=0 makes them share on any
# machine). NCCL refuses two ranks on one GPU: its runs need 2 GPUs
# (kind nvidia-h200-x2); on one GPU the stage shows the refusal once.
stage_comm() {
	local T=$PWD/.dev/comm.test ngpu specs=() plugins c
	plugins='plugin = ["torch_ddp_fp16", "low_level_zero", "gemini"]'
	ngpu=$(nvidia-smi -L | wc -l)
	step "DeviceComm on the GPU: tests (2 and 3 ranks on GPU 0; with 2 GPUs across them, and NCCL) and benchmark"
	if [ -x "$T" ]; then
		timeout 300 "$T" -test.run 'Device|NCCL' -test.v
		timeout 240 "$T" -test.run '^$' -test.bench 'DeviceComm' -test.benchtime 30x
	else
		echo "missing $T: build it with CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .dev/comm.test ./comm"
	fi
	step "2 ranks sharing GPU 0, comm = device, 1 epoch"
	CUDA_VISIBLE_DEVICES=0 timeout 240 "$B" run --headless "$(spec comm_dev_shared 1 'comm = "device"' \
		'[grid]' "$plugins" 'gpus = [2]')"
	specs+=(comm_dev_shared)
	if [ "${COMM_HOST:-0}" = 1 ]; then
		step "2 ranks sharing GPU 0, comm = host (the old staged path), 1 epoch"
		CUDA_VISIBLE_DEVICES=0 timeout 400 "$B" run --headless "$(spec comm_host_shared 1 'comm = "host"' \
			'[grid]' "$plugins" 'gpus = [2]')"
		specs+=(comm_host_shared)
	fi
	if [ "$ngpu" -ge 2 ]; then
		for c in device nccl; do
			step "2 ranks on 2 GPUs, comm = $c, 1 epoch"
			CUDA_VISIBLE_DEVICES=0,1 timeout 240 "$B" run --headless "$(spec "comm_${c}_2gpu" 1 "comm = \"$c\"" \
				'[grid]' "$plugins" 'gpus = [2]')"
			specs+=("comm_${c}_2gpu")
		done
	else
		step "comm = nccl with 2 ranks on one GPU: refused with a clear error"
		CUDA_VISIBLE_DEVICES=0 timeout 60 "$B" run --headless "$(spec comm_nccl_shared 1 'comm = "nccl"' \
			'[[run]]' 'plugin = "torch_ddp_fp16"' 'gpus = 2')"
	fi
	step "comm stage: step times (host-staged, docs/benchmarks.md: 14.8 s torch_ddp_fp16, 21.3 s low_level_zero, ~150 s gemini per epoch)"
	commtable "${specs[@]}"
}

# Issue 3, fp16 vs fp32. Build here first (the device has no Go):
#   CGO_ENABLED=0 go build -o .dev/resnetlab ./cmd/resnetlab
#   CGO_ENABLED=0 go test -c -o .dev/cudatest ./kernels/cuda
# The staged kernels (kernels/cuda/next/*.cu: adam_copy, the fp16/bf16 conv
# loader v2) replace their src/ files in this copy only; PTX for every
# src/*.cu goes to /tmp/w/fp16/ptx and comes back in $OUT/fp16.tgz. If a
# staged file does not compile, the committed source is put back, so the
# run goes on with the old kernels (the Go side falls back when a kernel is
# missing). "old" below = RESNETLAB_CONV_V2=0 RESNETLAB_ADAM_COPY=0, the
# kernels before this change, on the same PTX.
stage_fp16() {
	local w=/tmp/w/fp16 f n rc root=$PWD
	local old=(env RESNETLAB_CONV_V2=0 RESNETLAB_ADAM_COPY=0 RESNETLAB_BN_FUSE=0)
	mkdir -p "$w/ptx" "$w/orig"
	echo "export RESNETLAB_PTX_DIR=$w/ptx" >"$w/env"
	step "fp16: PTX (kernels/cuda/src + next)"
	for f in kernels/cuda/next/*.cu; do
		[ -f "$f" ] || continue # nothing staged: PTX of src/ as committed
		n=$(basename "$f")
		cp "kernels/cuda/src/$n" "$w/orig/$n" 2>/dev/null
		cp "$f" "kernels/cuda/src/$n"
	done
	timeout 150 bash kernels/cuda/gen.sh "$w/ptx" >"$w/gen.log" 2>&1
	grep -E "^==|error" "$w/gen.log" | head -20
	for f in "$w"/orig/*.cu; do
		n=$(basename "$f" .cu)
		if [ ! -s "$w/ptx/$n.ptx" ]; then
			echo "fp16: staged $n.cu did not compile: back to the committed source"
			cp "$f" "kernels/cuda/src/$n.cu"
			timeout 100 bash kernels/cuda/gen.sh "$w/ptx" >>"$w/gen.log" 2>&1
		fi
	done
	export RESNETLAB_PTX_DIR=$w/ptx
	step "fp16: device tests on that PTX"
	# One process per group, so a panic loses one group only. A new kernel
	# that fails its test is switched off for the rest of the stage.
	for f in 'PTX|VecOK' AdamStepCopy LossAndNonFinite ProfileRecords ConvLoader ConvMatches ConvDet \
		'AdamMatches|NonFinite' BNAct Graph ResNet18Trains Augment; do
		(cd kernels/cuda && timeout 60 "$root/.dev/cudatest" -test.v -test.run "$f" >>"$w/test.log" 2>&1) && continue
		echo "--- FAIL: group $f" | tee -a "$w/test.log"
		# $w/env carries the switches to later stages (source it).
		case $f in
		AdamStepCopy) export RESNETLAB_ADAM_COPY=0 && echo "export RESNETLAB_ADAM_COPY=0" >>"$w/env" &&
			echo "fp16: adam_copy off (RESNETLAB_ADAM_COPY=0) from here on" ;;
		ConvLoader | ConvMatches) export RESNETLAB_CONV_V2=0 && echo "export RESNETLAB_CONV_V2=0" >>"$w/env" &&
			echo "fp16: conv loader v2 off (RESNETLAB_CONV_V2=0) from here on" ;;
		BNAct) export RESNETLAB_BN_FUSE=0 && echo "export RESNETLAB_BN_FUSE=0" >>"$w/env" &&
			echo "fp16: fused BN+ReLU off (RESNETLAB_BN_FUSE=0) from here on" ;;
		esac
	done
	grep -E "^(--- FAIL|FAIL|ok|PASS)|--- SKIP|panic|differs|bit-identical|relative error|loss " "$w/test.log" | head -40
	step "fp16: train step, test net (ms/step device time; new kernels, then old)"
	(cd kernels/cuda && timeout 60 "$root/.dev/cudatest" -test.run '^$' -test.bench 'ResNet18Step' -test.benchtime 50x 2>&1 |
		grep -E "ms/step|FAIL|panic" | sed 's/^/new  /')
	(cd kernels/cuda && RESNETLAB_CONV_VEC=0 timeout 60 "$root/.dev/cudatest" -test.run '^$' -test.bench 'ResNet18Step' -test.benchtime 50x 2>&1 |
		grep -E "ms/step|FAIL|panic" | sed 's/^/novec /')
	(cd kernels/cuda && "${old[@]}" timeout 60 "$root/.dev/cudatest" -test.run '^$' -test.bench 'ResNet18Step' -test.benchtime 50x 2>&1 |
		grep -E "ms/step|FAIL|panic" | sed 's/^/old  /')
	step "augment: batch of 100 built on the device vs the host path (us/call)"
	(cd kernels/cuda && timeout 60 "$root/.dev/cudatest" -test.run '^$' -test.bench 'AugmentBatch' -test.benchtime 200x 2>&1 |
		grep -E "ns/op|us/|FAIL|panic")
	step "fp16: per-op profile of the test net's step (new kernels, then old)"
	(cd kernels/cuda && timeout 60 "$root/.dev/cudatest" -test.run '^$' -test.bench 'ProfileResNet18' -test.benchtime 1x >"$w/profile_new.log" 2>&1)
	(cd kernels/cuda && "${old[@]}" timeout 60 "$root/.dev/cudatest" -test.run '^$' -test.bench 'ProfileResNet18' -test.benchtime 1x >"$w/profile_old.log" 2>&1)
	awk '/^== .*eager/ {print} / graph by op \(/ {p = 1} p {print} /  total$/ {p = 0}' "$w/profile_new.log"
	echo "old kernels:"
	awk '/^== .*eager/ {print} / graph by op \(/ {p = 1} p {print} /  total$/ {p = 0}' "$w/profile_old.log" | grep -E "^==|Conv|Adam|Copy|BatchNorm|ReLU|Add|total"
	step "fp16: fp16 convolutions alone (us/call; new, then old)"
	(cd kernels/cuda && timeout 60 "$root/.dev/cudatest" -test.run '^$' -test.bench 'ConvResNet18/fp16' -test.benchtime 20x 2>&1 |
		grep -E "us/call" | sed 's/^/new  /')
	(cd kernels/cuda && "${old[@]}" timeout 60 "$root/.dev/cudatest" -test.run '^$' -test.bench 'ConvResNet18/fp16' -test.benchtime 20x 2>&1 |
		grep -E "us/call" | sed 's/^/old  /')
	step "fp16: resnetlab bench (the engine's step) with --profile, new kernels, then old"
	timeout 90 "$B" bench --device cuda --steps 200 --warmup 20 --precision fp32,fp16 --profile 10 >"$w/bench_new.log" 2>&1
	rc=$?
	head -4 "$w/bench_new.log"
	awk '/profile:/ {print} / by op \(/ {p = 1} p {print} /  total$/ {p = 0}' "$w/bench_new.log"
	echo "bench exit $rc"
	"${old[@]}" timeout 60 "$B" bench --device cuda --steps 200 --warmup 20 --precision fp32,fp16 2>&1 | sed 's/^/old  /'
	unset RESNETLAB_PTX_DIR RESNETLAB_ADAM_COPY RESNETLAB_CONV_V2
	tar -C "$w" -czf "$OUT/fp16.tgz" ptx gen.log test.log profile_new.log profile_old.log bench_new.log
}

# ab_runs NAME KEY ORDER EPOCHS TIMEOUT PLUGINS: the grid of PLUGINS (a TOML
# array) for EPOCHS epochs with KEY = true and = false (specs NAME_true and
# NAME_false, in ORDER); per run its epoch times, images/s, peak memory and
# model sha256, and whether both settings gave the same model: they must,
# KEY changes how the step is computed, not what.
ab_runs() {
	local name=$1 key=$2 order=$3 e=$4 limit=$5 plugins=$6 on t0
	for on in $order; do
		t0=$(date +%s%N)
		timeout "$limit" "$B" run --headless "$(spec "${name}_$on" "$e" "$key = $on" '[grid]' "plugin = $plugins")" |
			grep -E "batches built|$key|error|FAIL" | sort -u
		echo "$key = $on: wall $((($(date +%s%N) - t0) / 1000000)) ms for all runs"
	done
	python3 - "$name" "$key" <<'EOF'
import glob, json, sys
name, key = sys.argv[1], sys.argv[2]
res = {}
for f in sorted(glob.glob(f"/tmp/w/results/{name}_*.json")):
    r = json.load(open(f))
    on = f.split(f"{name}_")[1].split("-")[0]
    secs = [e["seconds"] for e in r["per_epoch"]]
    res[(r["run"], on)] = r
    print(f"{r['run']:24} {key}={on:5} epochs(s) {' '.join(f'{s:.2f}' for s in secs)} "
          f"img/s {r['images_per_second']:.0f} peak {max(r['peak_device_bytes_per_rank'])/2**20:.1f} MiB "
          f"acc {r.get('final_test_acc') or 0:.4f} sha {r['model_sha256'][:16]}")
for run in sorted({k[0] for k in res}):
    a, b = res.get((run, "true")), res.get((run, "false"))
    if a and b:
        print(f"{run}: model {'SAME' if a['model_sha256'] == b['model_sha256'] else 'DIFFERS'} with {key} true and false, "
              f"img/s x{a['images_per_second'] / b['images_per_second']:.2f}")
EOF
}

# Issue 3: batches built on the GPU from the resident data set versus on the
# host. Same seed and recipe, so each pair of runs must end with the same
# model file (bit for bit); the training epoch times measure the pipeline,
# the wall time adds setup (the data set upload) and the test passes.
# A subshell: the fp16 stage's PTX, when it ran here, is used without leaking
# into later stages.
stage_batches() (
	local e=${BATCH_EPOCHS:-3}
	step "device_batches = true vs false: torch_ddp fp32 and fp16, $e Fashion-MNIST epochs, one run at a time"
	fp16_ptx batches
	ab_runs batches device_batches "true false" "$e" 200 '["torch_ddp", "torch_ddp_fp16"]'
)

# Issue 3: 20 steps of the full model on the CPU backend and on the GPU from
# the same start, losses compared step by step (exact fp32 and fp16).
# Build here: CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .dev/runner.test ./runner
stage_backends() {
	step "20 training steps, CPU backend vs GPU"
	timeout 200 .dev/runner.test -test.run TwentyStepsCPUvsCUDA -test.v
}

# Issue 3: the compute part of each step (forward, loss, backward) replayed
# as a CUDA graph versus eager launches. Same seed and recipe, so each pair
# must end with the same model (bit for bit). A subshell, as stage_batches:
# the fp16 stage's PTX when it ran here.
stage_graphs() (
	local e=${GRAPH_EPOCHS:-2} p
	step "cuda_graphs: bench eager vs graph, device test, $e Fashion-MNIST epochs with cuda_graphs = true vs false"
	fp16_ptx graphs
	for p in torch_ddp low_level_zero; do
		timeout 120 "$B" bench --device cuda --plugin $p --steps 200 --warmup 20 --precision fp32,fp16 --graphs
	done
	timeout 200 .dev/runner.test -test.run CUDAGraphsOnGPU -test.v
	ab_runs graphs cuda_graphs "false true" "$e" 300 '["torch_ddp", "torch_ddp_fp16", "low_level_zero"]'
)

# Issue 8 (needs a kind of 2+ GPUs): every plugin with 1 rank and with one
# rank per GPU (NCCL, then DeviceComm over peer copies), MG_EPOCHS (default
# 12) Fashion-MNIST epochs; then per plugin: epoch time, images/s, scaling
# efficiency (images/s over N x the 1-GPU images/s), per-rank peak memory and
# accuracy. The batch stays 100 per rank (the reference's DDP semantics).
stage_multigpu() {
	local n e=${MG_EPOCHS:-12} c
	n=$(nvidia-smi -L | wc -l)
	if [ "$n" -lt 2 ]; then
		echo "multigpu: $n GPU here; this stage needs a kind of 2 or more GPUs"
		return
	fi
	step "every plugin on 1 GPU and on $n GPUs (one rank each), $e epochs"
	timeout 300 "$B" run --headless "$(spec mg_1 "$e" '[grid]' \
		'plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero", "gemini"]' 'gpus = [1]')" | grep -E 'done:|FAILED'
	for c in nccl device; do
		timeout 300 "$B" run --headless "$(spec "mg_${c}" "$e" "comm = \"$c\"" 'share_devices = false' '[grid]' \
			'plugin = ["torch_ddp", "torch_ddp_fp16", "low_level_zero", "gemini"]' "gpus = [$n]")" | grep -E 'comm:|done:|FAILED'
	done
	python3 - "$n" <<'PY'
import glob, json, sys
n = int(sys.argv[1])
def load(spec):
    out = {}
    for f in glob.glob(f"/tmp/w/results/{spec}-*.json"):
        r = json.load(open(f)); out[(r["plugin"], r["precision"])] = r
    return out
one = load("mg_1")
print(f"{'plugin':<16}{'prec':<6}{'setup':<12}{'epoch s':>8}{'img/s':>9}{'scaling':>9}{'peak MiB/rank':>22}{'acc':>8}")
for key in sorted(one):
    for name, runs in [("1 GPU", one), (f"{n} nccl", load("mg_nccl")), (f"{n} device", load("mg_device"))]:
        r = runs.get(key)
        if not r:
            continue
        ep = [x["seconds"] for x in r["per_epoch"]]
        eff = r["images_per_second"] / (r["world_size"] * one[key]["images_per_second"])
        peaks = "/".join(f"{p / 2**20:.0f}" for p in r["peak_device_bytes_per_rank"])
        print(f"{key[0]:<16}{key[1]:<6}{name:<12}{sum(ep) / len(ep):>8.2f}{r['images_per_second']:>9.0f}"
              f"{eff:>9.2f}{peaks:>22}{100 * (r.get('final_test_acc') or 0):>7.2f}%")
PY
}

stage_interop() {
	step "interop with PyTorch"
	OUT=/tmp/w/interop timeout 170 bash scripts/interop_device.sh
}

for s in "$@"; do
	"stage_$s"
done
step "results"
"$B" compare /tmp/w/results
cd /tmp/w && tar czf "$OUT/device.tgz" results ./*.log ./*.toml interop 2>/dev/null
ls -la "$OUT"

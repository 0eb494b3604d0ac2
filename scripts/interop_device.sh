#!/usr/bin/env bash
# PyTorch interop check, run on the GPU machine (PyTorch + torchvision, no Go,
# no network). See docs/interop.md.
#
#   scripts/interop_device.sh [CKPT_DIR [EPOCH]]
#
# (1) resnetlab -> PyTorch: trains a 1-epoch Fashion-MNIST run with resnetlab
#     (or takes CKPT_DIR, a width-64 fashion-mnist checkpoint, and EPOCH,
#     default its latest), exports it as .safetensors and .pth, loads each into
#     torchvision resnet18(num_classes=10) with strict keys, and compares
#     PyTorch's test accuracy with `resnetlab eval` (within 0.1 point).
# (2) PyTorch -> resnetlab: trains torchvision resnet18 for 1 epoch, saves its
#     state_dict (.pth with CUDA tensors, .pth with CPU tensors, .safetensors),
#     imports each with `resnetlab import`, compares `resnetlab eval` with
#     PyTorch's accuracy (within 0.1 point), and checks that exporting the
#     import gives back bit-identical tensors.
#
# Inputs: the resnetlab binary at .dev/resnetlab ($RESNETLAB), Fashion-MNIST
# idx .gz files in .dev/fmnist ($FMNIST). Logs and a results table go to $OUT
# (default .dev/interop-out). Every step runs even when an earlier one failed;
# the exit status is 1 when any check failed.
# Preprocessing on both sides: 28x28 zero-padded by 2 to 32x32, grey copied to
# 3 channels, /255, no normalisation; test batch 128 in eval mode.

set -u
set -x
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${RESNETLAB:-$ROOT/.dev/resnetlab}
FMNIST=${FMNIST:-$ROOT/.dev/fmnist}
OUT=${OUT:-$ROOT/.dev/interop-out}
PY=${PYTHON:-python3}
GO_EPOCHS=${GO_EPOCHS:-1}
TORCH_EPOCHS=${TORCH_EPOCHS:-1}
TORCH_TRAIN_N=${TORCH_TRAIN_N:-60000} # fewer training images: a quick smoke test on a CPU
TOL=0.1
CKPT=${1:-}
EPOCH=${2:-}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/interop.XXXXXX)
exec > >(tee -a "$OUT/interop.log") 2>&1

# ---- environment ---------------------------------------------------------
nvidia-smi || true
"$PY" -c 'import sys, torch, torchvision; print(sys.version); print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "torchvision", torchvision.__version__)' || true
"$PY" -c 'import safetensors; print("safetensors", safetensors.__version__)' || echo "python safetensors not installed: the script's own reader/writer is used"
ls -la "$BIN" "$FMNIST" || true
chmod +x "$BIN" 2>/dev/null
"$BIN" help | head -3 || true

# ---- the Python side (written to WORK, no extra files in the repo) -------
cat > "$WORK/interop.py" <<'PYEOF'
"""Helpers for scripts/interop_device.sh: eval, train, compare."""
import gzip, json, os, struct, sys, time
import torch, torchvision

DEV = "cuda" if torch.cuda.is_available() else "cpu"
# Plain fp32 on both sides: no TF32 in PyTorch's convs and matmuls.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


def idx(path):
    op = gzip.open if os.path.exists(path + ".gz") else open
    with op(path + ".gz" if op is gzip.open else path, "rb") as f:
        b = f.read()
    ndim = b[3]
    dims = struct.unpack(">" + "I" * ndim, b[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(b[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def fmnist(root, split):
    pre = "train" if split == "train" else "t10k"
    x = idx(os.path.join(root, pre + "-images-idx3-ubyte")).float() / 255
    y = idx(os.path.join(root, pre + "-labels-idx1-ubyte")).long()
    x = torch.nn.functional.pad(x, (2, 2, 2, 2)).unsqueeze(1).repeat(1, 3, 1, 1)
    return x, y


ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}


def read_safetensors(path):
    try:
        from safetensors.torch import load_file
        print("reading", path, "with safetensors.torch.load_file")
        return load_file(path)
    except ImportError:
        pass
    print("reading", path, "with the script's safetensors reader")
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    print("safetensors metadata:", header.get("__metadata__"))
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = torch.frombuffer(bytearray(b[8 + n + s:8 + n + e]), dtype=ST_DTYPES[v["dtype"]]).reshape(v["shape"])
    return out


def write_safetensors(sd, path):
    sd = {k: v.detach().cpu().contiguous() for k, v in sd.items()}
    try:
        from safetensors.torch import save_file
        save_file(sd, path)
        return
    except ImportError:
        pass
    names = {v: k for k, v in ST_DTYPES.items()}
    header, blobs, off = {}, [], 0
    for k, t in sd.items():
        raw = t.numpy().tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load(path):
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    return torch.load(path, map_location="cpu", weights_only=True)


def check_state_dict(sd):
    """Key order, dtypes and shapes against torchvision's own state dict."""
    ref = torchvision.models.resnet18(num_classes=10).state_dict()
    problems = []
    if list(sd.keys()) != list(ref.keys()):
        problems.append("key order differs from torchvision's" if set(sd) == set(ref)
                        else "keys differ: missing %s, extra %s" % (sorted(set(ref) - set(sd)), sorted(set(sd) - set(ref))))
    for k, r in ref.items():
        t = sd.get(k)
        if t is not None and (t.dtype != r.dtype or t.shape != r.shape):
            problems.append("%s: %s %s, torchvision %s %s" % (k, t.dtype, tuple(t.shape), r.dtype, tuple(r.shape)))
    print("state dict check:", "OK (%d keys)" % len(sd) if not problems else problems)
    return problems


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 128):
            out = model(x[i:i + 128].to(DEV))
            correct += (out.argmax(1).cpu() == y[i:i + 128]).sum().item()
    return 100.0 * correct / len(x)


def cmd_eval(root, path, acc_file):
    sd = load(path)
    problems = check_state_dict(sd)
    model = torchvision.models.resnet18(num_classes=10)
    print(model.load_state_dict(sd, strict=True))
    x, y = fmnist(root, "test")
    acc = evaluate(model.to(DEV), x, y)
    print("pytorch accuracy of %s: %.4f %%" % (path, acc))
    open(acc_file, "w").write("%.4f\n" % acc)
    return 1 if problems else 0


def cmd_train(root, outdir, acc_file, epochs, n):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = fmnist(root, "train")
    x, y = x[:int(n)].to(DEV), y[:int(n)].to(DEV)
    for epoch in range(int(epochs)):
        model.train()
        perm = torch.randperm(len(x), device=DEV)
        t0, loss = time.time(), None
        for i in range(0, len(x) - 99, 100):
            b = perm[i:i + 100]
            loss = torch.nn.functional.cross_entropy(model(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("torch epoch %d: last loss %.4f, %.1f s" % (epoch + 1, loss.item(), time.time() - t0))
    xt, yt = fmnist(root, "test")
    acc = evaluate(model, xt, yt)
    print("pytorch accuracy after %s epoch(s): %.4f %%" % (epochs, acc))
    open(acc_file, "w").write("%.4f\n" % acc)
    sd = model.state_dict()
    torch.save(sd, os.path.join(outdir, "torch_cuda.pth"))  # tensors as they are (on the GPU)
    torch.save({k: v.cpu() for k, v in sd.items()}, os.path.join(outdir, "torch_cpu.pth"))
    write_safetensors(sd, os.path.join(outdir, "torch.safetensors"))
    return 0


def cmd_compare(a, b):
    """Bit-identical tensors with the same names, dtypes and shapes."""
    sa, sb = load(a), load(b)
    bad = [k for k in sa if k not in sb or sa[k].dtype != sb[k].dtype or sa[k].shape != sb[k].shape
           or not torch.equal(sa[k].cpu(), sb[k].cpu())]
    bad += [k for k in sb if k not in sa]
    print("compare %s %s: %s" % (a, b, "identical (%d tensors)" % len(sa) if not bad else "differ at %s" % bad[:10]))
    return 1 if bad else 0


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    sys.exit({"eval": cmd_eval, "train": cmd_train, "compare": cmd_compare}[cmd](*args))
PYEOF

# ---- helpers -------------------------------------------------------------
ROWS=()
FAILED=0
# row NAME PYTORCH_ACC RESNETLAB_ACC: compares within TOL and records a line.
row() {
	local name=$1 pt=$2 rl=$3 status diff=""
	if [ -n "$pt" ] && [ -n "$rl" ]; then
		diff=$(awk -v a="$pt" -v b="$rl" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.2f", d }')
		if awk -v d="$diff" -v t="$TOL" 'BEGIN { exit !(d <= t + 1e-9) }'; then status=PASS; else status=FAIL; fi
	else
		status=ERROR
	fi
	[ "$status" = PASS ] || FAILED=1
	ROWS+=("$(printf '%-50s %10s %10s %6s  %s' "$name" "${pt:--}" "${rl:--}" "${diff:--}" "$status")")
}
# check NAME CMD...: a yes/no check as a table line.
check() {
	local name=$1 status=FAIL
	shift
	if "$@"; then status=PASS; else FAILED=1; fi
	ROWS+=("$(printf '%-50s %10s %10s %6s  %s' "$name" - - - "$status")")
}
# go_eval DIR [EPOCH]: resnetlab's accuracy in percent, or "" on failure.
go_eval() {
	local log="$OUT/eval-$(basename "$1")${2:+-$2}.log"
	"$BIN" eval -c "$1" ${2:+-e "$2"} --dataset fashion-mnist --data "$FMNIST" --device auto >"$log" 2>&1
	cat "$log" >&2
	sed -n 's/^Accuracy of the model on the test images: \([0-9.]*\) %$/\1/p' "$log"
}
pt_eval() { # FILE: PyTorch's accuracy in percent, or ""
	local acc="$WORK/acc-$(basename "$1")"
	rm -f "$acc"
	"$PY" "$WORK/interop.py" eval "$FMNIST" "$1" "$acc" >&2 || echo "pytorch eval of $1 reported a problem" >&2
	cat "$acc" 2>/dev/null
}

# ---- (1) resnetlab -> PyTorch --------------------------------------------
if [ -z "$CKPT" ]; then
	CKPT=$WORK/ckpt-go
	cat >"$WORK/go.toml" <<EOF
name = "interop"
dataset = "fashion-mnist"
data_dir = "$FMNIST"
in_channels = 3
epochs = $GO_EPOCHS
batch_size = 100
checkpoint = "$CKPT"
interval = 1
results_dir = "$OUT/results"
device = "auto"
[[run]]
plugin = "torch_ddp"
precision = "fp32"
gpus = 1
EOF
	cat "$WORK/go.toml"
	"$BIN" run --headless "$WORK/go.toml" 2>&1 | tee "$OUT/go-train.log"
	EPOCH=$GO_EPOCHS
fi
GO_ACC=$(go_eval "$CKPT" "$EPOCH")
for f in model.safetensors model.pth; do
	"$BIN" export -c "$CKPT" ${EPOCH:+-e "$EPOCH"} -o "$WORK/$f" 2>&1 | tee -a "$OUT/export.log"
	row "resnetlab -> ${f#model.} -> torchvision" "$(pt_eval "$WORK/$f")" "$GO_ACC"
done

# ---- (2) PyTorch -> resnetlab --------------------------------------------
mkdir -p "$WORK/torch"
"$PY" "$WORK/interop.py" train "$FMNIST" "$WORK/torch" "$WORK/acc-torch" "$TORCH_EPOCHS" "$TORCH_TRAIN_N" 2>&1 | tee "$OUT/torch-train.log"
PT_ACC=$(cat "$WORK/acc-torch" 2>/dev/null)
for f in torch_cuda.pth torch_cpu.pth torch.safetensors; do
	dir=$WORK/ckpt-${f%%.*}-${f##*.}
	"$BIN" import "$WORK/torch/$f" -o "$dir" -e 1 --dataset fashion-mnist 2>&1 | tee -a "$OUT/import.log"
	row "torchvision -> $f -> resnetlab" "$PT_ACC" "$(go_eval "$dir" 1)"
	"$BIN" export -c "$dir" -e 1 -o "$dir/back.pth" 2>&1 | tee -a "$OUT/export.log"
	check "  $f -> import -> export: identical" "$PY" "$WORK/interop.py" compare "$WORK/torch/$f" "$dir/back.pth"
done

# ---- table ---------------------------------------------------------------
set +x
{
	echo
	echo "Fashion-MNIST test accuracy (%), tolerance $TOL point"
	printf '%-50s %10s %10s %6s  %s\n' check pytorch resnetlab diff status
	printf '%s\n' "${ROWS[@]}"
	gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
	echo "ran on: ${gpu:-the CPU (no GPU found)}"
} | tee "$OUT/results.txt"
rm -rf "$WORK"
exit $FAILED

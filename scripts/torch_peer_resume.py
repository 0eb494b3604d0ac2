"""The PyTorch peer: the reference recipe in plain PyTorch (torchvision resnet18, the
reference augmentation, Adam, MultiStepLR). --ckpt FILE saves the whole training state
after every epoch (atomically) and resumes from it when present, so an 80-epoch peer run
can span several device calls. The recipe, the data path, the augmentation and the
printed lines are those of the project's original peer script, line for line; the
RNG states (torch CPU, CUDA, numpy) are saved and restored, so a resumed run draws the
same random numbers as an uninterrupted one. Added lines are marked "# resume".

  python3 torch_peer_resume.py --data DIR --epochs 80 [--amp] --ckpt /tmp/w/peer_fp32.pt
"""
import argparse, gzip, json, os, time
import numpy as np, torch, torchvision
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--data", default="synthetic")
ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--amp", action="store_true")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--ckpt", default="")  # resume
a = ap.parse_args()
torch.manual_seed(a.seed); np.random.seed(a.seed)
torch.backends.cudnn.benchmark = True
dev = "cuda" if torch.cuda.is_available() else "cpu"

def idx(path):
    with gzip.open(path) as f:
        b = f.read()
    nd = b[3]; dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)

if a.data == "synthetic":
    xtr = np.random.randint(0, 255, (50000, 3, 32, 32), np.uint8); ytr = np.random.randint(0, 10, 50000)
    xte, yte = xtr[:10000], ytr[:10000]
else:
    def load(p):
        x = idx(os.path.join(a.data, p + "-images-idx3-ubyte.gz"))
        x = np.pad(x, ((0, 0), (2, 2), (2, 2)))[:, None].repeat(3, 1)  # 28->32, grey->3 channels
        return x, idx(os.path.join(a.data, p + "-labels-idx1-ubyte.gz")).astype(np.int64)
    (xtr, ytr), (xte, yte) = load("train"), load("t10k")
xtr, ytr = torch.tensor(xtr, device=dev), torch.tensor(ytr, device=dev)
xte, yte = torch.tensor(xte, device=dev), torch.tensor(yte, device=dev)

def augment(x):  # Pad(4) + RandomCrop(32) + RandomHorizontalFlip, on the GPU
    n = x.shape[0]; p = F.pad(x, (4, 4, 4, 4))
    i = torch.randint(0, 9, (n,), device=dev); j = torch.randint(0, 9, (n,), device=dev)
    r = torch.arange(32, device=dev)
    rows = (i[:, None] + r)[:, None, :, None].expand(n, 3, 32, 32)
    cols = (j[:, None] + r)[:, None, None, :].expand(n, 3, 32, 32)
    out = p[torch.arange(n, device=dev)[:, None, None, None], torch.arange(3, device=dev)[None, :, None, None], rows, cols]
    flip = torch.rand(n, device=dev) < 0.5
    out[flip] = out[flip].flip(3)
    return out

m = torchvision.models.resnet18(num_classes=10).to(dev)
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[20, 40, 60, 80], gamma=1 / 3)
scaler = torch.amp.GradScaler(dev, enabled=a.amp)
print(json.dumps({"args": {"amp": a.amp, "data": a.data, "epochs": a.epochs, "seed": a.seed}}), flush=True)  # resume: for reports of a cut log
start, spent = 0, 0.0  # resume
if a.ckpt and os.path.exists(a.ckpt):  # resume
    st = torch.load(a.ckpt, weights_only=False)  # resume
    m.load_state_dict(st["model"]); opt.load_state_dict(st["opt"])  # resume
    sched.load_state_dict(st["sched"]); scaler.load_state_dict(st["scaler"])  # resume
    torch.set_rng_state(st["rng"]); np.random.set_state(st["np_rng"])  # resume
    if dev == "cuda": torch.cuda.set_rng_state(st["cuda_rng"])  # resume
    start, spent = st["epoch"], st["spent"]  # resume
    print(json.dumps({"resumed_from": start}), flush=True)  # resume
t0 = time.perf_counter() - spent  # resume: total_s counts the earlier calls' time
for ep in range(start, a.epochs):  # resume: from the saved epoch
    m.train(); te = time.perf_counter(); perm = torch.randperm(len(xtr), device=dev)
    for s in range(len(xtr) // 100):
        b = perm[s * 100:(s + 1) * 100]
        x = augment(xtr[b]).float() / 255
        with torch.autocast(dev, dtype=torch.float16, enabled=a.amp):
            loss = F.cross_entropy(m(x), ytr[b])
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
    sched.step()
    m.eval(); correct = 0
    with torch.no_grad():
        for s in range(0, len(xte), 128):
            correct += (m(xte[s:s + 128].float() / 255).argmax(1) == yte[s:s + 128]).sum().item()
    torch.cuda.synchronize() if dev == "cuda" else None
    line = json.dumps({"epoch": ep + 1, "loss": round(loss.item(), 4), "test_acc": correct / len(xte),
                       "epoch_s": round(time.perf_counter() - te, 2)})  # resume: printed after the save
    if a.ckpt:  # resume: the state after this epoch, written atomically
        st = {"model": m.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
              "scaler": scaler.state_dict(), "rng": torch.get_rng_state(), "np_rng": np.random.get_state(),
              "cuda_rng": torch.cuda.get_rng_state() if dev == "cuda" else None,
              "epoch": ep + 1, "spent": time.perf_counter() - t0}
        torch.save(st, a.ckpt + ".tmp"); os.replace(a.ckpt + ".tmp", a.ckpt)
    print(line, flush=True)  # resume: a kill between save and print loses a line, never repeats one
print(json.dumps({"summary": True, "amp": a.amp, "data": a.data, "epochs": a.epochs,
                  "total_s": round(time.perf_counter() - t0, 2), "final_acc": correct / len(xte)}), flush=True)

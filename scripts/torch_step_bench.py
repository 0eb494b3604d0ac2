"""Train-step time of the PyTorch peer's recipe, the way `resnetlab bench` times ours.

scripts/torch_peer_resume.py times whole epochs (its input pipeline and test pass
included); a step ratio needs the bare step: torchvision resnet18(num_classes=10),
Adam lr 1e-3, cross entropy, batch 100 of 3x32x32 already on the GPU, forward + backward
+ optimizer step (+ GradScaler with --amp), cuDNN benchmark mode as the peer sets it.
Warm-up steps first, then the median of per-step times (CUDA events) and the mean over
the whole timed run with the device synchronised. Prints one JSON line per precision.

  python3 scripts/torch_step_bench.py [--steps 300] [--warmup 30]
"""
import argparse, json, statistics
import torch, torchvision
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--warmup", type=int, default=30)
a = ap.parse_args()
torch.backends.cudnn.benchmark = True
dev = "cuda"


def bench(amp):
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).to(dev).train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(dev, enabled=amp)
    x = torch.rand(100, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (100,), device=dev)

    def step():
        with torch.autocast(dev, dtype=torch.float16, enabled=amp):
            loss = F.cross_entropy(m(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    t0 = torch.cuda.Event(enable_timing=True)
    t1 = torch.cuda.Event(enable_timing=True)
    whole0 = torch.cuda.Event(enable_timing=True)
    whole1 = torch.cuda.Event(enable_timing=True)
    whole0.record()
    for _ in range(a.steps):
        t0.record()
        step()
        t1.record()
        t1.synchronize()
        times.append(t0.elapsed_time(t1))
    whole1.record()
    torch.cuda.synchronize()
    return {"peer_step": "amp" if amp else "fp32", "torch": torch.__version__, "steps": a.steps,
            "median_ms": round(statistics.median(times), 3),
            "mean_ms": round(whole0.elapsed_time(whole1) / a.steps, 3),
            "images_per_s": round(100 * 1000 / statistics.median(times))}


for amp in (False, True):
    print(json.dumps(bench(amp)), flush=True)

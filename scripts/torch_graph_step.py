"""The strongest PyTorch peer of `resnetlab bench --graphs`: the whole train step captured.

torchvision resnet18(num_classes=10), batch 100 of 3x32x32 already on the GPU,
channels_last, autocast (bf16 or fp16; fp32 with --dtype fp32), cross entropy, backward
and Adam(lr 1e-3, capturable=True): forward, backward and the optimizer step in one
torch.cuda.graph, replayed per step. cuDNN benchmark mode. Warm-up steps on a side stream
first (as PyTorch's graph recipe needs), then the mean over the timed replays with the
device synchronised. Prints one JSON line per dtype.

  python3 scripts/torch_graph_step.py [--steps 300] [--warmup 30] [--dtype bf16,fp16,fp32]
"""
import argparse, json, time
import torch, torchvision
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--warmup", type=int, default=30)
ap.add_argument("--dtype", default="bf16,fp32")
a = ap.parse_args()
torch.backends.cudnn.benchmark = True
dev = "cuda"
dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}


def bench(name):
    torch.manual_seed(0)
    dt = dtypes[name]
    m = torchvision.models.resnet18(num_classes=10).to(dev).to(memory_format=torch.channels_last).train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, capturable=True)
    x = torch.rand(100, 3, 32, 32, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (100,), device=dev)

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast(dev, dtype=dt or torch.float32, enabled=dt is not None):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(max(a.warmup, 3)):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        loss = step()
    for _ in range(a.warmup):
        g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        g.replay()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    print(json.dumps({"peer": "torch_graph_step", "dtype": name, "channels_last": True,
                      "ms_per_step": round(ms, 4), "loss": float(loss), "steps": a.steps,
                      "torch": torch.__version__}), flush=True)


for name in a.dtype.split(","):
    bench(name)

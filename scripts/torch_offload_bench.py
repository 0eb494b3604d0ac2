"""ZeRO-Offload-style PyTorch step: the peer resnetlab's budgeted Gemini is
measured against (docs/benchmarks.md, "Gemini under a device budget").

torchvision resnet18 (10 classes), batch 100 of 3x32x32, the fp16 model on
the GPU; fp32 master weights and torch.optim.Adam(foreach=True) on the CPU
(torch.set_num_threads); every step the fp16 gradients go down into pinned
fp32 buffers and the updated master weights go back up into the fp16 model.
A static loss scale of 1024 (the step never overflows at lr 1e-3 here).
Prints the mean wall time of the timed steps and the peak device memory
(torch.cuda.max_memory_allocated).

    python3 scripts/torch_offload_bench.py --steps 50 --warmup 5 --threads 16
"""
import argparse
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--batch", type=int, default=100)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = torchvision.models.resnet18(num_classes=10).to(dev).half()
    params = [p for p in model.parameters()]
    master = [p.detach().float().cpu().pin_memory() for p in params]
    grads = [torch.empty_like(m).pin_memory() for m in master]
    for m, g in zip(master, grads):
        m.grad = g
    opt = torch.optim.Adam(master, lr=1e-3, foreach=True)
    up = [torch.empty(p.shape, dtype=torch.float32, device=dev) for p in params]
    x = torch.randn(a.batch, 3, 32, 32, device=dev).half()
    y = torch.randint(0, 10, (a.batch,), device=dev)
    scale = 1024.0
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        for p in params:
            p.grad = None
        loss = loss_fn(model(x).float(), y)
        (loss * scale).backward()
        for p, g in zip(params, grads):  # gradients down, as fp32
            g.copy_(p.grad.float(), non_blocking=True)
        torch.cuda.synchronize()
        for g in grads:
            g.mul_(1.0 / scale)
        opt.step()
        for p, m, u in zip(params, master, up):  # weights up
            u.copy_(m, non_blocking=True)
            p.data.copy_(u)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / a.steps
    print(f"torch offload: {1000 * dt:.2f} ms/step, peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB, "
          f"threads {a.threads}, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cross-check torchfmt's files against real PyTorch (run where torch is installed).

  check_torch.py load FILE.pth [--safetensors FILE.safetensors] [--model] [--out OUT.pth]
      torch.load(FILE, weights_only=True). With --safetensors, compare every tensor
      (name, dtype, shape, exact bits) with that file, parsed here by a small reader
      independent of the Go code (and by the safetensors package when installed).
      With --model, load the state dict strictly into
      torchvision.models.resnet18(num_classes=10) and run a forward pass. With --out,
      torch.save the state dict (the model's, with --model) for the import direction.
  check_torch.py keys GOLDEN.txt
      compare the golden key/dtype/shape list with real torchvision resnet18.
  check_torch.py fixtures DIR
      write small real-torch files (views, shared storages, parameters, all dtypes,
      protocol 2 and 4) plus safetensors files of the expected values, for Go tests.
Exit status 0 and a final "OK" line mean every check passed.
"""
import json
import struct
import sys
from collections import OrderedDict

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}


def read_safetensors(path):
    """Minimal independent safetensors reader: header length, JSON, raw bytes."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = OrderedDict()
    for name, e in header.items():
        b, end = e["data_offsets"]
        raw = bytearray(blob[8 + n + b:8 + n + end])
        t = torch.frombuffer(raw, dtype=DTYPES[e["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"])
    try:
        from safetensors.torch import load_file
    except ImportError:
        return out
    lib = load_file(path)
    assert set(lib) == set(out), "safetensors package sees different keys"
    for k, v in lib.items():
        assert same(v, out[k]), f"safetensors package disagrees on {k}"
    return out


def same(a, b):
    """Exact equality including dtype, shape and bit patterns (NaN == NaN)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.contiguous(), b.contiguous()
    if a.dtype.is_floating_point:
        bits = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[a.dtype]
        return torch.equal(a.view(bits), b.view(bits))
    return torch.equal(a, b)


def cmd_load(args):
    import argparse
    p = argparse.ArgumentParser(prog="check_torch.py load")
    p.add_argument("pth")
    p.add_argument("--safetensors")
    p.add_argument("--model", action="store_true")
    p.add_argument("--out")
    o = p.parse_args(args)
    sd = torch.load(o.pth, weights_only=True)
    print(f"torch {torch.__version__} loaded {len(sd)} tensors from {o.pth}")
    if o.safetensors:
        ref = read_safetensors(o.safetensors)
        assert list(sd) == list(ref), f"keys or their order differ: {sorted(set(sd) ^ set(ref))[:10]}"
        for k in ref:
            assert same(sd[k], ref[k]), (f"{k}: torch.load gives {sd[k].dtype}{tuple(sd[k].shape)}, "
                                         f"safetensors {ref[k].dtype}{tuple(ref[k].shape)}, or values differ")
        print(f"all {len(ref)} tensors equal the safetensors file")
    if o.model:
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
        model.load_state_dict(sd, strict=True)
        for k, v in model.state_dict().items():
            assert same(v, sd[k]), f"model's {k} differs after load_state_dict"
        model.eval()
        with torch.no_grad():
            y = model(torch.ones(2, 3, 32, 32))
        assert y.shape == (2, 10) and torch.isfinite(y).all(), "forward pass failed"
        print(f"loaded strictly into torchvision resnet18(num_classes=10); forward pass gives {tuple(y.shape)}")
        sd = model.state_dict()
    if o.out:
        torch.save(sd, o.out)
        print(f"wrote {o.out}")


def cmd_keys(args):
    import torchvision
    want = []
    for line in open(args[0]):
        if line.strip() and not line.startswith("#"):
            name, dtype, shape = line.split()
            want.append((name, dtype, [] if shape == "[]" else [int(x) for x in shape.split(",")]))
    rev = {v: k for k, v in DTYPES.items()}
    got = [(k, rev[v.dtype], list(v.shape)) for k, v in torchvision.models.resnet18(num_classes=10).state_dict().items()]
    assert got == want, f"golden list differs from torchvision: first difference {next((g, w) for g, w in zip(got + [None] * 200, want + [None] * 200) if g != w)}"
    print(f"golden list matches torchvision's {len(got)} keys, dtypes and shapes")


def cmd_fixtures(args):
    import os
    d = args[0]
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    base = torch.randn(4, 6)
    sd = OrderedDict()
    sd["f32"] = torch.randn(3, 5)
    sd["f16"] = torch.randn(2, 3).half()
    sd["bf16"] = torch.randn(7).bfloat16()
    sd["f16_special"] = torch.tensor([0.0, -0.0, 65504.0, 1e-7, 6e-8, float("inf"), -float("inf")], dtype=torch.float16)
    sd["i64_scalar"] = torch.tensor(42, dtype=torch.int64)
    sd["i64_vec"] = torch.tensor([-3, 0, 2**40, -2**62], dtype=torch.int64)
    sd["base"] = base
    sd["transposed"] = base.t()          # non-contiguous view of base's storage
    sd["row_slice"] = base[1:3]          # shares base's storage at offset 6
    sd["strided"] = base[:, ::2]
    sd["param"] = torch.nn.Parameter(torch.randn(2, 2))  # pickled via _rebuild_parameter
    sd["empty"] = torch.zeros(0, 3)
    sd["expanded"] = torch.randn(3, 1).expand(3, 4)  # stride 0
    torch.save(sd, os.path.join(d, "torch_small.pth"))
    torch.save(sd, os.path.join(d, "torch_small_p4.pth"), pickle_protocol=4)
    write_expected(sd, os.path.join(d, "torch_small.safetensors"))
    torch.manual_seed(1)
    mod = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    mod.train()
    mod(torch.randn(2, 3, 5, 5))  # moves running stats and num_batches_tracked
    msd = mod.state_dict()        # an OrderedDict carrying _metadata (pickled with BUILD)
    torch.save(msd, os.path.join(d, "torch_module.pth"))
    write_expected(msd, os.path.join(d, "torch_module.safetensors"))
    print(f"fixtures written by torch {torch.__version__}")


def write_expected(sd, path):
    """Expected values as contiguous copies; the safetensors package when present."""
    plain = OrderedDict((k, v.detach().contiguous().clone()) for k, v in sd.items())
    try:
        from safetensors.torch import save_file
        save_file(plain, path, metadata={"source": "torch " + torch.__version__})
        return
    except ImportError:
        pass
    raise SystemExit("safetensors package needed for fixtures")


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("load", "keys", "fixtures"):
        raise SystemExit(__doc__)
    {"load": cmd_load, "keys": cmd_keys, "fixtures": cmd_fixtures}[sys.argv[1]](sys.argv[2:])
    print("OK")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes pickles.txt: pickles made by CPython's own pickler, each with the value it
encodes in a canonical text form, so the Go unpickler is checked against the real
thing. Run from this folder: python3 gen_pickles.py > pickles.txt"""
import pickle
import struct
from collections import OrderedDict


def canon(v):
    if v is None:
        return "None"
    if v is True or v is False:
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "f:" + struct.pack(">d", v).hex()
    if isinstance(v, str):
        return "s:" + v.encode().hex()
    if isinstance(v, bytes):
        return "b:" + v.hex()
    if isinstance(v, tuple):
        return "(" + "".join(canon(x) + "," for x in v) + ")"
    if isinstance(v, list):
        return "[" + "".join(canon(x) + "," for x in v) + "]"
    if isinstance(v, dict):
        return "{" + "".join(canon(k) + ":" + canon(x) + "," for k, x in v.items()) + "}"
    raise TypeError(type(v))


shared = [1, 2]
CASES = {
    "scalars": [None, True, False, 0, 255, 256, 65535, 65536, -1, -2**31, 2**31, 2**40, -2**63, 2**63 - 1, 1.5, -0.0, 1e300],
    "strings": ("", "x", "ünïcödé", "a" * 300),
    "tuples": ((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((), ((),))),
    "shared": {"a": shared, "b": shared, "c": (shared, shared)},
    "ordered": OrderedDict([("z", 1), ("a", (2, 3)), ("m", OrderedDict())]),
    "long_list": list(range(1001)),  # more than one APPENDS batch
    "nested": {"state": {0: {"step": 3, "lr": 0.001}}, "param_groups": [{"betas": (0.9, 0.999), "params": [0, 1]}]},
}
BYTES_CASES = {"bytes": [b"", b"\x00\xff", b"z" * 300]}

for proto in (2, 3, 4, 5):
    cases = dict(CASES)
    if proto >= 3:
        cases.update(BYTES_CASES)
    for name, v in cases.items():
        print(name, proto, pickle.dumps(v, protocol=proto).hex(), canon(v))

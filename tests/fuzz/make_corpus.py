#!/usr/bin/env python3
"""Writes the committed seed corpus of fuzz_transfer: valid descriptors of every
operation and malformed ones for each validation rule. Layout: the Header struct of
fuzz_transfer.cpp (56 bytes), then ndim int64 extents, then ndim int64 strides."""
import os
import struct
import sys

HEADER = struct.Struct("<BbBBHBBiiIIQQqBBHI")
INT, UINT, FLOAT, COMPLEX, BOOL = 0, 1, 2, 5, 6
CPU, CUDA, OPENCL = 1, 2, 4


def seed(op=0, shape=(3, 4), strides=None, code=FLOAT, bits=32, lanes=1, device=(CPU, 0), version=(1, 3),
         flags=0, byte_offset=0, data_offset=0, cast=(FLOAT, 64, 1), transfer_flags=0, dst_kind=0, ndim=None):
    ndim = len(shape) if ndim is None else ndim
    head = HEADER.pack(op, ndim, code, bits, lanes, 1 if strides is not None else 0, dst_kind, device[0], device[1],
                       version[0], version[1], flags, byte_offset, data_offset, cast[0], cast[1], cast[2],
                       transfer_flags)
    body = struct.pack(f"<{len(shape)}q", *shape)
    if strides is not None:
        body += struct.pack(f"<{len(strides)}q", *strides)
    return head + body


SEEDS = {
    # valid: one per operation and layout
    "view-contiguous-f32": seed(),
    "copy-transposed-f32": seed(op=1, strides=(1, 3)),
    "copy-negative-i16": seed(op=1, code=INT, bits=16, strides=(-4, -1), data_offset=64),
    "cast-i32-to-f64": seed(op=2, code=INT, bits=32, strides=(1, 3)),
    "cast-f64-to-bool": seed(op=2, code=FLOAT, bits=64, cast=(BOOL, 8, 1)),
    "legacy-u8": seed(op=3, code=UINT, bits=8, shape=(5, 7)),
    "abr-copy-c64-to-c128": seed(op=4, code=COMPLEX, bits=64, strides=(8, 2), cast=(COMPLEX, 128, 1)),
    "abr-copy-f64-to-i8-refused": seed(op=4, code=FLOAT, bits=64, cast=(INT, 8, 1)),  # same_kind, a copy's default
    "abr-copy-c128-to-f32-unsafe": seed(op=4, code=COMPLEX, bits=128, strides=(8, 2), cast=(FLOAT, 32, 1),
                                        transfer_flags=4 << 2),  # bits 2+: abr_transfer_options.casting
    "zero-d-bool": seed(op=1, code=BOOL, bits=8, shape=()),
    "zero-size": seed(op=1, shape=(0, 5)),
    "size-one-dims": seed(op=1, shape=(1, 6, 1), strides=(999, 2, -7)),
    "broadcast-zero-stride": seed(op=1, shape=(4, 4), strides=(0, 1)),
    "read-only-view": seed(flags=1),
    "require-contiguous": seed(strides=(1, 3), transfer_flags=2),
    "offset-view": seed(op=1, byte_offset=4096, data_offset=-8192),
    "lanes-4": seed(op=1, lanes=4, shape=(8,)),
    "view-to-opencl-disabled": seed(dst_kind=1),
    "view-to-cuda-disabled": seed(dst_kind=2),
    # malformed: each validation rule
    "ndim-negative": seed(ndim=-1, shape=()),
    "ndim-65": seed(ndim=65, shape=(1,) * 65),
    "extent-negative": seed(shape=(3, -4)),
    "elements-overflow": seed(shape=(1 << 62, 8)),
    "bytes-overflow": seed(code=COMPLEX, bits=128, shape=(1 << 60,)),
    "stride-overflow": seed(shape=(3, 4), strides=(1 << 62, 1 << 62)),
    "span-outside-arena": seed(op=1, shape=(1024, 1024), strides=(1024, 1)),
    "null-data": seed(op=1, data_offset=-(1 << 63)),
    "bits-zero": seed(bits=0),
    "code-unknown": seed(code=99),
    "lanes-zero": seed(lanes=0),
    "bool-16-bits": seed(code=BOOL, bits=16),
    "version-2": seed(version=(2, 0)),
    "flags-unknown": seed(flags=1 << 40),
    "device-unknown": seed(device=(99, 0), dst_kind=3),
    "device-id-negative": seed(device=(CPU, -1)),
    "byte-offset-huge": seed(op=1, byte_offset=(1 << 64) - 8),
    "cast-to-garbage": seed(op=2, cast=(77, 3, 0)),
    "abr-copy-zero-stride-dst": seed(op=4, shape=(2, 2), strides=(0, 0)),
}


def main(directory):
    os.makedirs(directory, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {directory}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))

import os
import sys

from setuptools import Extension, setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_build import locate  # noqa: E402

include_dir, library_dir = locate()
core_sources = ["args.c", "release.c", "capsules.c", "event.c", "tensor.c", "hooks.c", "runtime.c", "exchange.c", "ndarray.c", "torch.c", "transfer.c", "ipc.c", "record.c", "module.c"]
setup(
    cffi_modules=["native_build.py:ffibuilder"],
    ext_modules=[Extension("arraybridge._core", [f"arraybridge/_core/{name}" for name in core_sources],
                           include_dirs=[include_dir], library_dirs=[library_dir], libraries=["arraybridge"],
                           extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers", "-Werror"],
                           extra_link_args=[f"-Wl,-rpath,{library_dir}"])],
)

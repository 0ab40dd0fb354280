import os
import sys

from setuptools import Extension, setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_build import locate  # noqa: E402

include_dir, _ = locate()
setup(
    cffi_modules=["native_build.py:ffibuilder"],
    ext_modules=[Extension("arraybridge._capsule", ["arraybridge/_capsule.c"], include_dirs=[include_dir])],
)

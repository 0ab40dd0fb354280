import glob
import os
import sys

from setuptools import Extension, setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from native_build import locate  # noqa: E402

include_dir, library_dir = locate()
# Every C file of the extension: a new file of _core/ needs no line here.
here = os.path.dirname(os.path.abspath(__file__))
core_sources = sorted(os.path.relpath(path, here) for path in glob.glob(os.path.join(here, "arraybridge", "_core", "*.c")))
setup(
    cffi_modules=["native_build.py:ffibuilder"],
    ext_modules=[Extension("arraybridge._core", core_sources,
                           include_dirs=[include_dir], library_dirs=[library_dir], libraries=["arraybridge"],
                           extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers", "-Werror"],
                           extra_link_args=[f"-Wl,-rpath,{library_dir}"])],
)

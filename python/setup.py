from setuptools import setup

# The one native module, arraybridge._native, is described in native_build.py.
setup(cffi_modules=["native_build.py:ffibuilder"])

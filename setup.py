# cffi_modules cannot be declared in pyproject.toml yet; everything else lives there.
from setuptools import setup

setup(cffi_modules=["csrc/build_helper.py:ffibuilder"])

"""Build the example extension against the installed rfl_fast headers.

    pip install pybind11 rfl_fast
    python setup.py build_ext --inplace
    python -c "import rfl_example; print(rfl_example.headers_version)"
"""

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

import rfl_fast

ext = Pybind11Extension(
    "rfl_example",
    ["rfl_example.cpp"],
    include_dirs=[rfl_fast.get_include()],
    cxx_std=17,
    extra_compile_args=["-O2"],
    extra_link_args=["-pthread"],
)

setup(name="rfl_example", version="0.1", ext_modules=[ext], cmdclass={"build_ext": build_ext})

"""cffi builder for cmc's C helper: the header is the cdef (pyca/cryptography's layout);
every csrc/*.c is compiled into the one module."""
import glob
import os
import re

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))


def _cdef_from_header(path: str) -> str:
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def sources() -> list[str]:
    """The helper's parts, as paths relative to the project (setuptools wants them so)."""
    return sorted(os.path.join("csrc", os.path.basename(p))
                  for p in glob.glob(os.path.join(HERE, "*.c")))


ffibuilder = FFI()
ffibuilder.cdef(_cdef_from_header(os.path.join(HERE, "cmc_helper.h")))
ffibuilder.set_source(
    "cmc.kernel._cmc_helper",
    '#include <stdint.h>\n#include "cmc_helper.h"\n',
    sources=sources(),
    depends=sorted(os.path.join("csrc", os.path.basename(p))
                   for p in glob.glob(os.path.join(HERE, "*.h"))),
    include_dirs=[HERE],
    extra_compile_args=["-O2", "-Wall", "-std=gnu11"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)

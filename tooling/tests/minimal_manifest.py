"""The smallest valid build.toml, shared by the fixtures and the fuzz test, and the pure-Python
(noarch) kernel the security tests build."""

import shutil
from pathlib import Path

from kbuild.card.content import DEFAULT_TEMPLATE

GENERAL = """\
[general]
name = "demo"
version = 1
edition = 5
license = "MIT"
backends = ["cpu"]
"""
MINIMAL_BUILD_TOML = (
    GENERAL
    + """
[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.demo_cpu]
backend = "cpu"
depends = ["torch"]
src = ["demo_cpu/demo.cpp"]
"""
)
# {hub}: an optional [general.hub] table.
NOARCH_BUILD_TOML = GENERAL + "{hub}\n[torch-noarch]\n"


def write_noarch_kernel(kernel: Path) -> Path:
    """A pure-Python kernel with the default card at `kernel`: `kbuild build` stages it without compiling."""
    (kernel / "torch-ext" / "demo").mkdir(parents=True)
    (kernel / "build.toml").write_text(NOARCH_BUILD_TOML.format(hub=""))
    (kernel / "torch-ext" / "demo" / "__init__.py").write_text('"""Demo."""\n__all__ = []\n')
    shutil.copyfile(DEFAULT_TEMPLATE, kernel / "CARD.md")
    return kernel

"""The smallest valid build.toml, shared by the fixtures and the fuzz test."""

MINIMAL_BUILD_TOML = """\
[general]
name = "demo"
version = 1
edition = 5
license = "MIT"
backends = ["cpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.demo_cpu]
backend = "cpu"
depends = ["torch"]
src = ["demo_cpu/demo.cpp"]
"""

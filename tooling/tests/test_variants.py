import pytest

from kbuild.core.errors import KbuildError
from kbuild.model.variants import NOARCH, STABLE_ABI, Variant, detect_variant

NAMES = [
    "torch211-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-cpu-x86_64-linux",
    "torch212-cxx11-rocm71-x86_64-linux",
    "torch213-cxx11-xpu20260-x86_64-linux",
    "torch213-cxx11-cu126-aarch64-linux",
    "torch213-metal-aarch64-darwin",
    "torch213-cpu-aarch64-darwin",
    "torch-stable-abi213-cu130-x86_64-linux",
    "torch-stable-abi212-cpu-aarch64-linux",
    "torch-cuda",
    "torch-cpu",
    "torch-rocm",
]


@pytest.mark.parametrize("name", NAMES)
def test_names_round_trip(name):
    assert Variant.parse(name).name == name


def test_parse_fields():
    v = Variant.parse("torch212-cxx11-rocm71-x86_64-linux")
    assert (v.torch, v.backend, v.toolkit, v.cpu, v.os) == ("2.12", "rocm", "7.1", "x86_64", "linux")
    assert Variant.parse("torch-stable-abi213-cu130-x86_64-linux").kind == STABLE_ABI
    assert Variant.parse("torch-cuda").kind == NOARCH
    assert Variant.parse("torch213-cxx11-xpu20260-x86_64-linux").toolkit == "2026.0"


def test_construct_name():
    assert Variant("2.13", "cuda", "13.0").name == "torch213-cxx11-cu130-x86_64-linux"
    assert Variant("2.13", "cuda", "12.6", kind=STABLE_ABI).name == "torch-stable-abi213-cu126-x86_64-linux"


@pytest.mark.parametrize(
    "bad", ["torch213-cu130", "torch213-cxx11-cu130-x86_64", "torch-foo", "torch213-cxx11-tpu-x86_64-linux"]
)
def test_bad_names_are_clear_errors(bad):
    with pytest.raises(KbuildError, match="is not a build variant name"):
        Variant.parse(bad)


def test_non_canonical_name_is_rejected():
    with pytest.raises(KbuildError, match="write it as `torch213-cxx11-cpu-x86_64-linux`"):
        Variant.parse("torch213-cpu-x86_64-linux")


def test_detect_matches_the_running_torch():
    import torch

    variant = detect_variant()
    major, minor = torch.__version__.split(".")[:2]
    assert variant.torch == f"{major}.{minor}"
    assert variant.backend == ("cuda" if torch.version.cuda else "rocm" if torch.version.hip else "cpu")
    assert Variant.parse(variant.name) == variant

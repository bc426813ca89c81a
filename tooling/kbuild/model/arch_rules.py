"""The archs a kernel compiles for and the device flags that compile it, read from build.toml and
the backend registry: a backend's archs are the list of its `archs_key`, or, for a backend whose
archs are CUDA capabilities, those of that list (or the toolkit's default) that its toolkit builds
(kbuild.model.cuda). `kbuild build`, `kbuild matrix` and `kbuild publish` all ask here.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from packaging.version import Version

from kbuild.model import backends, code_paths, cuda
from kbuild.model.backends import Backend
from kbuild.model.manifest import KernelSpec, Manifest
from kbuild.model.variants import Variant


def listed(backend: Backend, kernel: KernelSpec) -> list[str]:
    """The archs build.toml lists for `kernel` (empty for a backend without an arch list)."""
    return list(getattr(kernel, backend.archs_key)) if backend.archs_key else []


def kernels_compiled(manifest: Manifest, variant: Variant) -> list[KernelSpec]:
    """The `[kernel.*]` tables a build of `variant` compiles: those of its backend, less the kernels
    whose cuda-minver is above the variant's toolkit."""
    toolkit = variant.toolkit
    return [
        k
        for k in manifest.kernels_for(variant.backend)
        if not (k.cuda_minver and toolkit and Version(toolkit) < Version(k.cuda_minver))
    ]


def kernel_archs(backend: Backend, kernel: KernelSpec, toolkit: str | None, gpus: tuple[str, ...] = ()) -> list[str]:
    """The archs `kernel` is compiled for with `toolkit`. CUDA capabilities: the listed ones the
    toolkit builds (warning about the others), or the toolkit's default list; of those, the ones
    that run on the local GPUs `gpus` when any does."""
    if not backend.cuda_capabilities:
        return listed(backend, kernel)
    chosen = cuda.select_capabilities(kernel.name, listed(backend, kernel), toolkit or "")
    return cuda.running_on(chosen, gpus) or chosen


def one_per_code_path(backend: Backend, kernel_dir: Path, kernel: KernelSpec, archs: list[str]) -> list[str]:
    """Of `archs`, one per distinct code path of `kernel`'s sources (CI's compile check); all of
    them for a backend whose code paths kbuild does not follow (only CUDA's `__CUDA_ARCH__`)."""
    if not backend.cuda_capabilities:
        return archs
    return code_paths.one_per_code_path(kernel_dir, kernel, archs)


def ci_archs(backend: Backend, kernel: KernelSpec, toolkit: str) -> list[str] | None:
    """The archs CI builds `kernel` for with a toolkit of data/variants.toml, as `kbuild build`
    chooses them; None (no job for that toolkit) when the toolkit builds none of its CUDA capabilities."""
    if not backend.cuda_capabilities:
        return listed(backend, kernel)
    buildable = cuda.toolkit_archs(toolkit)
    wanted = listed(backend, kernel) or cuda.default_capabilities(toolkit)
    return [arch for arch in wanted if cuda.capability_base(arch) in buildable] or None


def in_order(backend: Backend, archs: set[str] | list[str]) -> list[str]:
    """`archs` sorted as metadata.json lists them: CUDA capabilities by number (9.0 before 10.0),
    other archs by name."""
    if not backend.cuda_capabilities:
        return sorted(archs)
    return sorted(archs, key=lambda arch: (Version(cuda.capability_base(arch)), arch))


def variant_archs(manifest: Manifest, variant: Variant, gpus: tuple[str, ...] = ()) -> list[str]:
    """The archs a build of `variant` compiles for every arch build.toml lists (for those that run
    on the local GPUs `gpus` when given), as its metadata.json records them; without warning again
    about listed capabilities the toolkit cannot build."""
    backend = backends.get(variant.backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = {
            arch
            for kernel in kernels_compiled(manifest, variant)
            for arch in kernel_archs(backend, kernel, variant.toolkit, gpus)
        }
    return in_order(backend, found)


def device_flags(backend: Backend, kernel: KernelSpec, archs: list[str]) -> list[str]:
    """The device compiler's flags for `kernel` compiled for `archs`: the backend's own, one per
    arch (nvcc's -gencode and --threads for CUDA capabilities), then the kernel's."""
    own = list(getattr(kernel, backend.flags_key)) if backend.flags_key else []
    flags = list(backend.device_flags)
    if backend.cuda_capabilities:
        flags += [flag for arch in archs for flag in cuda.gencode_flags(arch)]
        flags += cuda.threads_flags(len(archs), own)
    elif backend.arch_flag:
        flags += [backend.arch_flag.format(arch=arch) for arch in archs]
    return flags + own


def local_gpus(backend: Backend) -> tuple[str, ...] | None:
    """The archs of this machine's GPUs, for a build compiled for them only; None for a backend
    without such builds."""
    return cuda.local_gpu_capabilities() if backend.cuda_capabilities else None

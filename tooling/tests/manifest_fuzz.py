"""A build.toml mutator and the harness that feeds its output to kbuild's manifest loader.

Each seed picks a manifest of the corpus (the repository's kernels and
tooling/tests/data/manifests/) and applies one to three mutations: values and keys swapped
for ones from the pools below (wrong types, unknown names, huge numbers, deep nesting, long
names), lines dropped, doubled, swapped or inserted, raw bytes (invalid UTF-8, NUL), or a
truncation. The loader must answer every mutant with a Manifest or a KbuildError.
"""

from __future__ import annotations

import random
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

from kbuild.core.errors import KbuildError
from kbuild.core.tomlcompat import tomllib

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "manifests"

VALUES = [
    "1", "0", "-1", "1.5", "true", "nan", "1979-05-27", '"1"', '""', '"cdua"', '"cuda"', '"cpu"',
    '"2.10"', '"12.6.1"', '"8.0"', '"9.0a"', '"gfx942"', '"../outside"', '"/etc/passwd"', '"a\\u0000b"',
    '"Demo"', '"https://example.com/x"', '"\\t"', "[]", "[1]", '["cpu"]', '[["cpu"]]', '["cpu", 1]',
    "{}", "{ a = 1 }", '{ cuda = "2.10" }', '[{ repo-id = "a/b" }]',
    '[{ repo-id = "a/b", version = 1, revision = "x" }]',
    '["nki", "foo"]', "9223372036854775808", "-9223372036854775809", "9" * 5000,
    '"' + "a" * 300 + '"', "[" * 1000 + "]" * 1000, "[" * 150 + "]" * 150, "{ a = " * 300 + "1" + " }" * 300,
]  # fmt: skip
KEYS = [
    "name", "version", "edition", "license", "backends", "backend", "upstream", "source", "python-depends",
    "kernel-depends", "hub", "cuda", "xpu", "neuron", "tpu", "repo-id", "branch", "minver", "maxver", "src",
    "include", "pyext", "cxx-flags", "stable-abi", "depends", "cuda-capabilities", "cuda-capabilites", "cuda-flags",
    "cuda-minver", "rocm-archs", "hip-flags", "sycl-flags", "cuda_capabilities", "rocm_archs", "universal",
    "general", "kernel", "torch", "x", '"quoted key"', "a.b", "general.name", "version.x",
]  # fmt: skip
LINES = [
    "[general]", "[general.neuron]", "[general.tpu]", "[general.hub]", "[general.cuda]", "[general.xpu]",
    "[general.foo]", "[torch]", "[torch-noarch]", "[tvm-ffi]", "[torch.stable-abi]", "[kernel]", "[kernel.extra]",
    '[kernel."odd name/.."]', "[[kernel.list]]", "[foo]", "[[general]]", "general = []", "kernel = 1",
    "torch = []", "edition = 4", "edition = 5", 'edition = "5"', "universal = true", "universal = 1",
    'backend = ["cpu"]', "backend = 1", 'backend = "neuron"', "backends = []", 'name = "' + "a" * 300 + '"',
    "version = " + "7" * 5000, "x = " + "[" * 1000 + "]" * 1000, 'cuda-capabilites = ["8.0"]',
    '[general.cuda]\nkernel-depends = [{ repo-id = "a/b" }]', 'stable-abi = { cdua = "2.10" }',
]  # fmt: skip
KEY_LINE = re.compile(r"^(\s*)([A-Za-z0-9_.\"' -]+?)(\s*=\s*)(.*)$")


def corpus() -> list[Path]:
    """The manifests the fuzzer starts from."""
    return sorted(REPO.glob("kernels/*/build.toml")) + sorted(DATA.glob("*.toml"))


def kernel_folder(manifest: Path, root: Path) -> Path:
    """A kernel folder for `manifest` whose listed sources exist (empty files)."""
    folder = root / re.sub(r"\W", "_", f"{manifest.parent.name}_{manifest.stem}")
    folder.mkdir(parents=True)
    data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    tables = [data.get("torch", {}), data.get("tvm-ffi", {}), *data.get("kernel", {}).values()]
    for rel in (src for table in tables for src in table.get("src", [])):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).touch()
    shutil.copyfile(manifest, folder / "build.toml")
    return folder


def mutate(text: str, rng: random.Random) -> bytes:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(9)
        at = rng.randrange(len(lines)) if lines else 0
        match = KEY_LINE.match(lines[at]) if lines else None
        if op == 0 and match:
            lines[at] = match.group(1) + match.group(2) + match.group(3) + rng.choice(VALUES)
        elif op == 1 and match:
            lines[at] = match.group(1) + rng.choice(KEYS) + match.group(3) + match.group(4)
        elif op == 2 and lines:
            del lines[at]
        elif op == 3 and lines:
            lines.insert(at, lines[at])
        elif op == 4 and lines:
            other = rng.randrange(len(lines))
            lines[at], lines[other] = lines[other], lines[at]
        elif op == 5:
            lines.insert(at, rng.choice(LINES))
        elif op == 6:
            lines = [line for line in lines if not line.startswith("edition")]
        else:
            data = bytearray("\n".join(lines).encode("utf-8"))
            if op == 7:
                for _ in range(rng.randint(1, 4)):
                    data.insert(rng.randrange(len(data) + 1), rng.choice([0x00, 0x80, 0xC3, 0xFF, rng.randrange(256)]))
            else:
                del data[rng.randrange(len(data) + 1) :]
            return bytes(data)
    return "\n".join(lines).encode("utf-8")


@dataclass
class Outcome:
    seed: int
    source: str
    kind: str  # "ok", "error" (a KbuildError) or "crash" (any other exception)
    error: BaseException | None = None


def run(seeds: range, root: Path) -> list[Outcome]:
    """Load one mutant per seed with kbuild's `load_manifest`."""
    from kbuild.model.manifest import load_manifest

    folders = {path: kernel_folder(path, root) for path in corpus()}
    texts = {path: path.read_text(encoding="utf-8") for path in folders}
    outcomes = []
    for seed in seeds:
        rng = random.Random(seed)
        source = rng.choice(list(folders))
        folder = folders[source]
        (folder / "build.toml").write_bytes(mutate(texts[source], rng))
        name = f"{source.parent.name}/{source.name}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                load_manifest(folder)
            outcomes.append(Outcome(seed, name, "ok"))
        except KbuildError as exc:
            outcomes.append(Outcome(seed, name, "error", exc))
        except Exception as exc:
            outcomes.append(Outcome(seed, name, "crash", exc))
    return outcomes

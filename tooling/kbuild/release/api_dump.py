"""Load one built variant in this (fresh) interpreter and print its public API as JSON.

Run by kbuild.release.api_compat as `python api_dump.py VARIANT_DIR`: a standalone script (no kbuild
import), so that each build loads in a process of its own and two builds of one kernel never
share a namespace. Prints {"variant", "package", "namespace", "ops", "python", "layers"}:
`ops` maps each op registered in the build's namespace (`name` or `name.overload`) to its schema
without the namespace; `python` and `layers` map the public names of the package (`__all__`) and
of its `layers` module to {"kind", "signature", "parameters": [[name, kind, has_default], ...]}.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

ANONYMOUS_ALIAS = re.compile(r"\(\$\d+(!?) -> \)")


def describe(obj: Any, *, method: str | None = None) -> dict[str, Any]:
    """Kind and signature of a public object (of `obj.<method>` for layers)."""
    if obj is None:
        return {"kind": "missing", "signature": None, "parameters": None}
    kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else type(obj).__name__
    if inspect.ismodule(obj):
        kind = "module"
    target = getattr(obj, method, None) if method else obj
    try:
        signature = inspect.signature(target) if callable(target) else None
    except (TypeError, ValueError):
        signature = None
    if signature is None:
        return {"kind": kind, "signature": None, "parameters": None}
    parameters = [
        [p.name, p.kind.name, p.default is not inspect.Parameter.empty] for p in signature.parameters.values()
    ]
    return {"kind": kind, "signature": str(signature), "parameters": parameters}


def public_names(module: ModuleType, *, layers: bool = False) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return sorted(names)
    return sorted(
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and getattr(obj, "__module__", None) == module.__name__
        and (inspect.isclass(obj) and issubclass(obj, torch.nn.Module) if layers else callable(obj))
    )


def load(variant: Path) -> tuple[ModuleType, dict[str, Any]]:
    """Import the package of `variant` as `kernels` does: named after its ops namespace; return
    it and the variant's metadata.json."""
    metadata: dict[str, Any] = json.loads((variant / "metadata.json").read_text(encoding="utf-8"))
    namespace = metadata["id"]
    spec = importlib.util.spec_from_file_location(namespace, variant / "__init__.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"no Python package in {variant}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[namespace] = module
    spec.loader.exec_module(module)
    return module, metadata


def api(variant: Path) -> dict[str, Any]:
    module, metadata = load(variant)
    namespace = metadata["id"]
    ops = {}
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith(f"{namespace}::"):
            key = schema.name.split("::", 1)[1] + (f".{schema.overload_name}" if schema.overload_name else "")
            # torch prints an anonymous alias set (`Tensor!`) as `Tensor($0! -> )`, which it cannot parse
            ops[key] = ANONYMOUS_ALIAS.sub(r"\1", str(schema).replace(f"{namespace}::", "", 1))
    python = {name: describe(getattr(module, name, None)) for name in public_names(module)}
    layers_module = getattr(module, "layers", None)
    layers = {}
    if inspect.ismodule(layers_module):
        for name in public_names(layers_module, layers=True):
            layers[name] = describe(getattr(layers_module, name, None), method="forward")
    package = str(metadata.get("name", variant.name)).replace("-", "_")
    return {
        "variant": variant.name,
        "package": package,
        "namespace": namespace,
        "ops": ops,
        "python": python,
        "layers": layers,
    }


if __name__ == "__main__":
    print(json.dumps(api(Path(sys.argv[1]).resolve()), sort_keys=True))

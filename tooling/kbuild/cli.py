"""The `kbuild` command line: argument parsing only; each command calls one module."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from kbuild import __version__
from kbuild.errors import KbuildError


def _kernel_dirs(paths: list[str]) -> list[Path]:
    """Kernel folders named on the command line; none means every kernel under ./kernels."""
    if paths:
        return [Path(p) for p in paths]
    found = sorted(p.parent for p in Path("kernels").glob("*/build.toml"))
    if not found:
        raise KbuildError("no kernels found under ./kernels", fix="pass kernel folders, or run from the repository root")
    return found


def cmd_build(args: argparse.Namespace) -> int:
    from kbuild.build import build_kernel

    for kernel_dir in _kernel_dirs(args.kernels):
        print(build_kernel(kernel_dir, args.variant, jobs=args.jobs))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from kbuild.build import generate_only

    for kernel_dir in _kernel_dirs(args.kernels):
        print(generate_only(kernel_dir, args.variant))
    return 0


def cmd_variants(args: argparse.Namespace) -> int:
    from kbuild.variants import Variant, detect_variant

    if args.parse:
        for name in args.parse:
            variant = Variant.parse(name)
            print(f"{name}: torch={variant.torch} backend={variant.backend} toolkit={variant.toolkit} "
                  f"cpu={variant.cpu} os={variant.os} kind={variant.kind}")
        return 0
    print(detect_variant().name)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from kbuild.checks import check_kernel, format_findings

    failed = False
    for kernel_dir in _kernel_dirs(args.kernels):
        findings = check_kernel(kernel_dir)
        for line in format_findings(findings):
            print(line)
        failed |= any(f.severity == "error" for f in findings)
        if not findings:
            print(f"{kernel_dir}: ok")
    return 1 if failed else 0


def cmd_test(args: argparse.Namespace) -> int:
    from kbuild.testing import run_tests

    code = 0
    for kernel_dir in _kernel_dirs(args.kernels):
        code = max(code, run_tests(kernel_dir, variant=args.variant, ci=args.ci, build=not args.no_build, pytest_args=args.pytest_args))
    return code


def cmd_init(args: argparse.Namespace) -> int:
    from kbuild.scaffold import create_kernel

    path = create_kernel(Path(args.directory), backends=args.backends, license=args.license, repo_id=args.repo_id)
    print(f"created {path}; next: kbuild build {path} && kbuild test {path}")
    return 0


def cmd_update_build(args: argparse.Namespace) -> int:
    from kbuild.manifest import upgrade_file

    for kernel_dir in _kernel_dirs(args.kernels):
        upgrade_file(kernel_dir, license=args.license)
        print(f"{kernel_dir / 'build.toml'}: edition 5")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbuild", description="Build, check, test and publish PyTorch kernels.")
    parser.add_argument("--version", action="version", version=f"kbuild {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, func, help: str, kernels: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(func=func)
        if kernels:
            sub.add_argument("kernels", nargs="*", metavar="KERNEL_DIR", help="kernel folders (default: every kernel under ./kernels)")
        return sub

    sub = command("build", cmd_build, "Build kernels for this environment's variant and stage build/<variant>/.")
    sub.add_argument("--variant", help="variant name to build (must match this environment's torch)")
    sub.add_argument("-j", "--jobs", type=int, help="parallel compile jobs (default: ninja's choice)")

    sub = command("generate", cmd_generate, "Write the CMake project of a kernel into its build tree, without compiling.")
    sub.add_argument("--variant", help="variant name (default: this environment's)")

    sub = command("check", cmd_check, "Check kernels' layout and op registration.")

    sub = command("test", cmd_test, "Build if needed, then run a kernel's tests against the fresh build.")
    sub.add_argument("--variant", help="variant to build and test")
    sub.add_argument("--ci", action="store_true", help="run only the quick tests marked kernels_ci")
    sub.add_argument("--no-build", action="store_true", help="test the existing build without rebuilding")
    sub.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST_ARGS", help="extra pytest arguments after --")

    sub = command("variants", cmd_variants, "Print this environment's variant, or parse variant names.", kernels=False)
    sub.add_argument("--parse", nargs="+", metavar="NAME", help="parse and explain variant names")

    sub = command("init", cmd_init, "Create a new kernel that builds and passes its tests as created.", kernels=False)
    sub.add_argument("directory", help="folder of the new kernel; its name is the kernel name (e.g. kernels/my-op)")
    sub.add_argument("--backends", nargs="+", default=["cpu", "cuda"], choices=["cpu", "cuda", "rocm"], help="backends to scaffold")
    sub.add_argument("--license", default="Apache-2.0", help="SPDX license id (default: Apache-2.0)")
    sub.add_argument("--repo-id", help="Hub repository id (default: kernels-community/<name>)")

    sub = command("update-build", cmd_update_build, "Rewrite an older build.toml (edition 2 or 4) as edition 5.")
    sub.add_argument("--license", help="SPDX license id to add when the file has none")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "pytest_args", None) and args.pytest_args[:1] == ["--"]:
        args.pytest_args = args.pytest_args[1:]
    warnings.formatwarning = lambda message, category, *rest: f"warning: {message}\n"
    try:
        return args.func(args)
    except KbuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The `kbuild` command line: argument parsing only; each command calls one module."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbuild import __version__
from kbuild.core.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, KbuildError, internal_error_line
from kbuild.core.hubid import branch_problem
from kbuild.core.redact import say, scrub
from kbuild.model.manifest import manifest_path

Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: Run
    arguments: Callable[[argparse.ArgumentParser], None]
    kernel_dirs: bool


COMMANDS: list[Command] = []


def command(
    name: str, arguments: Callable[[argparse.ArgumentParser], None], *, help: str, kernel_dirs: bool = True
) -> Callable[[Run], Run]:
    """Register `run` as the command `name`; `arguments` adds its options (beside it in this file).
    `kernel_dirs`: it also takes KERNEL_DIR... (default: see _kernel_dirs)."""

    def register(run: Run) -> Run:
        COMMANDS.append(Command(name, help, run, arguments, kernel_dirs))
        return run

    return register


def _kernel_dirs(paths: list[str]) -> list[Path]:
    """Kernel folders named on the command line; none means the current folder when it is a kernel
    (as kernel-builder), else every kernel under ./kernels (this repository's layout), else every
    kernel folder in the current folder (a kernels-community checkout's layout)."""
    for path in paths:
        manifest_path(path)
    if paths:
        return [Path(p) for p in paths]
    if Path("build.toml").is_file():
        return [Path.cwd()]
    found = sorted(p.parent for p in Path("kernels").glob("*/build.toml"))
    found = found or sorted(p.parent for p in Path(".").glob("*/build.toml"))
    if not found:
        raise KbuildError(
            "no kernels found here, under ./kernels or in the folders of this one",
            fix="pass kernel folders, or run from the repository root",
        )
    return found


def _all_capabilities_argument(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
    parser.add_argument(
        "--all-capabilities",
        action="store_true",
        help="compile every CUDA capability build.toml lists (default on a machine with a GPU: that GPU's only)",
    )


def _capabilities_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    _all_capabilities_argument(group)
    group.add_argument(
        "--one-per-code-path",
        action="store_true",
        help=(
            "compile one CUDA capability per distinct code path of each kernel's sources (CI's compile check; "
            "publish refuses the result)"
        ),
    )


def _build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", help="variant name to build (must match this environment's torch)")
    parser.add_argument("-j", "--jobs", type=int, help="parallel compile jobs (default: ninja's choice)")
    _capabilities_arguments(parser)


@command(
    "build",
    _build_arguments,
    help=(
        "Build kernels for this environment's variant and stage build/<variant>/. Builds are incremental: "
        "only what changed is compiled again, and editing tests, benchmarks or docs compiles nothing."
    ),
)
def cmd_build(args: argparse.Namespace) -> int:
    from kbuild.build.builder import build_kernel

    for kernel_dir in _kernel_dirs(args.kernels):
        say(
            build_kernel(
                kernel_dir,
                args.variant,
                jobs=args.jobs,
                all_capabilities=args.all_capabilities,
                one_per_code_path=args.one_per_code_path,
            )
        )
    return 0


def _generate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", help="variant name (default: this environment's)")
    _capabilities_arguments(parser)


@command(
    "generate",
    _generate_arguments,
    help="Write the CMake project of a kernel into its build tree, without compiling.",
)
def cmd_generate(args: argparse.Namespace) -> int:
    from kbuild.build.builder import NothingToGenerate, generate_only

    code = 0
    for kernel_dir in _kernel_dirs(args.kernels):
        try:  # each kernel of a batch, whatever the others'
            say(
                generate_only(
                    kernel_dir,
                    args.variant,
                    all_capabilities=args.all_capabilities,
                    one_per_code_path=args.one_per_code_path,
                )
            )
        except NothingToGenerate as exc:
            say(f"{kernel_dir}: {exc.message}")
        except KbuildError as exc:
            say(f"error: {exc}", err=True)
            code = exc.exit_code
    return code


def _variants_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parse", nargs="+", metavar="NAME", help="parse and explain variant names")


@command(
    "variants",
    _variants_arguments,
    kernel_dirs=False,
    help="Print this environment's variant, or parse variant names.",
)
def cmd_variants(args: argparse.Namespace) -> int:
    from kbuild.model.variants import Variant, detect_variant

    if args.parse:
        for name in args.parse:
            variant = Variant.parse(name)
            say(
                f"{name}: torch={variant.torch} backend={variant.backend} toolkit={variant.toolkit} "
                f"cpu={variant.cpu} os={variant.os} kind={variant.kind}"
            )
        return 0
    say(detect_variant().name)
    return 0


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--abi",
        nargs="+",
        metavar="BUILD_DIR",
        help="instead, check the ELF ABI of the .so files under "
        "these build/ or build/<variant>/ folders (manylinux_2_28, Python limited API, torch stable ABI)",
    )


@command("check", _check_arguments, help=("Check kernels' layout and op registration."))
def cmd_check(args: argparse.Namespace) -> int:
    from kbuild.check.kernel_checks import check_kernel
    from kbuild.core.findings import format_findings

    if args.abi:
        from kbuild.build.abi import check_abi

        findings = [f for build_dir in args.abi for f in check_abi(Path(build_dir))]
        for line in format_findings(findings):
            say(line)
        if not findings:
            say(f"{', '.join(args.abi)}: ABI ok")
        return 1 if findings else 0
    code = 0
    for kernel_dir in _kernel_dirs(args.kernels):
        findings = check_kernel(kernel_dir)
        for line in format_findings(findings):
            say(line)
        if any(f.bad_input for f in findings):
            code = EXIT_BAD_INPUT
        elif any(f.severity == "error" for f in findings):
            code = max(code, 1)
        if not findings:
            say(f"{kernel_dir}: ok")
    return code


def _test_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", help="variant to build and test")
    parser.add_argument("--ci", action="store_true", help="run only the quick tests marked kernels_ci")
    parser.add_argument("--no-build", action="store_true", help="test the existing build without rebuilding")
    parser.add_argument(
        "--allow-no-tests",
        action="store_true",
        help="exit 0 when pytest selects no test (default: pytest's exit 5, explained)",
    )
    _all_capabilities_argument(parser)
    parser.epilog = "Arguments after `--` go to pytest, e.g. kbuild test kernels/relu -- -k bad_inputs"
    # The KERNEL_DIR positional is already added; argparse has no notation for what follows `--`.
    parser.usage = parser.format_usage().removeprefix("usage: ").rstrip() + " [-- PYTEST_ARGS ...]"


@command("test", _test_arguments, help=("Build if needed, then run a kernel's tests against the fresh build."))
def cmd_test(args: argparse.Namespace) -> int:
    from kbuild.testing.runner import run_tests

    code = 0
    for kernel_dir in _kernel_dirs(args.kernels):
        code = max(
            code,
            run_tests(
                kernel_dir,
                variant=args.variant,
                ci=args.ci,
                build=not args.no_build,
                pytest_args=args.pytest_args,
                all_capabilities=args.all_capabilities,
                allow_no_tests=args.allow_no_tests,
            ),
        )
    return code


def _init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="folder of the new kernel; its name is the kernel name (e.g. kernels/my-op)")
    from kbuild.model import backends

    scaffolded, default = backends.scaffolded(), backends.scaffold_default()
    others = [b for b in backends.names() if b not in scaffolded]
    parser.add_argument(
        "--backends",
        nargs="+",
        default=list(default),
        metavar="BACKEND",
        help=f"backends to scaffold, of {' '.join(scaffolded)} (default: {' '.join(default)}); "
        f"build.toml also takes {', '.join(others)}: add their [kernel.*] tables by hand",
    )
    parser.add_argument("--license", default="Apache-2.0", help="SPDX license id (default: Apache-2.0)")
    parser.add_argument("--repo-id", metavar="ORG/NAME", help="Hub repository id (default: kernels-community/<name>)")


@command(
    "init",
    _init_arguments,
    kernel_dirs=False,
    help="Create a new kernel that builds and passes its tests as created.",
)
def cmd_init(args: argparse.Namespace) -> int:
    from kbuild.build.scaffold import create_kernel
    from kbuild.testing.plain_pytest import ROOT_MARKER, kbuild_root

    path = create_kernel(Path(args.directory), backends=args.backends, license=args.license, repo_id=args.repo_id)
    say(f"created {path}; next: kbuild build {path} && kbuild test {path}")
    if kbuild_root(path.resolve()) is None:
        say(
            f"note: plain `pytest {path}/tests` uses the kernel's build only inside a kbuild repository: add a "
            f"`[tool.kbuild]` table to the {ROOT_MARKER} at your repository's root (`kbuild test` works anywhere)"
        )
    return 0


def _update_build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--license", help="SPDX license id to add when the file has none")


@command("update-build", _update_build_arguments, help=("Rewrite an older build.toml (edition 2 or 4) as edition 5."))
def cmd_update_build(args: argparse.Namespace) -> int:
    from kbuild.model.manifest import upgrade_file

    for kernel_dir in _kernel_dirs(args.kernels):
        upgrade_file(kernel_dir, license=args.license)
        say(f"{kernel_dir / 'build.toml'}: edition 5")
    return 0


def _sync_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kernels", nargs="*", metavar="KERNEL_DIR", help="the kernel folder to sync (several with --check)"
    )
    parser.add_argument(
        "--all", action="store_true", help="every kernel under ./kernels with an upstream.yaml (with --check)"
    )
    parser.add_argument(
        "--check", action="store_true", help="only report which kernels are behind; exit 1 when any is, 0 when none"
    )
    parser.add_argument("--json", action="store_true", help="with --check: print the report as JSON")
    parser.add_argument("--ref", help="upstream branch, tag or commit to sync to (default: upstream.yaml's ref)")
    parser.add_argument("--summary", metavar="FILE", help="also write the summary (a pull request body) to FILE")
    parser.add_argument(
        "--refresh-patch",
        action="store_true",
        help="carry patches that no longer apply over to the new upstream files with git's three-way merge; "
        "conflicts are left with markers in KERNEL_DIR/.kbuild/refresh-patches/ (exit 1): resolve them, run again",
    )


@command(
    "sync",
    _sync_arguments,
    kernel_dirs=False,
    help="Sync a kernel with its upstream (upstream.yaml), or report which kernels are behind.",
)
def cmd_sync(args: argparse.Namespace) -> int:
    import json

    from kbuild.sync import kernel_sync

    if args.all == bool(args.kernels) or (not args.check and (args.all or args.json or len(args.kernels) > 1)):
        raise KbuildError(
            "a sync takes one kernel folder; --all and --json go with --check",
            fix="kbuild sync kernels/<name>, or kbuild sync --all --check",
        )
    if args.check and args.refresh_patch:
        raise KbuildError(
            "--refresh-patch goes with a sync, not with --check", fix="kbuild sync KERNEL_DIR --refresh-patch"
        )
    if args.check:
        kernel_dirs = kernel_sync.synced_kernels(Path("kernels")) if args.all else [Path(k) for k in args.kernels]
        statuses = kernel_sync.upstream_status(kernel_dirs)
        text = "\n".join(map(str, statuses)) or "no kernel under ./kernels has an upstream.yaml"
        say(json.dumps(kernel_sync.status_report(statuses), indent=2) if args.json else text)
        return 1 if any(status.behind for status in statuses) else 0
    summary = kernel_sync.sync_kernel(Path(args.kernels[0]), ref=args.ref, refresh_patches=args.refresh_patch).summary()
    if args.summary:
        Path(args.summary).write_text(scrub(summary), encoding="utf-8")
    say(summary, end="")
    return 0


def _rocm_compile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR", help="output folder (default: <kernel>/.kbuild/rocm-device)")
    parser.add_argument(
        "--require-mfma",
        nargs="?",
        action="append",
        const=r"v_mfma_f32_\w+_fp8_fp8",
        metavar="REGEX",
        help="fail unless each checked function has an instruction matching REGEX "
        "(default: the FP8 MFMA ones); repeatable",
    )
    parser.add_argument(
        "--in-function",
        default="",
        metavar="REGEX",
        help="with --require-mfma: check only functions whose symbol matches REGEX (default: all)",
    )


@command(
    "rocm-compile",
    _rocm_compile_arguments,
    help=(
        "Compile kernels' ROCm sources device-only with clang-19 (no GPU needed); optionally require MFMA instructions."
    ),
)
def cmd_rocm_compile(args: argparse.Namespace) -> int:
    from kbuild.build.rocm import compile_kernel

    for kernel_dir in _kernel_dirs(args.kernels):
        out_dir = Path(args.out) / kernel_dir.name if args.out else None
        for line in compile_kernel(
            kernel_dir,
            out_dir=out_dir,
            require=args.require_mfma or (),
            function_pattern=args.in_function,
            missing_ok=not args.kernels,
        ):
            say(line)
    return 0


def _card_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kernel", metavar="KERNEL_DIR", help="the kernel folder")
    parser.add_argument(
        "--out", metavar="FILE", help="write the card to FILE (links made relative to it) instead of stdout"
    )


@command(
    "card", _card_arguments, kernel_dirs=False, help=("Render a kernel's CARD.md into its Hub README (kernel card).")
)
def cmd_card(args: argparse.Namespace) -> int:
    from kbuild.card.content import render_card
    from kbuild.model.manifest import load_manifest
    from kbuild.model.matrix import ci_variants

    manifest = load_manifest(Path(args.kernel))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_card(manifest, ci_variants=ci_variants(manifest), link_base=out.parent), encoding="utf-8")
        say(out)
    else:
        say(render_card(manifest, ci_variants=ci_variants(manifest)), end="")
    return 0


def _matrix_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--changed-since", metavar="REF", help="only kernels changed since REF (all when kbuild itself changed)"
    )
    group.add_argument(
        "--release", nargs="+", metavar="KERNEL", help="every variant of these kernels (names or folders)"
    )


@command(
    "matrix",
    _matrix_arguments,
    kernel_dirs=False,
    help="Print the CI jobs (build and test matrices) as JSON for GitHub's fromJSON.",
)
def cmd_matrix(args: argparse.Namespace) -> int:
    from kbuild.model import matrix

    root = Path(".")
    if not (root / "kernels").is_dir():
        raise KbuildError("no kernels/ folder here", fix="run `kbuild matrix` from the repository root")
    if args.release:
        kernel_dirs = matrix.named_kernels(root, [Path(k).name for k in args.release])
    elif args.changed_since:
        kernel_dirs = matrix.changed_kernels(root, args.changed_since)
    else:
        kernel_dirs = matrix.kernel_dirs(root)
    say(matrix.render(matrix.matrix(root, kernel_dirs)))
    return 0


def _publish_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kernel", metavar="KERNEL_DIR", help="the kernel folder")
    parser.add_argument(
        "--repo-id", metavar="ORG/NAME", help="target repository (default: build.toml's, or kernels-community/<name>)"
    )
    parser.add_argument(
        "--variant", action="append", metavar="VARIANT", help="publish only this built variant (repeatable)"
    )
    parser.add_argument(
        "--card-only", action="store_true", help="publish only the card (main) and benchmarks (version branch)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the operations without publishing")
    parser.add_argument(
        "--to", metavar="FOLDER", help="publish into a local hub folder (git repositories) instead of the Hub"
    )
    parser.add_argument(
        "--allow-nonportable",
        action="store_true",
        help="with --to: publish variants that fail the ABI check (e.g. built with this machine's toolchain)",
    )
    parser.add_argument(
        "--create-pr", action="store_true", help="open a Hub pull request against each branch instead of pushing to it"
    )
    parser.add_argument(
        "--branch", metavar="NAME", help="publish the variants to this branch instead of v<version> (e.g. pr-12)"
    )
    parser.add_argument(
        "--allow-breaking",
        action="store_true",
        help="emergencies only: publish an API break onto the existing version branch (the commit message says so)",
    )


@command(
    "publish",
    _publish_arguments,
    kernel_dirs=False,
    help=(
        "Publish built variants, benchmarks and the card to a Hub kernel repository. The Hub token comes "
        "from HF_TOKEN, else from `hf auth login`."
    ),
)
def cmd_publish(args: argparse.Namespace) -> int:
    from kbuild.release import execute, plan

    if args.allow_nonportable and not args.to:
        raise KbuildError(
            "--allow-nonportable applies to a local hub folder (--to) only",
            fix="build in the manylinux_2_28 container of `kbuild matrix` to publish to the Hub",
        )
    if args.create_pr and args.to:
        raise KbuildError("--create-pr applies to the Hub only", fix="drop --to, or drop --create-pr")
    release = plan.plan_release(
        Path(args.kernel), repo_id=args.repo_id, variants=args.variant, card_only=args.card_only
    )
    if args.branch:
        problem = branch_problem(args.branch)
        if problem:
            raise KbuildError(f"--branch {args.branch!r} is not a plain branch name: {problem}", fix="e.g. pr-12")
        release = dataclasses.replace(release, branch=args.branch)
    if args.dry_run:
        target = str(Path(args.to) / release.repo_id) if args.to else "hub"
        say("\n".join(plan.describe(release, target, allow_nonportable=args.allow_nonportable)))
        return 1 if release.abi_findings and not args.allow_nonportable else 0
    if args.to:
        for finding in release.abi_findings if args.allow_nonportable else []:
            say(f"warning: not portable, published anyway: {finding}", err=True)
        say(
            execute.publish_to_folder(
                release, Path(args.to), allow_nonportable=args.allow_nonportable, allow_breaking=args.allow_breaking
            )
        )
    else:
        execute.publish_to_hub(release, create_pr=args.create_pr, allow_breaking=args.allow_breaking)
    return 0


def _all_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hub", default=".hub", help="local hub folder to publish into (default: .hub)")
    parser.add_argument("--no-publish", action="store_true", help="skip publishing to the local hub folder")
    parser.add_argument(
        "--force-tests",
        action="store_true",
        help="run every kernel's quick tests, also those whose build and tests are unchanged since they last passed",
    )


@command(
    "all",
    _all_arguments,
    help=(
        "The main job: build every kernel for this machine (every CUDA capability of build.toml), run its quick "
        "tests (unless its build and tests are unchanged since they last passed), load each build with the "
        "`kernels` library, publish it to a local hub folder, and print a summary table."
    ),
)
def cmd_all(args: argparse.Namespace) -> int:
    from kbuild.pipeline import format_table, run_all

    results, ok = run_all(
        _kernel_dirs(args.kernels), None if args.no_publish else Path(args.hub), force_tests=args.force_tests
    )
    say()
    say(format_table(results))
    return 0 if ok else 1


def _api_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kernel", metavar="KERNEL_DIR", help="the kernel folder")
    parser.add_argument(
        "--against",
        metavar="FOLDER_OR_REPO_ID",
        help="where it is published: a local hub folder (kbuild publish --to) or a Hub repository id "
        "(default: build.toml's)",
    )
    parser.add_argument("--no-build", action="store_true", help="check the existing build without rebuilding")


@command(
    "api-check",
    _api_check_arguments,
    kernel_dirs=False,
    help=(
        "Build the kernel and compare its public API (ops and their schemas, `__all__` and the layers with their "
        "signatures) with the newest published build of its major version; exit 1 on a breaking change."
    ),
)
def cmd_api_check(args: argparse.Namespace) -> int:
    from kbuild.release.api_compat import api_check

    return api_check(Path(args.kernel), args.against, build=not args.no_build)


def _verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="FOLDER_OR_REPO_ID",
        help="a local hub folder (every repository in it), one of its repositories or checkouts, or a Hub repo id",
    )
    parser.add_argument(
        "--all-versions", action="store_true", help="every version branch (default: the newest of each repository)"
    )


@command(
    "verify",
    _verify_arguments,
    kernel_dirs=False,
    help=(
        "Check what is published: each variant's files against the digest in its metadata.json, the ABI rules, "
        "its signature bundle, and that the variant for this machine loads with its ops; exit 1 on any failure."
    ),
)
def cmd_verify(args: argparse.Namespace) -> int:
    from kbuild.release.verify import verify

    return verify(args.target, all_versions=args.all_versions)


def _completions_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell to complete kbuild in")
    parser.epilog = 'e.g. bash: eval "$(kbuild completions bash)"; fish: kbuild completions fish | source'


@command(
    "completions",
    _completions_arguments,
    kernel_dirs=False,
    help="Print the shell code that completes kbuild's commands and options (argcomplete).",
)
def cmd_completions(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    say(shellcode(["kbuild"], shell=args.shell), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbuild", description="Build, check, test and publish PyTorch kernels.", allow_abbrev=False
    )
    parser.add_argument("--version", action="version", version=f"kbuild {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for spec in COMMANDS:
        sub = subparsers.add_parser(spec.name, help=spec.help, description=spec.help, allow_abbrev=False)
        sub.set_defaults(func=spec.run)
        if spec.kernel_dirs:
            sub.add_argument(
                "kernels",
                nargs="*",
                metavar="KERNEL_DIR",
                help="kernel folders (default: this one if it is a kernel, else those in ./kernels/, else in ./)",
            )
        spec.arguments(sub)
    return parser


def _did_you_mean(parser: argparse.ArgumentParser, command: str, unknown: list[str]) -> str | None:
    """'did you mean --against?' for the mistyped options among `unknown`, if any is close to an
    option of `command`."""
    import difflib

    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = [o for action in subparsers.choices[command]._actions for o in action.option_strings]
    guesses = []
    for word in unknown:
        close = difflib.get_close_matches(word.partition("=")[0], options, n=1) if word.startswith("--") else []
        if close:
            guesses.append(f"{word.partition('=')[0]}: did you mean {close[0]}?")
    return "; ".join(guesses) or None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # a shell's completion request (see `kbuild completions`)
        import argcomplete

        argcomplete.autocomplete(parser)  # answers and exits
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, passthrough = argv[:split], argv[split + 1 :]
    args, unknown = parser.parse_known_args(argv)
    suggestion = _did_you_mean(parser, args.command, unknown)
    if suggestion:
        say(f"error: unrecognized arguments: {' '.join(unknown)}", err=True)
        say(f"  fix: {suggestion} (`kbuild {args.command} --help` lists its options)", err=True)
        return EXIT_BAD_INPUT
    if unknown and args.command == "test":
        say(f"error: unrecognized arguments: {' '.join(unknown)}", err=True)
        say(
            f"  fix: pass pytest arguments after --: kbuild test {' '.join(args.kernels)} -- {' '.join(unknown)}",
            err=True,
        )
        return 2
    if unknown:
        parser.parse_args(argv)  # argparse's own message for the other commands
    args.pytest_args = passthrough
    shown: set[str] = set()  # each warning once per command, however often its cause is read

    def show(message: Warning | str, *rest: object, **options: object) -> None:
        if str(message) not in shown:
            shown.add(str(message))
            say(f"warning: {message}", err=True)

    warnings.showwarning = show
    try:
        return args.func(args)
    except KbuildError as exc:
        say(f"error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        say("interrupted", err=True)
        return 130
    except Exception as exc:
        if os.environ.get("KBUILD_DEBUG") == "1":
            say(traceback.format_exc(), err=True, end="")
        say(f"error: {internal_error_line(exc)}", err=True)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())

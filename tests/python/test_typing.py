"""The package is typed (PEP 561): py.typed and stubs ship with it, every public name of
arraybridge and its submodules has a stub, and `mypy --strict` passes on
typing/usage.py (each public name called as README.md and docs/GUIDE.md show it) and
refuses each wrong call of typing/misuse.py, against the installed package."""
import ast
import importlib
import os
import pathlib
import re
import subprocess
import sys

import pytest

import arraybridge

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUILD = pathlib.Path(os.environ.get("ARRAYBRIDGE_BUILD", ROOT / "build"))
PACKAGE = pathlib.Path(arraybridge.__file__).parent
# Each public module and the stub that describes it.
STUBS = {"arraybridge": "__init__.pyi", "arraybridge.convert": "convert.pyi", "arraybridge.mpi": "mpi.pyi",
         "arraybridge.nixl": "nixl/__init__.pyi", "arraybridge.ray": "ray.pyi"}


def stub_names(stub):
    """The names a stub declares: classes, functions, annotated or assigned names, re-exports."""
    names = set()
    for node in ast.parse((PACKAGE / stub).read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname for alias in node.names if alias.asname == alias.name or
                         (alias.asname and not alias.asname.startswith("_")))
    return names


@pytest.mark.parametrize("module", sorted(STUBS))
def test_every_public_name_has_a_stub_in_the_installed_package(module):
    assert (PACKAGE / "py.typed").is_file(), f"{PACKAGE} has no py.typed"
    missing = set(importlib.import_module(module).__all__) - stub_names(STUBS[module])
    assert not missing, f"{STUBS[module]} declares no {sorted(missing)}"


def test_usage_names_every_public_name():
    text = (HERE / "typing" / "usage.py").read_text()
    unused = [f"{module}.{name}" for module in STUBS for name in importlib.import_module(module).__all__
              if not re.search(rf"\b{name}\b", text)]
    assert not unused, f"typing/usage.py never uses {unused}"


def test_mypy_strict_passes_on_usage_and_refuses_misuse(tmp_path):
    try:
        import mypy  # noqa: F401 - dev/requirements-test.txt installs it
    except ImportError:
        pytest.fail("mypy is not installed: pip install -r dev/requirements-test.txt (the typing test needs it)")
    cache = BUILD / "mypy-cache" if BUILD.is_dir() else tmp_path / "mypy-cache"
    files = [HERE / "typing" / "usage.py", HERE / "typing" / "misuse.py"]
    # From a folder outside the tree, so that only the installed package can answer `import arraybridge`.
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-executable", sys.executable,
                           "--cache-dir", str(cache), "--no-error-summary", "--show-error-codes", *map(str, files)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    usage_errors = [line for line in said.splitlines() if "usage.py" in line]
    assert not usage_errors, "\n".join(usage_errors)
    expected = {number: code for number, line in enumerate(files[1].read_text().splitlines(), 1)
                for code in re.findall(r"# expect: ([\w-]+)", line)}
    found = {int(m[1]): m[2] for m in re.finditer(r"misuse\.py:(\d+): error: .*\[([\w-]+)\]$", said, re.M)}
    assert found == expected, said

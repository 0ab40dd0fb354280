"""The README's examples work as written: the C one compiled against this tree's
header and library and run, the Python one run."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BUILD = pathlib.Path(os.environ.get("ARRAYBRIDGE_BUILD", ROOT / "build"))


def example(heading, language):
    section = README.read_text().split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)


def test_readme_python_example_runs():
    code = example("From Python", "python")
    assert len(code.strip().splitlines()) == 5
    exec(compile(code, str(README), "exec"), {})


def test_readme_c_example_compiles_warning_free_and_runs(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler or not (BUILD / "lib" / "libarraybridge.so").exists():
        pytest.skip(f"no C compiler or no library in {BUILD}: run make")
    source = tmp_path / "example.c"
    source.write_text(example("From C", "c"))
    program = tmp_path / "example"
    built = subprocess.run([compiler, "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'include'}", str(source),
                            f"-L{BUILD / 'lib'}", "-larraybridge", f"-Wl,-rpath,{BUILD / 'lib'}", "-o", str(program)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert re.match(r"(host_to_device|zero_copy|host_wrap): ", ran.stdout), ran.stdout  # the report's path and why

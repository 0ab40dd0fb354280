"""Builds tests/python/exchange_peer.c (a framework of the tests' own that speaks the
DLPack C exchange API) once per session, against this Python and the project's
dlpack.h, and imports it."""
import importlib.util
import pathlib
import subprocess
import sysconfig

ROOT = pathlib.Path(__file__).resolve().parents[2]


def build_peer(folder):
    source = ROOT / "tests" / "python" / "exchange_peer.c"
    target = pathlib.Path(folder) / ("exchange_peer" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([sysconfig.get_config_var("CC").split()[0], "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Werror",
                    "-I", sysconfig.get_paths()["include"], "-I", str(ROOT / "include"), str(source), "-o", str(target)],
                   check=True, capture_output=True, text=True)
    spec = importlib.util.spec_from_file_location("exchange_peer", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""The property test of conversions: every (source, target, dtype with its extremes,
shape from 0-d to empty to 3-d, strides with negative steps, read-only or not) obeys
the law in conversion_law.py. Derandomized (a fixed seed) with no example database,
so CI runs the same few hundred examples every time; what it found and we fixed is
kept as plain regression tests beside it. TensorFlow's cases run in a subprocess:
TensorFlow aborts the process on some input, and that must fail a test, not end it."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("hypothesis", reason="hypothesis is installed by `make test`; run it through make")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import conversion_law as law  # noqa: E402

pytest.importorskip("jax", reason="JAX is installed by `make test`; run it through make")
HAVE = importlib.util.find_spec
IN_PROCESS = ["numpy", "jax"] + [name for name in ("pyclesperanto", "torch") if HAVE(name)]
# Sources only: torch tensors whose lazy bits or autograd DLPack cannot say.
TORCH_KINDS = ["torch_conj", "torch_neg", "torch_grad"] if HAVE("torch") else []
EXAMPLES = int(os.environ.get("ARRAYBRIDGE_LAW_EXAMPLES", "300"))
FIXED = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_conversions_keep_values_dtypes_and_who_may_write():
    outcomes = []

    @FIXED
    @given(source=st.sampled_from(IN_PROCESS + TORCH_KINDS), target=st.sampled_from(IN_PROCESS), array=law.arrays())
    def draw(source, target, array):
        outcomes.append(law.check(source, target, array))

    draw()
    assert outcomes.count("converted") >= len(outcomes) // 2, outcomes.count("converted")  # refusals are the rare way


def test_device_round_trips_keep_values_and_dtypes():
    outcomes = []

    @FIXED
    @given(source=st.sampled_from(IN_PROCESS + TORCH_KINDS), device=st.sampled_from(["cpu", "opencl:0"]),
           array=law.arrays())
    def draw(source, device, array):
        outcomes.append(law.check_device_round_trip(source, array, device))

    draw()
    assert outcomes.count("converted") >= len(outcomes) // 2, outcomes.count("converted")


def test_every_layout_reaches_every_target_with_exact_values():
    """Flipped, stepped, permuted and broadcast views into every framework here: each
    converts (one compact copy where the target cannot hold the layout), exactly."""
    targets = []

    @FIXED
    @given(data=st.data(), target=st.sampled_from(IN_PROCESS))
    def draw(data, target):
        law.check_layout(target, data.draw(law.layouts(target)))
        targets.append(target)

    draw()
    assert set(targets) == set(IN_PROCESS), set(targets)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is installed by `make test`; run it through make")
@pytest.mark.slow  # TensorFlow in a fresh interpreter
def test_tensorflow_conversions_obey_the_law_in_a_subprocess():
    frameworks = ["tensorflow"] + IN_PROCESS
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        if {"pyclesperanto" in frameworks!r}:  # its PoCL must start before TensorFlow loads, or it crashes by itself
            import numpy, pyclesperanto
            pyclesperanto.push(numpy.zeros(1, numpy.float32))
        import tensorflow
        from hypothesis import HealthCheck, given, settings, strategies as st
        import conversion_law as law
        frameworks = {frameworks!r}
        outcomes = []
        @settings(max_examples={max(EXAMPLES // 2, 50)}, derandomize=True, database=None, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
        @given(source=st.sampled_from(frameworks), target=st.sampled_from(frameworks), array=law.arrays())
        def run(source, target, array):
            if "tensorflow" in (source, target):
                outcomes.append(law.check(source, target, array))
        run()
        @settings(max_examples={max(EXAMPLES // 6, 20)}, derandomize=True, database=None, deadline=None)
        @given(data=st.data())
        def layouts(data):  # every layout into TensorFlow, exactly
            law.check_layout("tensorflow", data.draw(law.layouts("tensorflow")))
        layouts()
        print(len(outcomes), outcomes.count("converted"))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    checked, converted = map(int, done.stdout.split()[-2:])
    assert checked >= 30 and converted >= 10, done.stdout

"""arraybridge.ray: Ray Direct Transport between two actors for each framework here
(NumPy, torch and JAX on the CPU, arraybridge Tensors on PoCL, pyclesperanto), every
kind of array exact (strided, 0-d, empty, bool, bfloat16, complex, read-only), a dict
of 100 arrays in one READ, one ObjectRef read by two receivers, the receiver's choice
of device, and failures: a sender killed before the read is an error, never a hang;
a receiver killed does not keep the sender's memory. One local Ray (num_cpus=2) for
the module: starting it costs about 10 s here, each actor a few more."""
import importlib.util
import os
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("ray", reason="ray is installed by `make test` (dev/requirements-test.txt); run it through make")
if importlib.util.find_spec("nixl_cu12") is None and importlib.util.find_spec("nixl") is None:
    pytest.skip("NIXL is not installed (dev/setup_python.sh test installs nixl-cu12)", allow_module_level=True)

import ray  # noqa: E402

pytestmark = pytest.mark.slow  # one local Ray and five actors: about 90 s here
ONE_SHARD = True  # one Ray cluster for the module (tests/python/shards.py)

import arraybridge as ab  # noqa: E402
import arraybridge.ray as abray  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 120


FAKE_CUDA = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "fake-cuda", "libcuda.so.1")
ENV_VARS = {"PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), "UCX_MODULES": "^ib"}


@pytest.fixture(scope="module")
def actors():
    sys.path.insert(0, HERE)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": ENV_VARS})
    import ray_actors  # registers the transports, as the workers do when they import it
    registered = abray.register(ray_actors.FRAMEWORKS)
    sender, receiver = ray_actors.Sender.remote(), ray_actors.Receiver.remote()
    yield registered, ray_actors, sender, receiver
    ray.shutdown()


def kinds_of(framework):
    kinds = list(__import__("ray_actors").KINDS)
    if framework == "numpy":
        kinds.remove("bf16")  # NumPy has no bfloat16
    if framework == "jax":
        kinds.remove("int64")  # JAX without x64 keeps no int64 (refused: test_jax_without_x64_refuses_64_bits)
    if framework == "pyclesperanto":  # 1 to 3 dims, no empty arrays, no 64-bit, bool or complex
        kinds = ["read-only", "bf16"]
    return kinds



def test_receive_on_a_device_a_framework_cannot_hold_is_refused_at_once():
    """receive_on("opencl:0") for every framework reached NumPy's transport, whose first
    read then failed deep in Ray with NumPy's "Unsupported device in DLTensor"."""
    try:
        abray.receive_on("opencl:0")
        assert set(abray._state["devices"]) == {"pyclesperanto", "arraybridge"}, abray._state["devices"]
        abray.receive_on(None)
        assert abray._state["devices"] == {}
        with pytest.raises(ValueError, match=r"numpy arrays cannot live in opencl memory .*receive_on\('opencl:0', "
                                             r"'arraybridge'\)"):
            abray.receive_on("opencl:0", "numpy")
        abray.receive_on("cuda:1", "torch")
        assert abray._state["devices"] == {"torch": "cuda:1"}
    finally:
        abray.receive_on(None)

def test_register_names_a_transport_per_framework_and_again_changes_nothing(actors):
    registered, ray_actors, *_ = actors
    assert registered == {f: abray.transport(f) for f in ray_actors.FRAMEWORKS}
    assert abray.register(ray_actors.FRAMEWORKS) == registered  # in the driver again, or in an actor: no error
    with pytest.raises(ValueError, match="no transport"):
        abray.transport("matlab")


def test_a_transport_named_after_register_is_registered_then():
    """The docs hunt of 2026-11-30: SCALING.md's example calls register() and then names
    transport("jax"); with JAX imported after register(), AB_JAX was left out, and the
    class's ray.method failed with Ray's "Invalid tensor transport: AB_JAX", which
    says nothing of why. transport() now registers what it names."""
    import subprocess
    code = """
import ray, arraybridge.ray as abray
from ray.experimental.rdt import util
abray.register()
assert "AB_JAX" not in util.transport_manager_info, "JAX's transport was registered before JAX's import"
import jax.numpy as jnp

@ray.remote
class Producer:
    @ray.method(tensor_transport=abray.transport("jax"))
    def batch(self):
        return {"x": jnp.ones(3)}

print(sorted(name for name in util.transport_manager_info if name.startswith("AB_")))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                          env=dict(os.environ, UCX_MODULES="^ib"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "['AB_JAX', 'AB_NUMPY', 'AB_TENSOR']", done.stdout


def test_threads_registering_one_transport_at_once_register_it_once():
    """register() read what Ray knew, then registered what was missing: two threads
    naming a new transport at once could both register it, and the second met Ray's
    "Transport AB_TENSOR already registered" (Ray's registration made slow here, to
    hold the window open)."""
    import subprocess
    code = """
import threading, time
import ray.experimental as experimental, arraybridge.ray as abray
registered = experimental.register_tensor_transport
def slow(*args, **kwargs):
    time.sleep(0.2)
    return registered(*args, **kwargs)
experimental.register_tensor_transport = slow
errors = []
def register():
    try:
        assert abray.transport("arraybridge") == "AB_TENSOR"
    except Exception as error:
        errors.append(repr(error))
threads = [threading.Thread(target=register) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(errors)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                          env=dict(os.environ, UCX_MODULES="^ib"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "[]", done.stdout


def test_the_test_actors_load_where_a_framework_is_missing():
    """The H200 of 2026-11-30 has no pyclesperanto: ray_actors (which test_ray_gpu.py
    imports) named its transport anyway, and Ray refused the class ("Invalid tensor
    transport: AB_PYCLESPERANTO"). Here the frameworks are hidden from the module."""
    import subprocess
    hide = """
import importlib.util, sys
found = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name in ("torch", "jax", "pyclesperanto") else found(name, *a)
sys.path.insert(0, sys.argv[1])
import ray_actors
print(sorted(ray_actors.FRAMEWORKS), sorted(m for m in ("numpy", "torch", "jax", "pyclesperanto", "cuda")
                                            if hasattr(ray_actors.Sender, m)))
"""
    done = subprocess.run([sys.executable, "-c", hide, HERE], capture_output=True, text=True, timeout=TIMEOUT,
                          env=dict(os.environ, UCX_MODULES="^ib"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "['arraybridge', 'numpy'] ['cuda', 'numpy']"


@pytest.mark.parametrize("framework", ["numpy", "arraybridge", "torch", "jax", "pyclesperanto"])
def test_every_kind_of_array_arrives_exact(actors, framework):
    if framework not in actors[1].FRAMEWORKS:
        pytest.skip(f"{framework} is installed by `make test`")
    _, ray_actors, sender, receiver = actors
    ref = getattr(sender, framework).remote(kinds_of(framework))
    assert ray.get(receiver.check.remote(framework, ref), timeout=TIMEOUT) == []


def test_one_object_read_by_two_receivers_and_a_receiver_choosing_its_device(actors):
    _, ray_actors, sender, receiver = actors
    on_opencl = ray_actors.Receiver.remote("opencl:0", "arraybridge")
    # Started before the object exists: a new actor's imports took past Ray's 60 s wait
    # for an RDT object once on a loaded CI machine ("not found in RDT object store").
    ray.get(on_opencl.__ray_ready__.remote(), timeout=TIMEOUT)
    ref = sender.arraybridge.remote(["strided", "complex"])
    assert ray.get(receiver.check.remote("arraybridge", ref), timeout=TIMEOUT) == []
    assert ray.get(on_opencl.check.remote("arraybridge", ref), timeout=TIMEOUT) == []
    assert ray.get(receiver.devices.remote(ref), timeout=TIMEOUT) == {"strided": "cpu", "complex": "cpu"}
    assert ray.get(on_opencl.devices.remote(ref), timeout=TIMEOUT) == {"strided": "opencl:0", "complex": "opencl:0"}
    ray.kill(on_opencl)


def test_tensors_go_through_rays_object_store_by_value_too(actors):
    """Without a tensor_transport (an argument, ray.put, a task's result) Ray pickles what
    it carries, and a Tensor raised "cannot pickle 'arraybridge.Tensor' object" (the
    ecosystem hunt, 2026-12-01). Now it travels by value, exact, to its own device."""
    _, ray_actors, _, receiver = actors
    made = {kind: ray_actors.make("arraybridge", kind) for kind in kinds_of("arraybridge")}
    assert ray.get(receiver.check.remote("arraybridge", made), timeout=TIMEOUT) == []
    assert set(ray.get(receiver.devices.remote(made), timeout=TIMEOUT).values()) == {"opencl:0"}
    back = ray.get(ray.put(made["strided"]), timeout=TIMEOUT)
    assert back.device == "opencl:0"
    np.testing.assert_array_equal(np.from_dlpack(back.to("cpu")), ray_actors.recipe("strided"))


def test_a_dict_of_100_arrays_moves_as_one_batch(actors):
    _, _, sender, receiver = actors
    ref = sender.many.remote(100, 256)
    got = ray.get(receiver.many.remote(ref), timeout=TIMEOUT)
    assert got == sorted((f"w{i}", float(i), 256) for i in range(100))
    stats = ray.get(receiver.stats.remote())
    assert stats["receives"] >= 100


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is installed by `make test`")
def test_a_torch_receiver_gets_requires_grad_as_the_sender_had_it(actors):
    """A newcomer's trial: parameters that require grad arrived without it (Ray's object
    store keeps it). Each arrives as a leaf of the receiver's own, values exact."""
    _, _, sender, receiver = actors
    got = ray.get(receiver.autograd.remote(sender.autograd.remote()), timeout=TIMEOUT)
    assert got == {"leaf": (True, True, [1.5, -2.0, 3.25]), "made": (True, True, [3.0, -4.0, 6.5]),
                   "plain": (False, True, [0.0, 1.0, 2.0])}


def test_an_array_that_cannot_be_sent_is_named_by_its_place(actors):
    """A newcomer's trial: a bare BufferError, not saying which of the arrays it was."""
    _, _, sender, receiver = actors
    with pytest.raises(Exception, match=r"array 1 of the 2 the method returned \(a numpy.ndarray of <U1, shape "
                                        r"\(2,\)\) cannot be sent: DLPack only supports"):
        ray.get(receiver.size.remote(sender.unsendable.remote()), timeout=TIMEOUT)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is installed by `make test`")
def test_an_array_nixl_cannot_publish_is_named_by_its_place(actors):
    """The hunt of 2026-11-30: a float8 tensor among a method's arrays was refused without
    saying which it was."""
    _, _, sender, receiver = actors
    with pytest.raises(Exception, match=r"array 2 of the 3 to publish, a float8_e4m3fn tensor of shape \(2,\), "
                                        r"cannot be published"):
        ray.get(receiver.size.remote(sender.unpublishable.remote()), timeout=TIMEOUT)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is installed by `make test`")
def test_an_array_a_jax_receiver_would_narrow_is_named_by_its_place():
    """A JAX receiver without x64 refuses int64 rather than narrow it, naming which array."""
    import jax
    if jax.config.jax_enable_x64:
        pytest.skip("JAX has x64 on here: it holds int64")
    received = [ab.to_device(np.ones(2, np.float32), "cpu"), ab.to_device(np.arange(3), "cpu")]
    assert abray._finish("jax", received[0], {}, 0, 2).dtype == np.float32
    with pytest.raises(ValueError, match=r"array 1 of the 2 received \(int64, shape \(3,\)\) cannot be a jax "
                                         r"array: .*int64"):
        abray._finish("jax", received[1], {}, 1, 2)


def wait_until(check, seconds=30):
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.2)
    return check()


def test_the_senders_memory_goes_when_ray_collects_the_object(actors):
    _, _, sender, receiver = actors
    ref = sender.big.remote(1 << 20)
    object_id = ref.hex()
    assert ray.get(receiver.size.remote(ref), timeout=TIMEOUT) == 1 << 20
    time.sleep(1.0)
    assert ray.get(sender.holds.remote(object_id))  # kept while the ObjectRef lives: read again, the same
    assert ray.get(receiver.size.remote(ref), timeout=TIMEOUT) == 1 << 20
    del ref
    assert wait_until(lambda: not ray.get(sender.holds.remote(object_id)))


def test_a_receiver_killed_mid_read_costs_the_sender_nothing_it_keeps(actors):
    _, ray_actors, sender, receiver = actors
    before = ray.get(sender.stats.remote())
    doomed = ray_actors.Receiver.remote()
    ref = sender.big.remote(256 << 20)
    pending = doomed.size.remote(ref)
    time.sleep(1.0)  # the read under way, or about to be
    ray.kill(doomed)
    with pytest.raises(Exception):
        ray.get(pending, timeout=TIMEOUT)
    assert ray.get(receiver.size.remote(ref), timeout=TIMEOUT) == 256 << 20  # a second read succeeds
    object_id = ref.hex()
    del ref, pending
    assert wait_until(lambda: not ray.get(sender.holds.remote(object_id)))
    assert wait_until(lambda: ray.get(sender.stats.remote())["slots_in_use"] <= before["slots_in_use"])
    after = ray.get(sender.stats.remote())
    assert after["registrations"] <= before["registrations"] + 5  # the arena grew for 256 MiB once, no more


def test_whether_an_actor_has_our_transport_is_asked_once_per_actor(actors, monkeypatch):
    """Ray asks before every call of a method on our transport, and each ask was a round
    trip to the actor: 1.6-1.9 ms of a 4 KiB transfer's 7-10 ms here. The module's two
    actors, with nothing known of them yet (new actors cost 20 s of imports here)."""
    _, _, sender, receiver = actors
    monkeypatch.setattr(abray, "_capable", set())
    manager = abray.ArraybridgeNumpyTransport()
    asked = []
    real_get = ray.get
    here = threading.get_ident()  # Ray's own threads in this process call ray.get too

    def counted_get(*args, **kwargs):
        if threading.get_ident() == here:
            asked.append(args)
        return real_get(*args, **kwargs)
    monkeypatch.setattr(ray, "get", counted_get)
    assert [manager.actor_has_tensor_transport(sender) for _ in range(3)] == [True] * 3
    assert len(asked) == 1
    assert manager.actor_has_tensor_transport(receiver) is True and len(asked) == 2  # each actor its own
    monkeypatch.setattr(ray, "get", real_get)
    assert ray.get(receiver.check.remote("numpy", sender.numpy.remote(["strided"])), timeout=TIMEOUT) == []


@pytest.mark.parametrize("connected", [False, True])
def test_a_sender_killed_before_the_read_is_an_error_not_a_hang(actors, connected):
    """Connected first (a read from it done), NIXL raised its own nixlRemoteDisconnectError
    where PeerLostError is promised (a helper's hunt)."""
    _, ray_actors, _, receiver = actors
    doomed = ray_actors.Sender.remote()
    if connected:
        assert ray.get(receiver.check.remote("numpy", doomed.numpy.remote(["strided"])), timeout=TIMEOUT) == []
    ref = doomed.numpy.remote(["strided"])
    ray.wait([ref], timeout=TIMEOUT)
    ray.kill(doomed)
    time.sleep(0.5)
    start = time.monotonic()
    with pytest.raises(Exception) as raised:
        ray.get(receiver.check.remote("numpy", ref), timeout=TIMEOUT)
    assert time.monotonic() - start < TIMEOUT
    text = str(raised.value)
    assert "PeerLostError" in text or "died" in text.lower() or "lost" in text.lower(), text
    if connected:  # the read itself found the sender gone: ours, not NIXL's own exception
        assert isinstance(getattr(raised.value, "cause", None), ab.PeerLostError), text


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is installed by `make test`")
def test_jax_without_x64_refuses_64_bits_rather_than_narrow(actors):
    _, _, sender, receiver = actors
    ref = sender.numpy.remote(["int64"])
    # A NumPy int64 goes to NumPy exactly; only a JAX receiver would have to narrow it.
    assert ray.get(receiver.check.remote("numpy", ref), timeout=TIMEOUT) == []


def with_fake_cuda(actor_class, *args):
    """An actor in a worker of its own that has the fake CUDA driver (its memory is shared
    memory behind IPC handles, so handles open across processes as on a GPU)."""
    return actor_class.options(runtime_env={"env_vars": dict(ENV_VARS, ARRAYBRIDGE_CUDA_LIBRARY=FAKE_CUDA)}).remote(*args)


@pytest.mark.skipif(not os.path.exists(FAKE_CUDA), reason="the fake CUDA driver is built by `make test`")
def test_cuda_arrays_go_by_ipc_within_a_node_and_by_a_read_where_the_handles_cannot_open(actors):
    _, ray_actors, _, without_cuda = actors
    sender = with_fake_cuda(ray_actors.Sender)
    on_gpu = with_fake_cuda(ray_actors.Receiver, "cuda:0", "arraybridge")
    ref = sender.cuda.remote(list(ray_actors.KINDS))
    assert ray.get(on_gpu.check.remote("arraybridge", ref), timeout=TIMEOUT) == []
    assert set(ray.get(on_gpu.devices.remote(ref), timeout=TIMEOUT).values()) == {"cuda:0"}
    stats = ray.get(on_gpu.stats.remote())
    assert stats["ipc_reads"] == 2 and stats.get("receives", 0) == 0, stats  # both reads by IPC, none by NIXL
    # A process without CUDA cannot open the handles: it READs the same object over NIXL.
    before = ray.get(without_cuda.stats.remote())
    assert ray.get(without_cuda.check.remote("arraybridge", ref), timeout=TIMEOUT) == []
    after = ray.get(without_cuda.stats.remote())
    assert after["receives"] == before["receives"] + len(ray_actors.KINDS) and after["ipc_reads"] == 0, after
    object_id = ref.hex()
    del ref
    assert wait_until(lambda: not ray.get(sender.holds.remote(object_id)))  # the IPC copies went with it
    # A sender that dies: its handles no longer open, and the READ says the peer is lost.
    ref = sender.cuda.remote(["strided"])
    ray.wait([ref], timeout=TIMEOUT)
    ray.kill(sender)
    time.sleep(0.5)
    with pytest.raises(Exception) as raised:
        ray.get(on_gpu.check.remote("arraybridge", ref), timeout=TIMEOUT)
    assert "PeerLostError" in str(raised.value), raised.value
    ray.kill(on_gpu)

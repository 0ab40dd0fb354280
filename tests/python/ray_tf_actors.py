"""The actors of test_ray_tensorflow.py: TensorFlow's transport, registered where this
module is imported (the driver and each worker), as ray.method needs."""
import numpy as np
import ray

import arraybridge.ray as abray

abray.register(["tensorflow"])  # before TensorFlow is imported: it loads NIXL first (their gRPCs clash)
import tensorflow as tf  # noqa: E402


@ray.remote
class Sender:
    @ray.method(tensor_transport="AB_TENSORFLOW")
    def make(self):
        return {"matrix": tf.reshape(tf.range(12, dtype=tf.float64), (3, 4)), "flags": tf.constant([True, False]),
                "wide": tf.constant([2**40 + 1], dtype=tf.int64)}


@ray.remote(enable_tensor_transport=True)
class Receiver:
    def check(self, received):
        got = {key: (value.numpy().tolist(), value.dtype.name, type(value).__name__) for key, value in received.items()}
        want = {"matrix": (np.arange(12.0).reshape(3, 4).tolist(), "float64", "EagerTensor"),
                "flags": ([True, False], "bool", "EagerTensor"), "wide": ([2**40 + 1], "int64", "EagerTensor")}
        return [f"{key}: {got[key]} not {want[key]}" for key in want if got[key] != want[key]]

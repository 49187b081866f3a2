"""Why TensorFlow's STREAM triad is slow on a CPU: allocation, in-place update, or XLA itself.

    python lab/tf_stream_probe.py [--mib 128]

Times the triad a = b + q*c on float64 arrays three ways, in decimal GB/s by STREAM's count
(3 words per element), best of 5:

* ``alloc``: the check's way, an XLA function returning a new tensor on every call;
* ``assign``: an XLA function assigning into a ``tf.Variable`` (the bare reference);
* ``loop``: 20 triads inside one XLA while-loop, whose carried buffer is reused, so no
  output is allocated per triad: what XLA's code reaches without the per-call allocation.

Run it beside ``numpy`` (the numpy STREAM check) and under ``taskset -c 0`` to see how much
of the gap is threads.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    """Print the three rates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=128, help="MiB per array (default 128)")
    args = parser.parse_args()
    import tensorflow as tf

    n = args.mib * 2**20 // 8
    a, b, c = (tf.random.stateless_uniform([n], seed=[1, i], dtype=tf.float64) for i in range(3))
    q = tf.constant(3.0, tf.float64)
    jit = tf.function(jit_compile=True)
    alloc = jit(lambda b, c, q: b + q * c)
    va, vb, vc = tf.Variable(a), tf.Variable(b), tf.Variable(c)
    assign = jit(lambda: va.assign(vb + q * vc))
    iterations = 20

    @tf.function(jit_compile=True)
    def loop(b: tf.Tensor, c: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, acc: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            # acc[:1] makes each pass depend on the last, so XLA cannot hoist the triad.
            return i + 1, b + q * c + 0.0 * acc[:1]

        return tf.while_loop(lambda i, acc: i < iterations, body, (0, tf.zeros([n], b.dtype)))[1]

    def best(fn, calls: int) -> float:  # type: ignore[no-untyped-def]
        fn()
        fn()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                out = fn()
            (out if out is not None and hasattr(out, "numpy") else va)[-1].numpy()
            times.append((time.perf_counter() - start) / calls)
        return min(times)

    counted = 3 * n * 8
    print(f"alloc  {counted / best(lambda: alloc(b, c, q), 10) / 1e9:6.1f} GB/s")
    print(f"assign {counted / best(assign, 10) / 1e9:6.1f} GB/s")
    print(f"loop   {counted * iterations / best(lambda: loop(b, c, q), 1) / 1e9:6.1f} GB/s")


if __name__ == "__main__":
    main()

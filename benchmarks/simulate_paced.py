"""Does `--simulate` measure what it should? Against a producer whose pace is set (issue 41).

The producer is a TensorFlow sleep per batch: it uses no CPU, so what the host's load does to a
real pipeline's rate barely touches it. Per round: bench's producer window (`producer.measure`),
then `simulate` with consumers at 0.5x, 1/0.7x and 3x that window's rate, each printing the wait
the window predicts, the wait measured, the simulation's own producer rate over the window's,
and how well the consumer held its step.

    PYTHONPATH=. python benchmarks/simulate_paced.py [--period-ms 90] [--rounds 3]

Under load 5 (2026-12-07, a 90 ms pace): window 0.991-0.994 of the set rate; measured 0.001 /
0.301-0.304 / 0.667-0.668 against 0 / 0.300 / 0.667. Under load 7-11, with others on both cores,
the sleeping producer's own rate moved 15-20% between windows (its thread waits for a core after
each sleep): the machinery is exact, a loaded host's rate is not steady.
"""

from __future__ import annotations

import argparse

from tfpipe.bench import wait
from tfpipe.bench.measure import producer
from tfpipe.bench.measure.simulate import simulate


class Paced:
    """A pipeline of batches of `batch_size` examples, each after a sleep of `period` s."""

    def __init__(self, period: float, batch_size: int = 128) -> None:
        self.period, self.batch_size = period, batch_size

    def dataset(self, upto=None, threadpool_size=None):  # the Pipeline interface simulate uses
        from tensorflow.python.data.experimental.ops import testing

        from tfpipe._tf import tf

        ds = tf().data.Dataset.range(10**9).map(lambda i: tf().fill([self.batch_size, 4], i))
        return ds.apply(testing.sleep(int(self.period * 1e6))).prefetch(2)

    def examples_per_element(self, upto=None) -> int:
        return self.batch_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--period-ms", type=float, default=90.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    paced = Paced(args.period_ms / 1000)
    nominal = paced.batch_size / paced.period
    for r in range(args.rounds):
        w = producer.measure(
            paced.dataset, examples_per_element=paced.batch_size, seconds=args.seconds, warmup=1.5
        )
        cells = [f"round {r}: window {w.examples_per_sec / nominal:.3f}x the set rate"]
        for ratio in (0.5, 1 / 0.7, 3.0):
            consumer = w.examples_per_sec * ratio
            sim = simulate(
                paced, step_time_ms=paced.batch_size / consumer * 1000, seconds=args.seconds, warmup=1.5
            )
            own = sim.producer_examples_per_sec / w.examples_per_sec
            cells.append(
                f"{ratio:.2f}x: predicted {wait.predicted_wait(w.examples_per_sec, consumer):.3f} measured "
                f"{sim.measured_input_wait:.3f} (its producer {own:.3f}x the window, step held "
                f"{sim.consumer_step_ms / sim.step_time_ms:.3f})"
            )
        print("; ".join(cells), flush=True)


if __name__ == "__main__":
    main()

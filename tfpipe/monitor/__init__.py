"""Input wait measured live in `model.fit`: the share of each training step spent waiting for
its batch, on Keras 3's TensorFlow and JAX backends, with no profiler run.

    >>> monitor = tfpipe.monitor.InputWait(log_dir="logs")   # log_dir: TensorBoard scalars too
    >>> model.fit(monitor.watch(ds), epochs=3, steps_per_epoch=500, callbacks=[monitor])
    >>> print(monitor.result.host)   # input wait 31.2% [29.8, 32.6] of step time: ...

How the wait is seen. `watch(ds)` ends the pipeline with a stage that takes the time, inside
tf.data, when the consumer asks for each element and when it gets it (tfpipe/monitor/stamps.py).
The callback takes the time each train call begins and, on JAX, when each step is done on the
device (Keras hands a batch-end callback the step's outputs once they are ready). Then
(tfpipe/monitor/timeline.py):

- TensorFlow (no strategy): the train function takes each batch with `get_next` inside its
  `tf.function`, in the step's own thread, so the time inside `get_next` is the step's wait,
  for every step of a `steps_per_execution` loop too. A step's time runs from one call to the
  next.
- JAX: Keras takes each batch in Python (`next()` on the dataset) and dispatches the jitted step
  asynchronously: Python runs ahead, fetching while the device computes, and such a fetch costs
  the device nothing. The device waits only from the end of the step before until the fetch
  that feeds the next ends: that overlap is the wait. A step's time runs from one step's end
  on the device to the next's.
- TensorFlow with a strategy that prefetches to its devices (MirroredStrategy, TPUStrategy): the
  strategy's thread takes the batches, so the step waits only when the element its call
  consumes had not been delivered when the call began.

Refused by name: `steps_per_execution` > 1 on JAX and under a prefetching strategy, where one
step's wait cannot be told from its neighbours'.
"""

from tfpipe.monitor.callback import InputWait
from tfpipe.monitor.figures import Figure, Result

__all__ = ["Figure", "InputWait", "Result"]

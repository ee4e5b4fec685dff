"""The `distribute` stage: hand a pipeline to tf.data service workers, and watch them.

TensorFlow's client waits forever for a lost peer: with its worker gone it retries the dead
task, and with its dispatcher gone it waits after the last element for an end-of-job that no
one will send (measured with TF 2.21 and SIGKILLed `tfpipe serve` processes: stuck at 116 of
240 elements, and after all 240). Its public API has no timeout. So `distribute` puts a small
watchdog between the service and the consumer: while no element arrives it probes the
dispatcher and the workers the dispatcher lists, and a peer that stays unreachable for
`peer_timeout` seconds ends the iteration with a `ServiceError` that names it. A dispatcher
restarted with its `work_dir` journal, or a worker restarted at the same address, within
that time is simply waited for, as TensorFlow intends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from tfpipe import _tf
from tfpipe.errors import ConfigError, field_error
from tfpipe.service.address import (
    DEFAULT_CONNECT_TIMEOUT,
    ServiceAddress,
    ServiceError,
    probe_all,
    wait_for,
    worker_addresses,
)
from tfpipe.validation import check_choice, check_int, check_seconds

if TYPE_CHECKING:
    import tensorflow as tf
    from tensorflow.python.eager.cancellation import CancellationManager

ProcessingMode = Literal["parallel_epochs", "dynamic"]
Compression = Literal["none", "auto", "snappy"]
TargetWorkers = Literal["auto", "any", "local"]

# Long enough for a supervisor to restart a dispatcher or worker process on the same host (a
# `tfpipe serve` start took 3-8 s here, TensorFlow's import included), short enough that a
# training job whose peer is gone fails within about a minute instead of never.
DEFAULT_PEER_TIMEOUT = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class DistributeConfig:
    """How a dataset is handed to the tf.data service.

    Args:
      processing_mode: "parallel_epochs": every worker runs the whole dataset (N workers give N
        copies per epoch; shuffle files so they differ). "dynamic": the dispatcher hands out the
        source's elements (files) one split at a time, so each is produced at most once per job;
        the source must be splittable (list of files, range, from_tensor_slices).
      job_name: consumers with the same name share one job and split its elements.
      compression: "none", "auto" (TF decides, in practice snappy) or "snappy".
      max_outstanding_requests: elements in flight per consumer; None lets TF autotune.
        Client memory is bounded by element size times this.
      target_workers: "auto", "any" or "local"; every consumer of a shared job must agree.
      connect_timeout: seconds to wait for the dispatcher to answer before raising; None skips
        the check and leaves TensorFlow to retry forever.
      peer_timeout: while the client waits for data, seconds a dispatcher or worker may stay
        unreachable before the iteration fails with a ServiceError naming it; None leaves
        TensorFlow to wait forever (and skips the watchdog's per-element Python step).
    """

    processing_mode: ProcessingMode = "parallel_epochs"
    job_name: str | None = None
    # Measured with one in-process worker on loopback (2 cores, batches of 64 224x224x3
    # natural-image uint8, the imagenet preset's default output): snappy shrinks them by 0.7%
    # (pyarrow snappy ratio 1.007) yet cuts throughput from 1853 to 1207 img/s; random float32
    # tables compress 1.00x. Use "auto" for float images (2.0x) across a slow network.
    compression: Compression = "none"
    max_outstanding_requests: int | None = None
    # TF's default; consumers of one shared job must all use the same value.
    target_workers: TargetWorkers = "auto"
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT
    peer_timeout: float | None = DEFAULT_PEER_TIMEOUT

    def __post_init__(self) -> None:
        check_choice("processing_mode", self.processing_mode, ProcessingMode)
        if self.job_name is not None and (not isinstance(self.job_name, str) or not self.job_name.strip()):
            raise field_error(ConfigError, "job_name", "None or a non-empty string", self.job_name)
        check_choice("compression", self.compression, Compression)
        mor = check_int(
            "max_outstanding_requests",
            self.max_outstanding_requests,
            1,
            optional=True,
            what="None or an int >= 1",
        )
        object.__setattr__(self, "max_outstanding_requests", mor)
        check_choice("target_workers", self.target_workers, TargetWorkers)
        for name in ("connect_timeout", "peer_timeout"):
            if getattr(self, name) is not None:
                check_seconds(name, getattr(self, name), "None or seconds > 0")


def distribute(
    ds: tf.data.Dataset,
    service: str,
    *,
    processing_mode: ProcessingMode = "parallel_epochs",
    job_name: str | None = None,
    compression: Compression = "none",
    max_outstanding_requests: int | None = None,
    target_workers: TargetWorkers = "auto",
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    peer_timeout: float | None = DEFAULT_PEER_TIMEOUT,
    options: tf.data.Options | None = None,
) -> tf.data.Dataset:
    """Runs `ds` on tf.data service workers and returns the dataset of their elements.

    The element_spec, static shapes included, is carried over unchanged: batch with
    `drop_remainder=True` before this stage to keep a static batch dimension. All of `ds` runs
    on the workers, so it may not call `tf.py_function`/`numpy_function`: a worker in another
    process has no such Python function (in-process workers would hide the mistake).

    With `peer_timeout`, the returned dataset reads the service through a Python watchdog
    (`tf.data.Dataset.from_generator`), so the result cannot be serialized; a lost peer
    surfaces from iteration as a `tf.errors.UnknownError` whose message holds
    "ServiceError: Lost the tf.data service ...".

    Args:
      ds: the pipeline to offload, up to and including its last preprocessing stage.
      service: the dispatcher, "grpc://host:port" or "host:port".
      processing_mode: as `DistributeConfig.processing_mode`.
      job_name: as `DistributeConfig.job_name`.
      compression: as `DistributeConfig.compression`.
      max_outstanding_requests: as `DistributeConfig.max_outstanding_requests`.
      target_workers: as `DistributeConfig.target_workers`.
      connect_timeout: as `DistributeConfig.connect_timeout`.
      peer_timeout: as `DistributeConfig.peer_timeout`.
      options: `tf.data.Options` for the worker-side pipeline. Options applied after this
        stage never reach the workers: `ds` is serialized and registered right here.

    Returns:
      The service dataset, with `ds.options()` (merged with `options`) also set client-side.

    Raises:
      ConfigError: a malformed address or option, a py_function in `ds`, a call inside
        `tf.function`, or no dispatcher answering within `connect_timeout`.

    Long: the docstring is the public contract; the body is 25 lines.
    """
    config = DistributeConfig(
        processing_mode,
        job_name,
        compression,
        max_outstanding_requests,
        target_workers,
        connect_timeout,
        peer_timeout,
    )

    tf_ = _tf.tf()
    svc, address = tf_.data.experimental.service, ServiceAddress.parse(service)
    if options is not None:
        ds = ds.with_options(options)
    _check_offloadable(ds)
    if config.connect_timeout is not None:
        wait_for(address, config.connect_timeout)
    out = _service_dataset(ds, svc, address, config)
    if config.peer_timeout is None:
        return out
    timeout = config.peer_timeout
    return tf_.data.Dataset.from_generator(
        lambda: _watched(out, _Watch(address, timeout)), output_signature=out.element_spec
    ).with_options(ds.options())


def _service_dataset(
    ds: tf.data.Dataset, svc: ModuleType, address: ServiceAddress, config: DistributeConfig
) -> tf.data.Dataset:
    """`ds` registered with the dispatcher: the dataset of the service's elements."""
    dynamic = config.processing_mode == "dynamic"
    out = ds.apply(
        svc.distribute(
            processing_mode=svc.ShardingPolicy.DYNAMIC if dynamic else svc.ShardingPolicy.OFF,
            service=address.target,
            job_name=config.job_name,
            max_outstanding_requests=config.max_outstanding_requests,
            compression={"none": None, "auto": "AUTO", "snappy": "SNAPPY"}[config.compression],
            target_workers=config.target_workers.upper(),
        )
    )
    # The service dataset starts a new graph: without this its options would be the defaults.
    return out.with_options(ds.options())


def _check_offloadable(ds: tf.data.Dataset) -> None:
    """Refuses a call while tracing a graph, and a dataset that calls back into Python."""
    if not _tf.tf().executing_eagerly():
        raise ConfigError(
            "distribute() must be called eagerly, outside tf.function: it checks "
            "the dataset and the dispatcher from Python. Received: a call while "
            "building a graph"
        )
    python_ops = _python_ops(ds)
    if python_ops:
        raise ConfigError(
            "The dataset given to distribute() must be pure TensorFlow: tf.data "
            "service workers in other processes cannot call back into this Python "
            f"process. Received: a dataset using {python_ops} "
            "(tf.py_function/numpy_function)"
        )


_PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def _python_ops(ds: tf.data.Dataset) -> list[str]:
    """The Python-callback ops anywhere in `ds`'s graph, including inside map functions."""
    tf_ = _tf.tf()
    # The same serialization registration does; `_variant_tensor` is how TF itself gets it.
    graph = tf_.raw_ops.DatasetToGraphV2(
        input_dataset=ds._variant_tensor, external_state_policy=0, strip_device_assignment=True
    )
    graph_def = tf_.compat.v1.GraphDef.FromString(graph.numpy())
    nodes = list(graph_def.node)
    for fn in graph_def.library.function:
        nodes += fn.node_def
    return sorted({n.op for n in nodes if n.op in _PYTHON_OPS})


# ---- the watchdog ----


class _Watch:
    """Which peers of one iteration are unreachable, and since when."""

    def __init__(self, dispatcher: ServiceAddress, timeout: float):
        self.dispatcher = dispatcher
        self.timeout = timeout
        # While no element arrives: probe every second, or four times within a shorter timeout,
        # each probe allowed up to 5 s (a gRPC handshake over a slow network).
        self.interval = min(1.0, timeout / 4)
        self.deadline = min(5.0, max(0.5, timeout / 2))
        self.workers: set[ServiceAddress] = set()
        self.down: dict[tuple[str, str], float] = {}

    def progress(self) -> None:
        self.down.clear()

    def check(self) -> None:
        """Probes the dispatcher and its workers; raises ServiceError for a peer lost too long."""
        peers = [("dispatcher", self.dispatcher)]
        peers += [("worker", w) for w in sorted(self.workers, key=lambda w: w.address)]
        started = time.monotonic()
        answers = probe_all(peers, self.deadline)
        assert answers is not None  # only a stop event makes it None
        lost = []
        for (role, address), answer in zip(peers, answers, strict=True):
            key = (role, address.address)
            if answer.ok:
                self.down.pop(key, None)
                if role == "dispatcher":
                    self.workers |= _parsed(worker_addresses(answer.payload))
                continue
            since = self.down.setdefault(key, started)
            if time.monotonic() - since >= self.timeout:
                lost.append(f"{role} {address.address} ({answer.detail})")
        if lost:
            raise ServiceError(
                f"Lost the tf.data service {' and '.join(lost)}: unreachable for at least "
                f"{self.timeout:g} s while this client waited for data from dispatcher "
                f"{self.dispatcher.address}. Restart it at the same address within "
                "peer_timeout (distribute(peer_timeout=...), build(service_peer_timeout=...)) to "
                "continue, or raise the timeout. "
                f"Received: peer_timeout={self.timeout:g}"
            )


def _parsed(addresses: list[str]) -> set[ServiceAddress]:
    """The worker addresses that parse; one TF could not be reached at is not probed."""
    out = set()
    for text in addresses:
        with contextlib.suppress(ConfigError):
            out.add(ServiceAddress.parse(text, "worker"))
    return out


def _watched(ds: tf.data.Dataset, watch: _Watch) -> Iterator[Any]:
    """The elements of `ds`, read on a helper thread so that waiting can time out."""
    from tensorflow.python.eager import cancellation

    box: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()
    cancel = cancellation.CancellationManager()
    threading.Thread(
        target=_read, args=(ds, box, stop, cancel), daemon=True, name="tfpipe-service-reader"
    ).start()
    try:
        while True:
            try:
                kind, value = box.get(timeout=watch.interval)
            except queue.Empty:
                watch.check()
                continue
            watch.progress()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        # Finished, failed or abandoned: cancel the reader's GetNext, which would otherwise
        # wait for a lost peer forever, its client heartbeating into the log every second.
        stop.set()
        cancel.start_cancel()


def _read(
    ds: tf.data.Dataset, box: queue.Queue[tuple[str, Any]], stop: threading.Event, cancel: CancellationManager
) -> None:
    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    try:
        # Creating the iterator cannot be cancelled: with the dispatcher gone, TF retries it
        # forever. The watchdog still raises; this daemon thread then stays blocked.
        get = _cancellable_next(iter(ds), cancel)
        while not stop.is_set():
            try:
                element = get()
            except StopIteration:
                put(("end", None))
                return
            if not put(("element", element)):
                return
    except Exception as e:
        put(("error", e))


def _cancellable_next(it: tf.data.Iterator, cancel: CancellationManager) -> Callable[[], _tf.Nest]:
    """`next(it)` that `cancel.start_cancel()` interrupts (TF's eager cancellation, which
    tf.distribute's coordinator uses too); plain `next` if this TensorFlow lacks the private
    pieces it needs."""
    try:
        from tensorflow.python.data.util import structure
        from tensorflow.python.eager import context, execute
        from tensorflow.python.framework import errors

        resource, spec = it._iterator_resource, it.element_spec
        types, shapes = it._flat_output_types, it._flat_output_shapes
    except (ImportError, AttributeError):
        return lambda: next(it)
    attrs = ("output_types", types, "output_shapes", shapes)

    def get() -> _tf.Nest:
        try:
            flat = execute.execute_with_cancellation(
                b"IteratorGetNext", len(types), [resource], attrs, context.context(), cancel
            )
        except errors.OutOfRangeError:
            raise StopIteration from None
        return structure.from_compatible_tensor_list(spec, flat)

    return get

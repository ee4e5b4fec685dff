"""tf.data service: the `distribute` stage and the dispatcher and worker servers.

`distribute(ds, "grpc://host:port")` moves the work of `ds` onto tf.data service workers;
`start_dispatcher`/`start_worker` run servers in this process, and `serve` runs one until
SIGINT or SIGTERM (the `tfpipe serve` command).

Where servers listen: TensorFlow 2.21 builds every tf.data server with the gRPC listening
address `[::]:<port>` (hard-coded in `GrpcDataServerBase`), so a dispatcher or worker accepts
connections on ALL interfaces, IPv4 and IPv6, whatever `host` says. `host` is the address the
server is reached at: a worker advertises it to the dispatcher (`WorkerConfig.worker_address`),
and it goes into `Server.target`. The default, 127.0.0.1, keeps clients and workers on
loopback, but only a firewall can keep other hosts out.

Example:
  >>> with start_dispatcher() as d, start_worker(d.address):
  ...     ds = distribute(tf.data.Dataset.range(5), d.target)
  ...     sorted(int(x) for x in ds)
  [0, 1, 2, 3, 4]
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Literal, get_args

from tfpipe.errors import ConfigError, field_error

if TYPE_CHECKING:
    import tensorflow as tf

ProcessingMode = Literal["parallel_epochs", "dynamic"]
Compression = Literal["none", "auto", "snappy"]
TargetWorkers = Literal["auto", "any", "local"]
Role = Literal["dispatcher", "worker"]

DEFAULT_HOST = "127.0.0.1"
# TensorFlow retries an unreachable dispatcher forever, holding the GIL (so not even Ctrl-C
# gets through); tfpipe checks the TCP port first and gives up after this many seconds.
DEFAULT_CONNECT_TIMEOUT = 30.0

_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$")
_ADDRESS_FORM = "'grpc://HOST:PORT' or 'HOST:PORT' (e.g. 'grpc://127.0.0.1:5050')"


# ---- addresses ----


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceAddress:
    """A validated `host:port` of a tf.data service server."""

    host: str
    port: int

    def __post_init__(self) -> None:
        _check_host("host", self.host)
        if not isinstance(self.port, int) or not 1 <= self.port <= 65535:
            raise field_error(ConfigError, "port", "an int in 1..65535", self.port)

    @classmethod
    def parse(cls, text: object, field: str = "service") -> ServiceAddress:
        """Parses `grpc://host:port` or `host:port`; `[v6addr]:port` for IPv6.

        Raises:
          ConfigError: naming `field`, the expected form and the value received.
        """

        def bad(why: str) -> ConfigError:
            return ConfigError(
                f"{field} must be a tf.data service address {_ADDRESS_FORM}; {why}. "
                f"Received: {field}={text!r}"
            )

        if not isinstance(text, str):
            raise bad("it is not a string")
        rest = text.strip()
        if "://" in rest:
            protocol, rest = rest.split("://", 1)
            if protocol != "grpc":
                raise bad(f"protocol {protocol!r} is not 'grpc', the only one TensorFlow serves")
        match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)|([^:/\[\]]+):(\d+)", rest)
        if match is None:
            raise bad("expected HOST:PORT with a numeric port")
        host = match.group(1) or match.group(3)
        port = int(match.group(2) or match.group(4))
        if not 1 <= port <= 65535:
            raise bad(f"port {port} is outside 1..65535")
        try:
            return cls(host, port)
        except ConfigError as e:
            raise bad(str(e).split(". Received")[0]) from None

    @property
    def address(self) -> str:
        """`host:port`, with brackets around an IPv6 host."""
        return f"{_bracket(self.host)}:{self.port}"

    @property
    def target(self) -> str:
        """`grpc://host:port`, the form `distribute` and `build(service=...)` take."""
        return f"grpc://{self.address}"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _check_host(field: str, host: object) -> None:
    if not isinstance(host, str) or not host:
        raise field_error(ConfigError, field, "a hostname or IP address", host)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if not _HOSTNAME.match(host):
            raise field_error(ConfigError, field, "a hostname or IP address", host) from None
        return
    if ip.is_unspecified:
        raise field_error(ConfigError, field, "the address clients reach this server at, not a "
                          "wildcard (TensorFlow already listens on all interfaces; a wildcard "
                          "cannot be advertised)", host)


def wait_reachable(address: ServiceAddress, timeout: float, field: str = "service", *,
                   stop: threading.Event | None = None) -> bool:
    """Waits until a TCP connection to `address` succeeds, for at most `timeout` seconds.

    Returns:
      True once connected; False if `stop` was set first.

    Raises:
      ConfigError: nothing accepted connections at `address` within `timeout`.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    while stop is None or not stop.is_set():
        try:
            with socket.create_connection((address.host, address.port), timeout=min(timeout, 2)):
                return True
        except OSError as e:
            last = e
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ConfigError(
                f"{field} must be the address of a running tf.data service dispatcher. "
                f"Received: {field}={address.target!r}, which did not accept a connection "
                f"within {timeout:g} s ({last.strerror or last})"
            )
        if stop is None:
            time.sleep(min(delay, remaining))
        else:
            stop.wait(min(delay, remaining))
        delay = min(delay * 2, 1.0)
    return False


# ---- the distribute stage ----


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
      connect_timeout: seconds to wait for the dispatcher's port before raising; None skips
        the check and leaves TensorFlow to retry forever.
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

    def __post_init__(self) -> None:
        _check_choice("processing_mode", self.processing_mode, ProcessingMode)
        if self.job_name is not None and (not isinstance(self.job_name, str)
                                          or not self.job_name.strip()):
            raise field_error(ConfigError, "job_name", "None or a non-empty string", self.job_name)
        _check_choice("compression", self.compression, Compression)
        mor = self.max_outstanding_requests
        if mor is not None and (not isinstance(mor, int) or isinstance(mor, bool) or mor < 1):
            raise field_error(ConfigError, "max_outstanding_requests", "None or an int >= 1", mor)
        _check_choice("target_workers", self.target_workers, TargetWorkers)
        if self.connect_timeout is not None:
            _check_seconds("connect_timeout", self.connect_timeout, "None or seconds > 0")


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
    options: tf.data.Options | None = None,
) -> tf.data.Dataset:
    """Runs `ds` on tf.data service workers and returns the dataset of their elements.

    The element_spec, static shapes included, is carried over unchanged: batch with
    `drop_remainder=True` before this stage to keep a static batch dimension. All of `ds` runs
    on the workers, so it may not call `tf.py_function`/`numpy_function`: a worker in another
    process has no such Python function (in-process workers would hide the mistake).

    Args:
      ds: the pipeline to offload, up to and including its last preprocessing stage.
      service: the dispatcher, "grpc://host:port" or "host:port".
      processing_mode, job_name, compression, max_outstanding_requests, target_workers,
        connect_timeout: see `DistributeConfig`.
      options: `tf.data.Options` for the worker-side pipeline. Options applied after this
        stage never reach the workers: `ds` is serialized and registered right here.

    Returns:
      The service dataset, with `ds.options()` (merged with `options`) also set client-side.

    Raises:
      ConfigError: a malformed address or option, a py_function in `ds`, or no dispatcher
        within `connect_timeout`.
    """
    config = DistributeConfig(processing_mode, job_name, compression, max_outstanding_requests,
                              target_workers, connect_timeout)
    from tfpipe import _tf

    svc = _tf.tf().data.experimental.service
    address = ServiceAddress.parse(service)
    if options is not None:
        ds = ds.with_options(options)
    python_ops = _python_ops(ds)
    if python_ops:
        raise ConfigError("The dataset given to distribute() must be pure TensorFlow: tf.data "
                          "service workers in other processes cannot call back into this Python "
                          f"process. Received: a dataset using {python_ops} "
                          "(tf.py_function/numpy_function)")
    if config.connect_timeout is not None:
        wait_reachable(address, config.connect_timeout)
    policy = svc.ShardingPolicy.DYNAMIC if processing_mode == "dynamic" else svc.ShardingPolicy.OFF
    out = ds.apply(svc.distribute(
        processing_mode=policy, service=address.target, job_name=job_name,
        max_outstanding_requests=max_outstanding_requests,
        compression={"none": None, "auto": "AUTO", "snappy": "SNAPPY"}[compression],
        target_workers=target_workers.upper(),
    ))
    # The service dataset starts a new graph: without this its options would be the defaults.
    return out.with_options(ds.options())


_PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def _python_ops(ds: tf.data.Dataset) -> list[str]:
    """The Python-callback ops anywhere in `ds`'s graph, including inside map functions."""
    from tfpipe import _tf

    tf_ = _tf.tf()
    # The same serialization registration does; `_variant_tensor` is how TF itself gets it.
    graph = tf_.raw_ops.DatasetToGraphV2(input_dataset=ds._variant_tensor,
                                         external_state_policy=0, strip_device_assignment=True)
    graph_def = tf_.compat.v1.GraphDef.FromString(graph.numpy())
    nodes = list(graph_def.node)
    for fn in graph_def.library.function:
        nodes += fn.node_def
    return sorted({n.op for n in nodes if n.op in _PYTHON_OPS})


def _check_choice(field: str, value: object, choices: object) -> None:
    if value not in get_args(choices):
        raise field_error(ConfigError, field, f"one of {get_args(choices)}", value)


def _check_seconds(field: str, value: object, expected: str = "seconds > 0") -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise field_error(ConfigError, field, expected, value)


# ---- servers ----


@dataclasses.dataclass(frozen=True, slots=True)
class DispatcherConfig:
    """A dispatcher to start.

    Args:
      port: port to listen on; 0 picks a free one.
      host: the address clients and workers reach it at (TF listens on all interfaces).
      work_dir: where the dispatcher journals its state (local or gs://).
      fault_tolerant: journal state so a restarted dispatcher resumes its jobs; None means on
        exactly when `work_dir` is set.
    """

    port: int = 0
    host: str = DEFAULT_HOST
    work_dir: str | None = None
    fault_tolerant: bool | None = None

    def __post_init__(self) -> None:
        _check_port(self.port)
        _check_host("host", self.host)
        if self.work_dir is not None and (not isinstance(self.work_dir, str) or not self.work_dir):
            raise field_error(ConfigError, "work_dir", "None or a directory path", self.work_dir)
        if self.fault_tolerant and self.work_dir is None:
            raise field_error(ConfigError, "fault_tolerant", "False or None when work_dir is not "
                              "set (the journal lives in work_dir)", self.fault_tolerant)

    @property
    def fault_tolerant_mode(self) -> bool:
        return self.work_dir is not None if self.fault_tolerant is None else self.fault_tolerant


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerConfig:
    """A worker to start.

    Args:
      dispatcher: the dispatcher's "host:port" (or "grpc://host:port").
      port: port to listen on; 0 picks a free one.
      host: the address consumers reach this worker at; the worker advertises it to the
        dispatcher (TF listens on all interfaces).
      connect_timeout: seconds to wait for the dispatcher before raising; TF itself would
        block forever, holding the GIL.
    """

    dispatcher: str
    port: int = 0
    host: str = DEFAULT_HOST
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    def __post_init__(self) -> None:
        ServiceAddress.parse(self.dispatcher, "dispatcher")
        _check_port(self.port)
        _check_host("host", self.host)
        _check_seconds("connect_timeout", self.connect_timeout)

    @property
    def dispatcher_address(self) -> ServiceAddress:
        return ServiceAddress.parse(self.dispatcher, "dispatcher")


def _role(config: DispatcherConfig | WorkerConfig) -> Role:
    return "dispatcher" if isinstance(config, DispatcherConfig) else "worker"


def _check_port(port: object) -> None:
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise field_error(ConfigError, "port", "an int in 0..65535 (0 picks a free port)", port)


class Server:
    """A running tf.data service dispatcher or worker in this process.

    Attributes:
      role: "dispatcher" or "worker".
      config: the DispatcherConfig or WorkerConfig it was started with.
      host, port: where clients reach it; `port` is the bound port even when 0 was asked for.
    """

    def __init__(self, config: DispatcherConfig | WorkerConfig, tf_server: object):
        self.role = _role(config)
        self.config = config
        self._server = tf_server
        self.host = config.host
        # `_address` ("localhost:<bound port>") is the only accessor both TF servers share.
        self.port = int(tf_server._address.rsplit(":", 1)[1])  # type: ignore[attr-defined]
        self._stopped = False

    @property
    def address(self) -> str:
        """`host:port`, e.g. for `start_worker(dispatcher=...)`."""
        return ServiceAddress(self.host, self.port).address

    @property
    def target(self) -> str:
        """`grpc://host:port`, e.g. for `distribute` or `build(service=...)`."""
        return ServiceAddress(self.host, self.port).target

    @property
    def listening_on(self) -> str:
        """The socket TensorFlow actually listens on: all interfaces."""
        return f"[::]:{self.port}"

    def stop(self) -> None:
        """Stops the server; safe to call more than once.

        A worker's stop tears down its tasks, and in TF 2.21 that can take tens of seconds
        while holding the GIL (20 s measured for a worker whose dynamic-sharding tasks had
        idled for 20 s: their interleave threads sleep on a condition variable that only the
        autotuner's ever rarer passes signal). No Python timeout can cut that short.
        """
        if not self._stopped:
            self._stopped = True
            self._server.stop()  # type: ignore[attr-defined]

    def join(self) -> None:
        """Blocks until the server has stopped (TF releases the GIL while waiting)."""
        self._server.join()  # type: ignore[attr-defined]

    def __enter__(self) -> Server:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return f"Server(role={self.role!r}, target={self.target!r}, {state})"


def start_dispatcher(port: int = 0, host: str = DEFAULT_HOST, work_dir: str | None = None,
                     fault_tolerant: bool | None = None) -> Server:
    """Starts a tf.data service dispatcher in this process; see `DispatcherConfig`."""
    return start(DispatcherConfig(port, host, work_dir, fault_tolerant))


def start_worker(dispatcher: str, port: int = 0, host: str = DEFAULT_HOST,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> Server:
    """Starts a tf.data service worker in this process and registers it with `dispatcher`.

    Raises:
      ConfigError: a bad option, or no dispatcher reachable within `connect_timeout`.
    """
    return start(WorkerConfig(dispatcher, port, host, connect_timeout))


def start(config: DispatcherConfig | WorkerConfig) -> Server:
    """Starts the server `config` describes and returns its handle."""
    if isinstance(config, WorkerConfig):
        wait_reachable(config.dispatcher_address, config.connect_timeout, "dispatcher")
    return _start_unchecked(config)


def _start_unchecked(config: DispatcherConfig | WorkerConfig) -> Server:
    from tfpipe import _tf

    svc = _tf.tf().data.experimental.service
    if isinstance(config, DispatcherConfig):
        tf_config = svc.DispatcherConfig(port=config.port, work_dir=config.work_dir,
                                         fault_tolerant_mode=config.fault_tolerant_mode)
        return Server(config, svc.DispatchServer(tf_config))
    host = _bracket(config.host)
    # TF substitutes the bound ports into the advertised addresses; its default is localhost.
    tf_config = svc.WorkerConfig(
        dispatcher_address=config.dispatcher_address.address, port=config.port,
        worker_address=f"{host}:%port%", data_transfer_address=f"{host}:%dts_port%")
    return Server(config, svc.WorkerServer(tf_config))


def serve(config: DispatcherConfig | WorkerConfig, *,
          on_ready: Callable[[Server], None] | None = None,
          on_waiting: Callable[[ServiceAddress], None] | None = None,
          stop: bool = True) -> Server:
    """Runs a server until SIGINT or SIGTERM, then stops it. Call from the main thread.

    Args:
      config: the server to run.
      on_ready: called with the running server once it accepts connections (and, for a
        worker, is registered with its dispatcher).
      on_waiting: (worker) called with the dispatcher's address before waiting for it, once
        SIGINT and SIGTERM already stop the wait.
      stop: stop the server before returning. False returns it still running, for a
        process that exits right away: TF's stop only tears down in-process state, and for
        a worker that can take tens of seconds (see `Server.stop`).

    Returns:
      The server, stopped unless `stop` is False.

    Raises:
      ConfigError: a bad option, or (worker) no dispatcher within `config.connect_timeout`.
      InterruptedError: SIGINT or SIGTERM arrived before the server started.
    """
    if threading.current_thread() is not threading.main_thread():
        raise ConfigError("serve() must run in the main thread: it installs signal handlers")
    signalled = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in signals}

    def on_signal(signum: int, frame: object) -> None:
        signalled.set()

    def install(handler: Callable[[int, object], None] | int) -> None:
        for s in signals:
            signal.signal(s, handler)

    try:
        install(on_signal)
        if isinstance(config, WorkerConfig):
            address = config.dispatcher_address
            if on_waiting is not None:
                on_waiting(address)
            if not wait_reachable(address, config.connect_timeout, "dispatcher", stop=signalled):
                raise InterruptedError("stopped by a signal while waiting for the dispatcher")
        from tfpipe import _tf

        _tf.tf()  # the slow TF import, while a signal still just sets `signalled`
        if signalled.is_set():
            raise InterruptedError(f"stopped by a signal before the {_role(config)} started")
        # Starting a TF server is a C++ call that holds the GIL, so a Python handler could
        # not run before it returned: a signal that arrives meanwhile ends the process.
        install(signal.SIG_DFL)
        server = _start_unchecked(config)
        install(on_signal)
        try:
            if on_ready is not None:
                on_ready(server)
            signalled.wait()
        finally:
            if stop:
                server.stop()
        return server
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

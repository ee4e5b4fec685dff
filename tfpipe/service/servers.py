"""tf.data service dispatcher and worker servers: configs, checks before starting, start, serve.

Where servers listen: TensorFlow 2.21 builds every tf.data server with the gRPC listening
address `[::]:<port>` (hard-coded in `GrpcDataServerBase`), so a dispatcher or worker accepts
connections on ALL interfaces, IPv4 and IPv6. Its only registered protocol is plain `grpc`
(`grpc+local` raises "No credentials factory has been registered"), so there is no
authentication either: whoever reaches the port can register a dataset, which is a TensorFlow
graph the workers run, and read or write files as the server's user. tfpipe therefore starts
a server only with `allow_remote=True` (`--allow-remote`), and `Server.exposure` says which
addresses reach it. `advertise_host` is only the address clients and workers are told to use.

A taken port is refused too: TF's gRPC servers set SO_REUSEPORT, so a second dispatcher on a
busy port starts without complaint and the kernel splits clients and workers between the two.
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import signal
import socket
import threading
from collections.abc import Callable
from types import TracebackType

from tfpipe import _tf, storage
from tfpipe.errors import ConfigError, field_error
from tfpipe.service.address import (
    DEFAULT_CONNECT_TIMEOUT,
    Role,
    ServiceAddress,
    bracket,
    check_host,
    wait_for,
)
from tfpipe.validation import check_bool, check_int, check_seconds

DEFAULT_HOST = "127.0.0.1"


@dataclasses.dataclass(frozen=True, slots=True)
class DispatcherConfig:
    """A dispatcher to start.

    Args:
      port: port to listen on, on every interface; 0 picks a free one.
      advertise_host: the address clients and workers reach it at. It does not limit where
        the server listens: TensorFlow listens on all interfaces.
      work_dir: where the dispatcher journals its state (local or gs://).
      fault_tolerant: journal state so a restarted dispatcher resumes its jobs; None means on
        exactly when `work_dir` is set.
      allow_remote: must be True to start: confirms that the unauthenticated server may be
        reached from every network this machine is on (firewall it: docs/guides/scale.md).
    """

    port: int = 0
    advertise_host: str = DEFAULT_HOST
    work_dir: str | None = None
    fault_tolerant: bool | None = None
    allow_remote: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "port", _check_port(self.port))
        check_host("advertise_host", self.advertise_host)
        if self.work_dir is not None and (not isinstance(self.work_dir, str) or not self.work_dir):
            raise field_error(ConfigError, "work_dir", "None or a directory path", self.work_dir)
        if self.fault_tolerant and self.work_dir is None:
            raise field_error(
                ConfigError,
                "fault_tolerant",
                "False or None when work_dir is not set (the journal lives in work_dir)",
                self.fault_tolerant,
            )
        check_bool("allow_remote", self.allow_remote)

    @property
    def fault_tolerant_mode(self) -> bool:
        return self.work_dir is not None if self.fault_tolerant is None else self.fault_tolerant


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerConfig:
    """A worker to start.

    Args:
      dispatcher: the dispatcher's "host:port" (or "grpc://host:port").
      port: port to listen on, on every interface; 0 picks a free one.
      advertise_host: the address consumers reach this worker at; the worker tells the
        dispatcher. It does not limit where the server listens.
      connect_timeout: seconds to wait for the dispatcher to answer before raising; TF itself
        would block forever, holding the GIL.
      allow_remote: must be True to start; see `DispatcherConfig`.
    """

    dispatcher: str
    port: int = 0
    advertise_host: str = DEFAULT_HOST
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    allow_remote: bool = False

    def __post_init__(self) -> None:
        ServiceAddress.parse(self.dispatcher, "dispatcher")
        object.__setattr__(self, "port", _check_port(self.port))
        check_host("advertise_host", self.advertise_host)
        check_seconds("connect_timeout", self.connect_timeout)
        check_bool("allow_remote", self.allow_remote)

    @property
    def dispatcher_address(self) -> ServiceAddress:
        return ServiceAddress.parse(self.dispatcher, "dispatcher")


def _role(config: DispatcherConfig | WorkerConfig) -> Role:
    return "dispatcher" if isinstance(config, DispatcherConfig) else "worker"


def _check_port(port: object) -> int:
    return check_int("port", port, 0, 65535, what="an int in 0..65535 (0 picks a free port)")


# ---- checks before starting ----


def check_exposure(config: DispatcherConfig | WorkerConfig) -> None:
    """Refuses to start a server unless `allow_remote` accepts what TensorFlow exposes."""
    if config.allow_remote:
        return
    port = config.port or "PORT"
    raise ConfigError(
        f"A tf.data service {_role(config)} listens on every network interface ([::]:{port}) "
        "with no authentication: anyone who can reach the port can run TensorFlow graphs on "
        "this machine, reading and writing its files. TensorFlow 2.21 has no loopback-only or "
        "authenticated mode. Run it on a private network or behind firewall rules (docs/guides/"
        "scale.md, 'Securing tf.data service'), then confirm with allow_remote=True (--allow-remote). "
        "Received: allow_remote=False"
    )


def check_port_free(port: int) -> None:
    """Raises ConfigError if any socket already listens on `port`, on any address.

    The probe binds like gRPC minus SO_REUSEPORT: with SO_REUSEADDR, so the TIME_WAIT
    connections of a server that just stopped do not count, but without SO_REUSEPORT, so a
    listening socket always does. Port 0 (any free port) needs no check.
    """
    if not port:
        return
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 on this machine
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as e:
                if e.errno == errno.EADDRNOTAVAIL:
                    continue
                if e.errno == errno.EADDRINUSE:
                    raise ConfigError(
                        f"port {port} is already in use{_holder(port)}. TensorFlow's servers "
                        "share a busy port without a word (SO_REUSEPORT), so a second server "
                        "there would split clients and workers with the first. Stop that "
                        f"process or choose another port (--port). Received: port={port}"
                    ) from None
                raise ConfigError(
                    f"Cannot listen on port {port}: {e.strerror}. Received: port={port}"
                ) from None


def _holder(port: int) -> str:
    """ " by pid N (command line)" for the processes listening on `port`, when visible."""
    import psutil

    try:
        pids = sorted(
            {
                c.pid
                for c in psutil.net_connections("tcp")
                if c.pid and c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
            }
        )
    except (psutil.Error, OSError):
        return ""
    names = []
    for pid in pids:
        try:
            command = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            command = "?"
        names.append(f"pid {pid} ({command[:100]})")
    return f" by {', '.join(names)}" if names else ""


def reachable_addresses() -> list[str]:
    """This machine's interface addresses, IPv4 then IPv6: where `[::]:port` can be reached."""
    import psutil

    found: dict[int, set[str]] = {socket.AF_INET: set(), socket.AF_INET6: set()}
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family in found:
                found[a.family].add(a.address)

    def order(text: str) -> tuple[object, str]:
        return ipaddress.ip_address(text.split("%", 1)[0]), text

    return sorted(found[socket.AF_INET], key=order) + sorted(found[socket.AF_INET6], key=order)


# ---- running servers ----


class Server:
    """A running tf.data service dispatcher or worker in this process.

    Attributes:
      role: "dispatcher" or "worker".
      config: the DispatcherConfig or WorkerConfig it was started with.
      host, port: where clients reach it (the advertised host); `port` is the bound port even
        when 0 was asked for.
    """

    def __init__(self, config: DispatcherConfig | WorkerConfig, tf_server: object):
        self.role = _role(config)
        self.config = config
        self._server = tf_server
        self.host = config.advertise_host
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

    @property
    def exposure(self) -> str:
        """Who can reach it, in one line: the socket and this machine's addresses."""
        return (
            f"{self.listening_on} on every interface, no authentication; reachable at "
            f"{', '.join(reachable_addresses())} and any address routed to this machine"
        )

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

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return f"Server(role={self.role!r}, target={self.target!r}, {state})"


def start_dispatcher(
    port: int = 0,
    advertise_host: str = DEFAULT_HOST,
    work_dir: str | None = None,
    fault_tolerant: bool | None = None,
    *,
    allow_remote: bool = False,
) -> Server:
    """Starts a tf.data service dispatcher in this process; see `DispatcherConfig`.

    Raises:
      ConfigError: a bad option, `allow_remote` not True, or `port` already in use.
    """
    return start(DispatcherConfig(port, advertise_host, work_dir, fault_tolerant, allow_remote))


def start_worker(
    dispatcher: str,
    port: int = 0,
    advertise_host: str = DEFAULT_HOST,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    *,
    allow_remote: bool = False,
) -> Server:
    """Starts a tf.data service worker in this process and registers it with `dispatcher`.

    Raises:
      ConfigError: a bad option, `allow_remote` not True, `port` already in use, or no
        dispatcher answering within `connect_timeout`.
    """
    return start(WorkerConfig(dispatcher, port, advertise_host, connect_timeout, allow_remote))


def _preflight(config: DispatcherConfig | WorkerConfig) -> None:
    """What is refused before a server starts: exposure not confirmed, a port in use, and a
    gs:// work dir without credentials (TensorFlow would retry in silence for minutes)."""
    check_exposure(config)
    check_port_free(config.port)
    if isinstance(config, DispatcherConfig) and config.work_dir:
        storage.check_credentials(config.work_dir)


def start(config: DispatcherConfig | WorkerConfig) -> Server:
    """Starts the server `config` describes and returns its handle."""
    _preflight(config)
    if isinstance(config, WorkerConfig):
        wait_for(config.dispatcher_address, config.connect_timeout, "dispatcher")
    return _start_unchecked(config)


def _start_unchecked(config: DispatcherConfig | WorkerConfig) -> Server:
    tf_ = _tf.tf()
    svc = tf_.data.experimental.service
    check_port_free(config.port)  # again: a worker may have waited for its dispatcher
    try:
        if isinstance(config, DispatcherConfig):
            return Server(
                config,
                svc.DispatchServer(
                    svc.DispatcherConfig(
                        port=config.port,
                        work_dir=config.work_dir,
                        fault_tolerant_mode=config.fault_tolerant_mode,
                    )
                ),
            )
        host = bracket(config.advertise_host)
        # TF substitutes the bound ports into the advertised addresses; its default is localhost.
        return Server(
            config,
            svc.WorkerServer(
                svc.WorkerConfig(
                    dispatcher_address=config.dispatcher_address.address,
                    port=config.port,
                    worker_address=f"{host}:%port%",
                    data_transfer_address=f"{host}:%dts_port%",
                )
            ),
        )
    except (tf_.errors.OpError, RuntimeError) as e:  # the pybind layer raises RuntimeError
        why = str(e.message if isinstance(e, tf_.errors.OpError) else e).strip()
        raise ConfigError(
            f"The tf.data service {_role(config)} did not start: "
            f"{why.splitlines()[0][:300]}. Received: {config!r}"
        ) from None


def serve(
    config: DispatcherConfig | WorkerConfig,
    *,
    on_ready: Callable[[Server], None] | None = None,
    on_waiting: Callable[[ServiceAddress], None] | None = None,
    stop: bool = True,
) -> Server:
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
      ConfigError: a bad option, `allow_remote` not True, a port in use, or (worker) no
        dispatcher answering within `config.connect_timeout`.
      CredentialsError: a gs:// work dir, and no Google Cloud credentials found.
      InterruptedError: SIGINT or SIGTERM arrived before the server started.
    """
    if threading.current_thread() is not threading.main_thread():
        raise ConfigError("serve() must run in the main thread: it installs signal handlers")
    _preflight(config)
    with _Signals() as signals:
        if isinstance(config, WorkerConfig):
            address = config.dispatcher_address
            if on_waiting is not None:
                on_waiting(address)
            if not wait_for(address, config.connect_timeout, "dispatcher", stop=signals.arrived):
                raise InterruptedError("stopped by a signal while waiting for the dispatcher")

        _tf.tf()  # the slow TF import, while a signal still just sets `signals.arrived`
        if signals.arrived.is_set():
            raise InterruptedError(f"stopped by a signal before the {_role(config)} started")
        # Starting a TF server is a C++ call that holds the GIL, so a Python handler could
        # not run before it returned: a signal that arrives meanwhile ends the process.
        signals.install(signal.SIG_DFL)
        server = _start_unchecked(config)
        signals.install(signals.on_signal)
        try:
            if on_ready is not None:
                on_ready(server)
            # Poll: a signal the kernel hands to one of TF's threads only sets Python's flag,
            # and a main thread blocked without a timeout would never run the handler.
            while not signals.arrived.wait(0.2):
                pass
        finally:
            if stop:
                server.stop()
        return server


class _Signals:
    """While entered, SIGINT and SIGTERM set `arrived`; the previous handlers return on exit."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self._previous = {s: signal.getsignal(s) for s in self.SIGNALS}

    def on_signal(self, signum: int, frame: object) -> None:
        self.arrived.set()

    def install(self, handler: Callable[[int, object], None] | int) -> None:
        for s in self.SIGNALS:
            signal.signal(s, handler)

    def __enter__(self) -> _Signals:
        self.install(self.on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

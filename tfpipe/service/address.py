"""Addresses of tf.data service servers, and gRPC probes that ask a server what it is.

TensorFlow's client retries an unreachable dispatcher forever, and its registration call holds
the GIL meanwhile, so not even Ctrl-C gets through. tfpipe asks first, from Python, with a
deadline, using RPCs TensorFlow's own servers answer: the dispatcher's `GetWorkers` and the
worker's `GetWorkerTasks`, both with an empty request. A TCP accept alone proves nothing: a
port that accepts and never answers, or answers as something else, is told apart from a
server that is still starting.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Literal

from tfpipe.errors import ConfigError, ServiceError, field_error
from tfpipe.validation import check_int

Role = Literal["dispatcher", "worker"]

# TensorFlow retries an unreachable dispatcher forever; tfpipe gives up after this many seconds.
DEFAULT_CONNECT_TIMEOUT = 30.0
# One probe's deadline while waiting for a server: long enough for a gRPC handshake across a
# slow network, short enough that a silent port is retried a few times within the timeout.
ATTEMPT_SECONDS = 5.0

_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$")
_ADDRESS_FORM = "'grpc://HOST:PORT' or 'HOST:PORT' (e.g. 'grpc://127.0.0.1:5050')"
_RPC = {
    "dispatcher": "/tensorflow.data.DispatcherService/GetWorkers",
    "worker": "/tensorflow.data.WorkerService/GetWorkerTasks",
}


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceAddress:
    """A validated `host:port` of a tf.data service server."""

    host: str
    port: int

    def __post_init__(self) -> None:
        check_host("host", self.host)
        object.__setattr__(self, "port", check_int("port", self.port, 1, 65535, what="an int in 1..65535"))

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
        return f"{bracket(self.host)}:{self.port}"

    @property
    def target(self) -> str:
        """`grpc://host:port`, the form `distribute` and `build(service=...)` take."""
        return f"grpc://{self.address}"


def bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def check_host(field: str, host: object) -> None:
    """Raises ConfigError unless `host` is a hostname or a non-wildcard IP address."""
    if not isinstance(host, str) or not host:
        raise field_error(ConfigError, field, "a hostname or IP address", host)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if not _HOSTNAME.match(host):
            raise field_error(ConfigError, field, "a hostname or IP address", host) from None
        return
    if ip.is_unspecified:
        raise field_error(
            ConfigError,
            field,
            "the address clients reach this server at, not a "
            "wildcard (TensorFlow already listens on all interfaces; a wildcard "
            "cannot be advertised)",
            host,
        )


# ---- probes ----


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """What a server said to one probe.

    Attributes:
      kind: "ok" (it answered as the role asked about), "down" (no connection), "silent" (no
        gRPC answer before the deadline) or "other" (it answers, but is not that role).
      detail: a short reason, e.g. "Connection refused".
      payload: the serialized response when `kind` is "ok".
    """

    kind: Literal["ok", "down", "silent", "other"]
    detail: str = ""
    payload: bytes = b""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def probe_all(
    peers: Sequence[tuple[Role, ServiceAddress]], deadline: float, stop: threading.Event | None = None
) -> list[Answer] | None:
    """Asks every peer at once whether it is a tf.data service server of its role.

    Returns:
      One Answer per peer, in order, within about `deadline` seconds; None if `stop` was set.
    """
    import grpc

    calls = []
    for role, address in peers:
        channel = grpc.insecure_channel(address.address)
        rpc = channel.unary_unary(_RPC[role], request_serializer=_raw, response_deserializer=_raw)
        calls.append((role, channel, rpc.future(b"", timeout=deadline)))
    try:
        answers = []
        for role, _, future in calls:
            while stop is not None and not future.done():
                if stop.wait(0.05):
                    return None
            answers.append(_answer(role, future, deadline))
        return answers
    finally:
        for _, channel, future in calls:
            future.cancel()
            channel.close()


def _raw(data: bytes) -> bytes:
    return data


def _answer(role: Role, future: object, deadline: float) -> Answer:
    import grpc

    try:
        return Answer("ok", payload=future.result())  # type: ignore[attr-defined]
    except grpc.RpcError as e:
        code, details = e.code(), e.details() or ""
    tail = details.rsplit(": ", 1)[-1].strip(" []")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Answer("silent", f"no gRPC answer within {deadline:g} s")
    if code == grpc.StatusCode.UNAVAILABLE and "HTTP/2" not in details:
        return Answer("down", tail)
    if code == grpc.StatusCode.UNAVAILABLE:  # an HTTP/2 parse failure: not a gRPC server
        return Answer("other", f"it answers, but not in gRPC ({tail})")
    return Answer("other", f"it answers gRPC ({code.name}), but not as a tf.data service {role} ({tail})")


def worker_addresses(payload: bytes) -> list[str]:
    """The worker addresses in a serialized `GetWorkersResponse`.

    The message is `repeated WorkerInfo workers = 1` and `WorkerInfo` starts with
    `string address = 1` (tensorflow/core/data/service/dispatcher.proto); TensorFlow ships no
    Python classes for it, and two length-delimited fields need no protobuf library.
    """
    out = []
    try:
        for field, value in _fields(payload):
            if field == 1 and isinstance(value, bytes):
                out += [v.decode() for f, v in _fields(value) if f == 1 and isinstance(v, bytes)]
    except (IndexError, ValueError) as e:  # truncated, or not UTF-8
        raise ServiceError(
            f"Expected a tf.data service GetWorkersResponse from the dispatcher. "
            f"Received: {payload[:40]!r} ({e})"
        ) from None
    return out


def _fields(buf: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, value) pairs of a protobuf message: varints as ints, the rest as bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield field, value
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield field, buf[i : i + size]
            i += size
        elif wire == 2:
            size, i = _varint(buf, i)
            yield field, buf[i : i + size]
            i += size
        else:
            raise ValueError(f"unsupported wire type {wire}")


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            return value, i
        shift += 7


def wait_for(
    address: ServiceAddress,
    timeout: float,
    field: str = "service",
    *,
    role: Role = "dispatcher",
    stop: threading.Event | None = None,
) -> bool:
    """Waits until `address` answers as a tf.data service `role`, for at most `timeout` s.

    A refused or silent port is retried (the server may be starting); a port that answers as
    something else fails at once.

    Returns:
      True once it answered; False if `stop` was set first.

    Raises:
      ConfigError: it did not answer as a `role` within `timeout`, naming `field`, the
        address and what it did instead.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        remaining = deadline - time.monotonic()
        answers = probe_all([(role, address)], max(0.05, min(remaining, ATTEMPT_SECONDS)), stop)
        if answers is None:
            return False
        answer = answers[0]
        if answer.ok:
            return True
        remaining = deadline - time.monotonic()
        if answer.kind == "other" or remaining <= 0:
            raise ConfigError(
                f"{field} must be the address of a running tf.data service {role}. "
                f"Received: {field}={address.target!r}, " + _failure(answer, role, address, timeout)
            )
        if stop is None:
            time.sleep(min(delay, remaining))
        elif stop.wait(min(delay, remaining)):
            return False
        delay = min(delay * 2, 1.0)


def _failure(answer: Answer, role: Role, address: ServiceAddress, timeout: float) -> str:
    if answer.kind == "down":
        return f"which did not accept a connection within {timeout:g} s ({answer.detail})"
    if answer.kind == "silent":
        return (
            f"which accepted connections but gave no gRPC answer within {timeout:g} s: "
            f"something else holds that port, or the {role} is overloaded"
        )
    if role == "dispatcher":
        worker = probe_all([("worker", address)], 2.0)
        if worker and worker[0].ok:
            return (
                "which is a tf.data service worker: pass the dispatcher's address (the worker's --dispatcher)"
            )
    return f"where {answer.detail}"

"""How the LocalGCS proxy makes loopback behave like a network to GCS: latency, bandwidth, 429s.

Stdlib only: the proxy process imports it as a sibling module (see `_gcs_proxy`), and
`tfpipe.testing.gcs` re-exports `Shaping` and `LIKE_GCS`.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time

from tfpipe.format.jsonobject import JsonObject

CHUNK = 64 << 10
"""Bytes moved per paced step: at 5 MB/s one step is 13 ms, fine enough for second-long reads."""
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""What GCS's request-rate guidelines count as writes ("uploading, updating, and deleting
objects"); everything else (reads, metadata, listing) is a read."""


@dataclasses.dataclass(frozen=True, slots=True)
class Shaping:
    """How the LocalGCS proxy shapes storage requests, on both routes. All off by default.

    Control calls (`/__localgcs/...`) are never shaped. Change it at run time with
    `LocalGCS.shape(...)` or `LocalGCS.shaped(...)`.

    Attributes:
      first_byte_ms: milliseconds from a request's arrival (its headers read) to its response's
        first byte at the soonest. 0: no delay. The twin's own time counts toward it: reading
        an upload's body, and the emulator's answer, which the proxy takes whole (64 MB take
        it ~0.1-0.3 s on 2 cores, more than 30 ms).
      mbps_per_stream: MB/s (10**6 bytes) per connection, in each direction: response bodies
        are written and request bodies read at that pace. None: as fast as loopback. TF opens
        a connection per request; google-cloud-storage keeps one per thread.
      max_requests_per_s: storage requests per second (any method). A request above the rate
        is answered 429 with `Retry-After` and never reaches the emulator; the request log
        marks it `throttled`. One second's worth may arrive at once (a token bucket). None: no
        limit.
      max_writes_per_s: the same for writes alone (POST, PUT, PATCH, DELETE), counted on top
        of `max_requests_per_s`.
    """

    first_byte_ms: float = 0.0
    mbps_per_stream: float | None = None
    max_requests_per_s: float | None = None
    max_writes_per_s: float | None = None

    def __post_init__(self) -> None:
        value = self.first_byte_ms
        if not _real(value) or not 0 <= value <= 60_000:
            raise ValueError(f"Expected first_byte_ms between 0 and 60000. Received: first_byte_ms={value!r}")
        for name in ("mbps_per_stream", "max_requests_per_s", "max_writes_per_s"):
            value = getattr(self, name)
            if value is not None and (not _real(value) or value <= 0):
                raise ValueError(f"Expected {name} > 0, or None for no limit. Received: {name}={value!r}")

    @property
    def active(self) -> bool:
        return self != Shaping()

    def to_json(self) -> JsonObject:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: JsonObject) -> Shaping:
        unknown = set(obj) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(
                f"Expected fields of Shaping ({', '.join(f.name for f in dataclasses.fields(cls))}). "
                f"Received: {sorted(unknown)}"
            )
        return cls(**obj)


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


LIKE_GCS = Shaping(
    first_byte_ms=30.0, mbps_per_stream=150.0, max_requests_per_s=5000.0, max_writes_per_s=1000.0
)
"""A Standard-class regional bucket read from a VM in its region: the figures of
`LocalGCS.like_gcs()`, whose docstring cites the source of each."""


class Pacer:
    """Paces one direction of one connection at the current `mbps_per_stream`.

    A virtual clock started at each body (`begin`): each step waits until the bytes before it
    would have finished at that rate, so a body takes at least size / rate, a late wake-up is
    made up within the body, and time between bodies earns no burst.
    """

    def __init__(self, shaping: ShapingBox) -> None:
        self._box = shaping
        self._clock = 0.0

    def begin(self) -> None:
        self._clock = time.monotonic()

    def wait(self, n: int) -> None:
        """Waits until `n` more bytes of the body may move."""
        mbps = self._box.shaping.mbps_per_stream
        if mbps is None:
            return
        self._clock += n / (mbps * 1e6)
        delay = self._clock - time.monotonic()
        if delay > 0:
            time.sleep(delay)


class ShapingBox:
    """The proxy's current Shaping and its request-rate buckets, shared by its threads."""

    def __init__(self) -> None:
        self.shaping = Shaping()
        self._lock = threading.Lock()
        self._buckets = {"requests": _TokenBucket(), "writes": _TokenBucket()}

    def set(self, shaping: Shaping) -> None:
        with self._lock:
            self.shaping = shaping
            self._buckets["requests"].rate = shaping.max_requests_per_s
            self._buckets["writes"].rate = shaping.max_writes_per_s

    def admit(self, method: str) -> float:
        """0.0 if a request may go on now, else the seconds until it could (it is refused)."""
        with self._lock:
            now = time.monotonic()
            buckets = [self._buckets["requests"]]
            if method in WRITE_METHODS:
                buckets.append(self._buckets["writes"])
            wait = max(b.wait(now) for b in buckets)
            if wait == 0.0:
                for b in buckets:
                    b.take()
            return wait

    def first_byte_at(self, arrival: float) -> float:
        """The monotonic time before which a response to a request that arrived then must not start."""
        return arrival + self.shaping.first_byte_ms / 1000


class _TokenBucket:
    """`rate` tokens a second, holding at most one second's worth (at least one token)."""

    def __init__(self) -> None:
        self._rate: float | None = None
        self._tokens = 0.0
        self._at = 0.0

    @property
    def rate(self) -> float | None:
        return self._rate

    @rate.setter
    def rate(self, rate: float | None) -> None:
        if rate != self._rate:  # a new limit starts with a full bucket
            self._rate, self._tokens, self._at = rate, max(1.0, rate or 0.0), time.monotonic()

    def wait(self, now: float) -> float:
        if self._rate is None:
            return 0.0
        self._tokens = min(max(1.0, self._rate), self._tokens + (now - self._at) * self._rate)
        self._at = now
        return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self._rate

    def take(self) -> None:
        if self._rate is not None:
            self._tokens -= 1.0


def retry_after(wait_s: float) -> str:
    """The Retry-After value for a refusal: whole seconds (RFC 9110 has no fractions), at least 1."""
    return str(max(1, math.ceil(wait_s)))

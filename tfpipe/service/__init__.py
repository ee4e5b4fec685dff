"""tf.data service: the `distribute` stage and the dispatcher and worker servers.

`distribute(ds, "grpc://host:port")` moves the work of `ds` onto tf.data service workers and
watches them (`stage.py`); `start_dispatcher`/`start_worker` run servers in this process,
and `serve` runs one until SIGINT or SIGTERM, the `tfpipe serve` command (`servers.py`).

TensorFlow's servers listen on every interface with no authentication, so starting one takes
`allow_remote=True`; see `servers.py` and "Securing tf.data service" in docs/guides/scale.md.

Example:
  >>> with start_dispatcher(allow_remote=True) as d, start_worker(d.address, allow_remote=True):
  ...     ds = distribute(tf.data.Dataset.range(5), d.target)
  ...     sorted(int(x) for x in ds)
  [0, 1, 2, 3, 4]
"""

from tfpipe.service.address import DEFAULT_CONNECT_TIMEOUT, ServiceAddress, ServiceError, wait_for
from tfpipe.service.servers import (
    DEFAULT_HOST,
    DispatcherConfig,
    Server,
    WorkerConfig,
    check_exposure,
    check_port_free,
    reachable_addresses,
    serve,
    start,
    start_dispatcher,
    start_worker,
)
from tfpipe.service.stage import DEFAULT_PEER_TIMEOUT, DistributeConfig, distribute

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_HOST",
    "DEFAULT_PEER_TIMEOUT",
    "DispatcherConfig",
    "DistributeConfig",
    "Server",
    "ServiceAddress",
    "ServiceError",
    "WorkerConfig",
    "check_exposure",
    "check_port_free",
    "distribute",
    "reachable_addresses",
    "serve",
    "start",
    "start_dispatcher",
    "start_worker",
    "wait_for",
]

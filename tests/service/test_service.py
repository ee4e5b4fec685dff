"""tf.data service: distribute(), in-process servers, build(service=...), and `tfpipe serve`.

Real dispatchers and workers on 127.0.0.1 (TensorFlow itself listens on [::], see
tfpipe/service/), a real converted table (37 rows in 4 shards), no mocks.
"""

from __future__ import annotations

import collections
import os
import signal
import time

import pytest

import tfpipe
from tfpipe import service
from tfpipe.errors import ConfigError
from tfpipe.testing.fake_data import make_table, write_table

from support.cli import run_cli
from support.service import Cli, free_port, run_serve

# Every test here starts tf.data service servers (in this process or as `tfpipe serve`).
pytestmark = pytest.mark.slow

ROWS = 37


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A 37-row mixed-type table converted into 4 shards."""
    root = tmp_path_factory.mktemp("service")
    csv = write_table(make_table(ROWS, seed=5), root / "t.csv")
    dest = str(root / "tab")
    tfpipe.convert(csv, dest, label="label", num_shards=4, workers=1)
    return dest


def _cluster(workers: int):
    """A dispatcher with `workers` workers, in this process, stopped right after the test.

    Function-scoped on purpose: a worker's stop() tears down its tasks, which in TF 2.21 can
    block for many seconds once they have idled (see Server.stop); a module-scoped cluster,
    stopped after the slow CLI tests, made teardown take 45 s.
    """
    with service.start_dispatcher(allow_remote=True) as d:
        ws = [service.start_worker(d.address, allow_remote=True) for _ in range(workers)]
        yield d, ws
        for w in ws:
            w.stop()


@pytest.fixture
def cluster():
    """One dispatcher and one worker: (dispatcher, worker)."""
    for d, ws in _cluster(1):
        yield d, ws[0]


@pytest.fixture
def cluster2():
    """A dispatcher with two workers: the dispatcher."""
    for d, _ in _cluster(2):
        yield d


def rows(ds) -> list[tuple]:
    """The (features, label) batches of `ds` as one hashable tuple per row, in order."""
    out = []
    for features, labels in ds:
        cols = {k: v.numpy().tolist() for k, v in sorted(features.items())}
        for i, label in enumerate(labels.numpy().tolist()):
            out.append((*((k, v[i]) for k, v in cols.items()), label))
    return out


def eval_ds(table, **kw):
    return tfpipe.build(table, preset="tabular", batch_size=8, training=False, **kw)


def test_in_process_servers_advertise_loopback(cluster):
    d, w = cluster
    assert d.role == "dispatcher" and w.role == "worker"
    assert d.target == f"grpc://127.0.0.1:{d.port}" and d.port > 0
    assert w.address == f"127.0.0.1:{w.port}" and w.port not in (0, d.port)
    assert d.listening_on == f"[::]:{d.port}"
    assert repr(d) == f"Server(role='dispatcher', target='grpc://127.0.0.1:{d.port}', running)"


def test_one_worker_parallel_epochs_equals_local_in_order(table, cluster):
    d, _ = cluster
    local = eval_ds(table, drop_remainder=True)
    options = local.options()
    remote = service.distribute(local, d.target, options=options)
    # The element_spec survives, static batch dimension included.
    assert remote.element_spec == local.element_spec
    assert remote.element_spec[1].shape.as_list() == [8]
    assert remote.options() == options
    want = rows(local)
    assert len(want) == 32  # 37 rows, 4 full batches of 8
    assert rows(remote) == want


def test_build_with_service_equals_local(table, cluster):
    d, _ = cluster
    local = rows(eval_ds(table))
    remote_ds = eval_ds(table, service=d.target)
    assert remote_ds.element_spec == eval_ds(table).element_spec
    remote = rows(remote_ds)
    assert len(local) == ROWS and len({r[-1] for r in local}) == 2
    assert collections.Counter(remote) == collections.Counter(local)


def test_dynamic_sharding_yields_every_row_once_across_two_workers(table, cluster2):
    local = collections.Counter(rows(eval_ds(table)))
    dynamic = rows(eval_ds(table, service=cluster2.target, processing_mode="dynamic"))
    assert collections.Counter(dynamic) == local
    # parallel_epochs: each of the two workers runs the whole epoch.
    doubled = collections.Counter(rows(eval_ds(table, service=cluster2.target)))
    assert doubled == collections.Counter(dict.fromkeys(local, 2))


def test_same_job_name_consumers_split_one_job(table, cluster2):
    local = collections.Counter(rows(eval_ds(table)))

    def consumers(job_name):
        return [
            iter(eval_ds(table, service=cluster2.target, processing_mode="dynamic", job_name=job_name))
            for _ in range(2)
        ]

    def drain(iterators):
        got = [[], []]
        live = set(range(len(iterators)))
        while live:  # alternate, one batch each, until both are exhausted
            for i in sorted(live):
                try:
                    features, labels = next(iterators[i])
                except StopIteration:
                    live.discard(i)
                    continue
                got[i] += rows([(features, labels)])
        return got

    a, b = drain(consumers("shared"))
    assert not set(a) & set(b)
    assert collections.Counter(a + b) == local
    # Without a job name each consumer gets its own job, so every row twice in total.
    a, b = drain(consumers(None))
    assert collections.Counter(a) == local and collections.Counter(b) == local


@pytest.mark.parametrize(
    "bad, why",
    [
        ("localhost", "expected HOST:PORT"),
        ("grpc://127.0.0.1", "expected HOST:PORT"),
        ("http://127.0.0.1:5050", "protocol 'http' is not 'grpc'"),
        ("grpc://127.0.0.1:99999", "port 99999 is outside 1..65535"),
        ("grpc://127.0.0.1:50x", "expected HOST:PORT"),
        ("grpc://bad host:5050", "host must be a hostname or IP address"),
        ("grpc://0.0.0.0:5050", "not a wildcard"),
        ("", "expected HOST:PORT"),
    ],
)
def test_bad_address_is_a_clear_error(bad, why):
    with pytest.raises(ConfigError) as e:
        service.ServiceAddress.parse(bad)
    msg = str(e.value)
    assert msg.startswith("service must be a tf.data service address 'grpc://HOST:PORT'")
    assert why in msg and msg.endswith(f"Received: service={bad!r}")


def test_address_forms_parse():
    assert service.ServiceAddress.parse("grpc://10.0.0.2:5050").target == "grpc://10.0.0.2:5050"
    assert service.ServiceAddress.parse("dispatcher-0.svc:80").address == "dispatcher-0.svc:80"
    v6 = service.ServiceAddress.parse("grpc://[::1]:5050")
    assert (v6.host, v6.port, v6.target) == ("::1", 5050, "grpc://[::1]:5050")


def test_distribute_rejects_bad_address_and_options(table):
    from tfpipe._tf import tf

    ds = tf().data.Dataset.range(3)
    with pytest.raises(ConfigError, match=r"Received: service='127\.0\.0\.1'"):
        service.distribute(ds, "127.0.0.1")
    with pytest.raises(ConfigError, match=r"Received: processing_mode='distributed_epoch'"):
        service.distribute(ds, "grpc://127.0.0.1:5050", processing_mode="distributed_epoch")
    with pytest.raises(ConfigError, match=r"Received: job_name=''"):
        service.distribute(ds, "grpc://127.0.0.1:5050", job_name="")
    with pytest.raises(ConfigError, match=r"Received: compression='AUTO'"):
        service.distribute(ds, "grpc://127.0.0.1:5050", compression="AUTO")
    with pytest.raises(ConfigError, match=r"Received: max_outstanding_requests=0"):
        service.distribute(ds, "grpc://127.0.0.1:5050", max_outstanding_requests=0)


def test_py_function_is_rejected_before_it_reaches_a_worker(cluster):
    from tfpipe._tf import tf

    tf_ = tf()
    ds = tf_.data.Dataset.range(3).map(lambda x: tf_.py_function(lambda y: y * 2, [x], tf_.int64))
    with pytest.raises(
        ConfigError,
        match=r"must be pure TensorFlow.*Received: a dataset using "
        r"\['EagerPyFunc'\]",
    ):
        service.distribute(ds, cluster[0].target)


def test_unreachable_dispatcher_fails_fast_instead_of_hanging():
    port = free_port()
    from tfpipe._tf import tf

    start = time.monotonic()
    with pytest.raises(ConfigError) as e:
        service.distribute(tf().data.Dataset.range(3), f"grpc://127.0.0.1:{port}", connect_timeout=0.5)
    assert time.monotonic() - start < 5
    assert str(e.value).startswith("service must be the address of a running tf.data service")
    assert (
        f"Received: service='grpc://127.0.0.1:{port}', which did not accept a connection "
        "within 0.5 s (Connection refused)" in str(e.value)
    )
    with pytest.raises(ConfigError, match=r"Received: dispatcher='grpc://127.0.0.1:"):
        service.start_worker(f"127.0.0.1:{port}", connect_timeout=0.3, allow_remote=True)


def test_server_config_errors():
    with pytest.raises(ConfigError, match=r"not a wildcard.*Received: advertise_host='0\.0\.0\.0'"):
        service.DispatcherConfig(advertise_host="0.0.0.0")
    with pytest.raises(ConfigError, match=r"Received: advertise_host='::'"):
        service.WorkerConfig("127.0.0.1:5050", advertise_host="::")
    with pytest.raises(ConfigError, match=r"Received: allow_remote='yes'"):
        service.WorkerConfig("127.0.0.1:5050", allow_remote="yes")
    with pytest.raises(ConfigError, match=r"Received: port=70000"):
        service.DispatcherConfig(port=70000)
    with pytest.raises(ConfigError, match=r"the journal lives in work_dir.*fault_tolerant=True"):
        service.DispatcherConfig(fault_tolerant=True)
    with pytest.raises(ConfigError, match=r"Received: dispatcher='127\.0\.0\.1'"):
        service.WorkerConfig("127.0.0.1")
    assert service.DispatcherConfig(work_dir="/x").fault_tolerant_mode is True
    no_journal = service.DispatcherConfig(work_dir="/x", fault_tolerant=False)
    assert no_journal.fault_tolerant_mode is False
    assert service.DispatcherConfig().fault_tolerant_mode is False


# ---- the CLI, as real subprocesses ----


def test_cli_servers_serve_a_client_and_stop_cleanly_on_sigterm_and_sigint(table, tmp_path):
    work_dir = tmp_path / "journal"
    port, worker_port = free_port(), free_port()
    target = f"grpc://127.0.0.1:{port}"
    # Started together so the two TensorFlow imports overlap; the worker waits for the port.
    dispatcher = Cli("dispatcher", "--port", str(port), "--work-dir", str(work_dir), "--allow-remote")
    worker = Cli("worker", "--dispatcher", f"127.0.0.1:{port}", "--port", str(worker_port), "--allow-remote")
    try:
        assert dispatcher.wait_for("ready at ") == f"tfpipe serve dispatcher: ready at {target}"
        exposure = (
            f"tfpipe serve dispatcher: listening on [::]:{port} on every interface, no "
            "authentication; reachable at 127.0.0.1, "
        )
        assert dispatcher.lines[0] == f"tfpipe serve dispatcher: work dir {work_dir} (fault tolerant)"
        assert dispatcher.lines[1].startswith(exposure)
        assert dispatcher.lines[1].endswith(" and any address routed to this machine")
        assert dispatcher.lines[2:] == [f"tfpipe serve dispatcher: ready at {target}"]
        assert worker.wait_for("ready at ") == f"tfpipe serve worker: ready at grpc://127.0.0.1:{worker_port}"
        assert worker.lines[0] == f"tfpipe serve worker: waiting for dispatcher 127.0.0.1:{port}"
        assert f"tfpipe serve worker: registered with dispatcher 127.0.0.1:{port}" in worker.lines

        # A second dispatcher on the busy port is refused by port and holder, before it
        # imports TensorFlow; TF alone would share the port (SO_REUSEPORT) and say "ready".
        second = run_serve("dispatcher", "--port", str(port), "--allow-remote")
        assert second.returncode == 1 and second.stdout == ""
        assert second.stderr.startswith(
            f"tfpipe serve: error: port {port} is already in use by pid {dispatcher.proc.pid} ("
        )
        assert "split clients and workers" in second.stderr and "Traceback" not in second.stderr
        assert len(second.stderr.splitlines()) == 1

        local = collections.Counter(rows(eval_ds(table)))
        assert collections.Counter(rows(eval_ds(table, service=target))) == local
        assert os.listdir(work_dir)  # the fault-tolerant journal

        assert worker.stop(signal.SIGTERM) == 0
        assert worker.wait_for("stopped") == "tfpipe serve worker: stopped"
        assert dispatcher.stop(signal.SIGINT) == 0
        assert dispatcher.wait_for("stopped") == "tfpipe serve dispatcher: stopped"
        assert not any(
            "Traceback" in line or "interrupted" in line for line in dispatcher.lines + worker.lines
        )
    finally:
        dispatcher.kill()
        worker.kill()


def test_cli_worker_waiting_for_its_dispatcher_stops_on_sigint_or_gives_up():
    port = free_port()
    waiting = Cli("worker", "--dispatcher", f"127.0.0.1:{port}", "--allow-remote")
    try:
        waiting.wait_for(f"waiting for dispatcher 127.0.0.1:{port}")
        assert waiting.stop(signal.SIGINT) == 0
        assert waiting.wait_for("stopped") == "tfpipe serve worker: stopped"
    finally:
        waiting.kill()
    give_up = run_serve(
        "worker", "--dispatcher", f"127.0.0.1:{port}", "--connect-timeout", "0.3", "--allow-remote"
    )
    assert give_up.returncode == 1
    assert (
        f"Received: dispatcher='grpc://127.0.0.1:{port}', which did not accept a "
        "connection within 0.3 s" in give_up.stderr
    )


def test_cli_bad_flags_are_clear_errors():
    bad = run_serve("worker", "--dispatcher", "nowhere", "--allow-remote")
    assert bad.returncode == 1
    assert "Received: dispatcher='nowhere'" in bad.stderr
    helped = run_cli("serve", "--help")
    assert helped.returncode == 0 and "Example:" in helped.stdout
    assert "listen on every interface" in helped.stdout and "--allow-remote" in helped.stdout

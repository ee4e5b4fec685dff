"""Shared fixtures.

GCS (gs://) tests run against `tfpipe.testing.gcs.LocalGCS`: gcp-storage-emulator plus a
TLS-terminating proxy, both on 127.0.0.1, so TensorFlow's own gs:// code *and* the
google-cloud-storage client (tfpipe.storage) reach the same in-memory buckets. No mocks.

- `local_gcs` (session scope): starts one LocalGCS on first use and applies its `env` to
  os.environ for the rest of the session (https_proxy, CURL_CA_BUNDLE, the test token,
  STORAGE_EMULATOR_HOST, NO_PROXY=127.0.0.1,localhost, ...); tfpipe.storage's client is reset
  so it picks the emulator up. Stops both child processes at the end of the session.
  Use it for fault injection and for asserting what reached the server:

      def test_retry(local_gcs, gcs_bucket):
          with local_gcs.inject_faults(503, count=2, methods=("POST",)) as fault:
              storage.write_atomic(gcs_bucket + "/x", b"data")
          assert fault.served == 2

  `route="tls"` limits faults to TensorFlow's path, `route="plain"` to tfpipe.storage's;
  `lose_reply=True` forwards the request and then answers the fault status.
  `with local_gcs.recording() as rec:` collects the `ProxiedRequest`s answered in the block.

- `gcs_bucket` (function scope): a fresh empty bucket, yielded as "gs://<name>". Faults the
  test left unserved are cancelled at teardown, so they never leak into the next test.

A test sets the environment it asserts about: what the caller's shell exported that changes a
command's output or network (TF_CPP_MIN_LOG_LEVEL, proxies: `support.cli.SHELL_VARIABLES`) is removed
from this process when pytest loads this file, and never reaches a child process.

`slow` marks what spawns processes, starts servers, runs `model.fit`, times a pipeline (a bench's
measurement: ~15-30 CPU-s) or asks the package index: `pytest -m "not slow"` is the fast inner
loop (budget: 2 minutes on 2 cores). A bench test of what a report says runs in the fast lane on
rates given for its plan (tests/support/bench_once.py). A test that uses the GCS twin (`local_gcs`,
`gcs_bucket`, or the `gcs` marker) is marked here: the twin is two servers in child processes.

Ordering: TensorFlow reads its GCS_* tuning variables (retry backoff, stat cache) once, inside
`import tensorflow`. This file therefore sets `TF_GCS_TEST_ENV` when pytest loads it, before
any test imports TF, over whatever the shell exported (the tests assert on these values).
Retries then back off for milliseconds instead of up to 32 s, and a rewritten object's new
size is seen at once.
"""

import itertools
import os
import secrets

import pytest

from tfpipe.testing.gcs import TF_GCS_TEST_ENV, LocalGCS

import support.cli

# The pipeline tests' datasets (image_ds, foreign_ds, photos_ds, table_ds) and text datasets
# (text_ds, labeled_text_ds, spm_text), made once a session; `bench_once`, a module's benches
# sharing one real measurement of each plan; the files' order, longest first.
pytest_plugins = ["support.pipeline_data", "support.packed_text", "support.bench_once", "support.file_order"]

support.cli.forget_the_shell()
os.environ.update(TF_GCS_TEST_ENV)


def pytest_collection_modifyitems(items):
    """Every test on the GCS twin (its fixtures, or the `gcs` marker) is slow (see the module doc)."""
    for item in items:
        on_twin = {"local_gcs", "gcs_bucket"} & set(getattr(item, "fixturenames", ()))
        if on_twin or item.get_closest_marker("gcs") is not None:
            item.add_marker(pytest.mark.slow)


_bucket_numbers = itertools.count()


@pytest.fixture(scope="session")
def local_gcs():
    """One LocalGCS for the session, with its environment applied (see the module doc)."""
    # The GCS_* values set above: they are the ones TensorFlow read at import.
    with LocalGCS() as gcs, gcs.activate(**{k: os.environ[k] for k in TF_GCS_TEST_ENV}):
        yield gcs


@pytest.fixture
def gcs_bucket(local_gcs):
    """A fresh, empty bucket: "gs://tfpipe-test-<n>-<random hex>"."""
    url = local_gcs.create_bucket(f"tfpipe-test-{next(_bucket_numbers)}-{secrets.token_hex(4)}")
    yield url
    local_gcs.clear_faults()

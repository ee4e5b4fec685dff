"""The local GCS twin leaves nothing in the system temp dir, even when its user is SIGKILLed."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tfpipe.testing.gcs import LocalGCS

pytestmark = pytest.mark.gcs
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def wait_missing(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not os.path.exists(path)


@pytest.mark.slow
def test_temp_dir_removed_on_stop_and_on_a_killed_parent():
    gcs = LocalGCS().start()
    folder = os.path.dirname(gcs.ca_file)
    assert os.path.basename(folder).startswith("tfpipe-localgcs-")
    gcs.stop()
    assert not os.path.exists(folder)

    script = (
        "import time\nfrom tfpipe.testing.gcs import LocalGCS\ngcs = LocalGCS().start()\n"
        "print(gcs.ca_file, flush=True)\ntime.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    folder = os.path.dirname(parent.stdout.readline().strip())
    assert os.path.isdir(folder)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    assert wait_missing(folder), f"{folder} outlived its SIGKILLed owner"

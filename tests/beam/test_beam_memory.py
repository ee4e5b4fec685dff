"""No Beam step holds the whole table: a table far larger than the memory limit converts
within it. The conversion runs in a child process (the FnApiRunner in that process, so its
workers' memory is the child's) and its peak RSS comes from os.wait4; RLIMIT_AS cannot be
used, since TensorFlow's and gRPC's virtual reservations exceed any useful limit."""

import os
import subprocess
import sys
import textwrap

import pytest

# Every test here runs a Beam pipeline (the DirectRunner's worker processes).
pytestmark = pytest.mark.slow

pytest.importorskip("apache_beam")

TEXT = 5000  # characters per row
ROWS = 16_000  # 80 MB of CSV
LIMIT_MB = 24  # what the big table may add to the peak RSS of a tiny one's conversion


def write_table(path, rows):
    with open(path, "w") as f:
        f.write("id,text\n")
        for i in range(rows):
            f.write(f"{i},{chr(97 + i % 26) * TEXT}\n")


def peak_rss_mb(src, dest):
    code = textwrap.dedent(f"""
        import tfpipe
        m = tfpipe.convert({src!r}, {dest!r}, engine="beam", pipeline_options="--runner=FnApiRunner",
                           chunk_rows=500, num_shards=4)
        assert m.splits["train"].examples > 0
    """)
    env = os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, proc.stderr.read().decode()[-3000:]
    return usage.ru_maxrss / 1024  # KiB on Linux


def test_a_table_over_three_times_the_limit_converts_within_it(tmp_path):
    small, big = str(tmp_path / "small.csv"), str(tmp_path / "big.csv")
    write_table(small, 500)
    write_table(big, ROWS)
    assert os.path.getsize(big) > 3 * LIMIT_MB << 20
    base = peak_rss_mb(small, str(tmp_path / "small_out"))
    peak = peak_rss_mb(big, str(tmp_path / "big_out"))
    assert peak - base < LIMIT_MB, (base, peak)

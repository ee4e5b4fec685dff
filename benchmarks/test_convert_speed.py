"""Convert throughput on ImageNet-like JPEG folders, side by side in one run (ratios, not absolutes).

Run: python -m pytest benchmarks/test_convert_speed.py -s --benchmark-disable-gc
Compares, on the same generated folder:
- the machine's raw read bandwidth (every source file read once from disk: each contender
  starts with the sources evicted from the page cache; the warm-cache rate is shown too);
- a naive single-process loop: read each file, build a tf.train.Example, tf.io.TFRecordWriter;
- tfpipe convert passing RGB JPEGs through after a decode check (the default), 1 and N workers;
- tfpipe convert copying bytes (`check="header"`: structure only), 1 and N workers;
- tfpipe convert re-encoding (--resize-shorter) with 1 and N workers.
Targets: re-encoding with N workers >= 0.85*N x 1 worker; copying >= 0.7 x raw read bandwidth.
"""

import os
import time

import pytest
from pagecache import evict, raw_read

import tfpipe
from tfpipe.testing import fake_data

N_IMAGES = int(os.environ.get("TFPIPE_BENCH_IMAGES", "1600"))  # ~170 MB: pool start-up amortised
WORKERS = os.cpu_count() or 1
RESIZE = 256


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("imagenet") / "train"
    paths = fake_data.write_image_folder(root, classes=8, per_class=N_IMAGES // 8, workers=WORKERS)
    return str(root), paths, sum(os.path.getsize(p) for p in paths)


def _timed(fn, cold=None):
    if cold:
        evict(cold)
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _naive(paths, out):
    from tfpipe._tf import tf as load

    tf = load()  # imported before the clock starts, in the test
    with tf.io.TFRecordWriter(out) as w:
        for i, p in enumerate(paths):
            with open(p, "rb") as f:
                data = f.read()
            ex = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 8])),
                    }
                )
            )
            w.write(ex.SerializeToString())


def test_convert_throughput(benchmark, folder, tmp_path):
    src, paths, total = folder
    from tfpipe._tf import tf as load

    load()
    rates = {}
    # Every contender starts with the sources evicted from the page cache: raw read bandwidth
    # is the disk's, as it is for a real conversion.
    rates["raw_read"] = min(_timed(lambda: raw_read(paths), cold=paths) for _ in range(3))
    rates["raw_read_warm"] = min(_timed(lambda: raw_read(paths)) for _ in range(3))
    rates["naive_tf_writer"] = _timed(lambda: _naive(paths, str(tmp_path / "naive.tfrecord")), cold=paths)

    def run(name, **options):
        dest = str(tmp_path / name)
        rates[name] = _timed(lambda: tfpipe.convert(src, dest, num_shards=8, **options), cold=paths)

    run("decodecheck_w1", workers=1)
    run(f"decodecheck_w{WORKERS}", workers=WORKERS)
    run("copy_w1", workers=1, check="header")
    run(f"copy_w{WORKERS}", workers=WORKERS, check="header")
    run("reencode_w1", workers=1, resize_shorter=RESIZE)
    benchmark.pedantic(
        lambda: run(f"reencode_w{WORKERS}", workers=WORKERS, resize_shorter=RESIZE, overwrite=True),
        rounds=1,
        iterations=1,
    )
    n = len(paths)
    report = {
        k: {"images_per_s": round(n / t, 1), "MB_per_s": round(total / t / 1e6, 1)} for k, t in rates.items()
    }
    scaling = rates["reencode_w1"] / rates[f"reencode_w{WORKERS}"]
    copy_vs_read = rates["raw_read"] / min(rates["copy_w1"], rates[f"copy_w{WORKERS}"])
    benchmark.extra_info.update(
        report
        | {
            "reencode_scaling": round(scaling, 2),
            "workers": WORKERS,
            "copy_vs_raw_read": round(copy_vs_read, 3),
            "images": n,
            "mean_kb": round(total / n / 1e3, 1),
        }
    )
    print()
    for k, v in report.items():
        print(f"{k:>16}: {v['images_per_s']:>9} img/s {v['MB_per_s']:>8} MB/s")
    print(
        f"re-encode scaling {scaling:.2f}x with {WORKERS} workers (target >= {0.85 * WORKERS:.2f}); "
        f"copy at {copy_vs_read:.3f} of raw read bandwidth (target >= 0.7)"
    )

"""The CSV first pass (types every field by the text rules, counts, checks): CPU per row.

Run: TFPIPE_BENCH_DATA=/tmp/perflab python -m pytest benchmarks/test_table_scan_speed.py -q -s -o addopts=""
(TFPIPE_BENCH_ROWS=2000 for a quick check that it runs.)
Reports rows/s per core (process CPU time) for `tables_scan.scan` of the benchmarks' 40-column CSV,
the first pass of `tfpipe convert` on one core; the second pass and encoding run in workers.
"""

import time

from tfpipe.modalities.tables.convert import scan as tables_scan


def test_csv_first_pass_cpu_per_row(benchmark, table_40):
    csv, _ = table_40

    def scan():
        start = time.process_time()
        out = tables_scan.scan(csv, "csv", tables_scan.TableOptions(label="label"))
        return out.rows, time.process_time() - start

    rows, cpu = benchmark.pedantic(scan, rounds=3, iterations=1)
    benchmark.extra_info["rows_per_cpu_second"] = rows / cpu
    print(f"\nCSV first pass: {rows} rows x 40 columns, {rows / cpu:,.0f} rows per CPU second")

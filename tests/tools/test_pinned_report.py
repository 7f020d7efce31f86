"""The pinned run's statistics (benchmarks/pinned.py, report.py) on hand-made windows.

No cluster and no TensorFlow: the windows are what `window_with_bytes` returns.
"""

from benchmarks import pinned
from benchmarks.common import report


def test_the_median_interval_takes_the_order_statistics_binomial_tails_allow():
    # n = 16: P(B <= 3) = (1 + 16 + 120 + 560) / 65536 = 0.0106 <= 0.025 and
    # P(B <= 4) = 2517 / 65536 = 0.0384 > 0.025, so k = 4: the 4th and 13th values.
    assert report.median_interval(list(range(1, 17))) == (4, 13)
    # n = 9: P(B <= 1) = 10 / 512 = 0.0195 <= 0.025, P(B <= 2) = 46 / 512 > 0.025: k = 2.
    assert report.median_interval([9, 1, 8, 2, 7, 3, 6, 4, 5]) == (2, 8)
    # n = 17: P(B <= 4) = 3214 / 131072 = 0.0245 and P(B <= 5) = 9402 / 131072 = 0.0717:
    # k = 5. n = 20: P(B <= 5) = 21700 / 1048576 = 0.0207, P(B <= 6) = 0.0577: k = 6.
    assert report.median_interval(list(range(1, 18))) == (5, 13)
    assert report.median_interval(list(range(1, 21))) == (6, 15)
    # n = 5: even P(B = 0) = 1 / 32 > 0.025: no k holds, the whole range is given.
    assert report.median_interval([5, 1, 3, 2, 4]) == (1, 5)
    assert report.median_interval([0.9]) == (0.9, 0.9)


def _window(steps_per_sec, reference, pair, ps_bytes=0.0):
    cpu = {"ps0": 0.04, "worker0": 1.0, "worker1": 0.0}
    reference_cpu = {"ps0": 0.0, "worker0": 0.0, "worker1": 1.0}
    return {
        "pair": pair,
        "build": pair // 2,
        "per_worker": [steps_per_sec],
        "steps": [int(steps_per_sec * 3)],
        "ps_bytes": ps_bytes,
        "seconds": 3.0,
        "cpu_share": cpu,
        "reference": {"per_worker": [reference], "cpu_share": reference_cpu, "seconds": 3.0},
    }


def _pinned(ratios, reference=160.0):
    windows = [_window(r * reference, reference, i) for i, r in enumerate(ratios)]
    return {"model": "mlp-2.9M", "throughput": {pinned.CONFIGS[0]: windows}}


def test_the_target_is_judged_on_the_median_pair_ratio():
    # Ratios 0.90, 0.94, 0.955, 0.965, 0.97, 0.99: median (0.955 + 0.965) / 2 = 0.96;
    # n = 6: k = 1 (P(B = 0) = 1 / 64 <= 0.025), the interval is the range.
    (row,) = pinned.targets(_pinned([0.97, 0.90, 0.99, 0.94, 0.955, 0.965]))
    target, measured, met = row
    assert target.startswith("easgd-64-overlap-bf16 >= 0.95 x local")
    assert measured == "0.960 x (95 % interval 0.90-0.99, 6 pairs)"
    assert met is True
    # Five pairs: the median 0.94 misses; too few pairs for an interval.
    (row,) = pinned.targets(_pinned([0.97, 0.90, 0.93, 0.94, 0.96]))
    assert row == (target, "0.940 x (95 % interval -, 5 pairs)", False)


def test_the_table_gives_each_configuration_its_pairs_and_the_reference_row():
    measured = _pinned([0.95, 0.93, 0.97], reference=150.0)
    # 0.18 MB a step: the link carries 0.18 MB x steps/s x 3 s in each window.
    for window in measured["throughput"][pinned.CONFIGS[0]]:
        window["ps_bytes"] = 0.18e6 * window["per_worker"][0] * 3.0
    lines = pinned.render(measured, {})
    assert "(easgd-64-overlap-bf16 3 in 2 builds)" in lines[0] and "in this run" in lines[0]
    rows = [line for line in "\n".join(lines).splitlines() if line.startswith("| ")][1:]
    assert rows[0] == "| local (reference, worker 1) | 150.00 | 1.00 | - | 0.00 | 1.00 | 0.00 |"
    # Steps/s 142.5, 139.5, 145.5: median 142.5; ratios' median 0.95; 3 pairs: no interval.
    assert rows[1] == "| easgd-64-overlap-bf16 | 142.50 | 0.95 | - | 0.18 | 1.00 | 0.04 |"


def test_a_run_without_the_judged_configurations_has_no_target():
    assert pinned.targets({"throughput": {}}) == []
    # The control (local SGD against itself) is a figure, never the judged row.
    control = _pinned([1.0, 0.98, 1.01])["throughput"].popitem()[1]
    assert pinned.targets({"throughput": {"local": control}}) == []

"""The side by side with contrib (benchmarks/contrib.py) on hand-made results, and the
harness's ps tasks (`BenchCluster(num_ps=...)`, made but not entered: no process starts).

No TensorFlow: the results are what `contrib.measure` records, written by hand.
"""

import pytest

from benchmarks import contrib
from benchmarks.common import protocol
from benchmarks.common.harness import BenchCluster

RUN = {"command": "python -m benchmarks.run", "date": "2026-12-09 10:00 UTC",
       "revision": {"commit": "abc1234", "changed": []}, "quick": False}  # fmt: skip
VERSIONS = {"contrib": {"tensorflow": "1.15.5", "python": "3.7.16"},
            "package": {"tensorflow": "2.21.0", "python": "3.11.7"}}  # fmt: skip
HEADER = [
    "| TensorFlow | configuration | steps/s | x local (per round) | ms a step over local |",
    "|---|---|---:|---:|---:|",
]
#: Where `models.FewestBytesFirst` puts mlp-2.9M's centres over 2 ps tasks, in creation
#: order, each to the task with fewer parameters so far (a tie: ps0): w0 (784 * 1024 =
#: 802,816) ps0; b0 ps1 (0 < 802,816); w1 ps1 (1,024 < 802,816), now 1,049,600; b1 ps0,
#: 803,840; w2 ps0, 1,852,416; b2 ps1, 1,050,624; w3 ps1, 1,060,864; b3 and global_step ps1.
SPREAD = {
    "global_center_variable/layer_0/weights": 0,
    "global_center_variable/layer_0/biases": 1,
    "global_center_variable/layer_1/weights": 1,
    "global_center_variable/layer_1/biases": 0,
    "global_center_variable/layer_2/weights": 0,
    "global_center_variable/layer_2/biases": 1,
    "global_center_variable/layer_3/weights": 1,
    "global_center_variable/layer_3/biases": 1,
    "global_step": 1,
}


def _runs(*rounds):
    """{side: {config: [{"round", "per_worker"}]}} of rounds of (contrib local, contrib
    easgd, package local, package easgd) steps/s of the two workers each."""
    runs = {"contrib": {}, "package": {}}
    for index, values in enumerate(rounds):
        for (side, config), per_worker in zip(contrib.RUNS, values, strict=True):
            runs[side].setdefault(config, []).append({"round": index, "per_worker": per_worker})
    return runs


#: 1 ps, two rounds; per round the mean of the two workers:
#:   contrib local 60, 80 (median 70); contrib-easgd-10 30, 56 (median 43);
#:   package local 100, 100 (median 100); easgd-10 80, 92 (median 86).
ONE_PS = _runs(
    ([50.0, 70.0], [30.0, 30.0], [100.0, 100.0], [79.0, 81.0]),
    ([80.0, 80.0], [56.0, 56.0], [100.0, 100.0], [92.0, 92.0]),
)
#: 2 ps, one round: contrib local 50, contrib-easgd-10 20; package local 80, easgd-10 64.
TWO_PS = _runs(([48.0, 52.0], [19.0, 21.0], [80.0, 80.0], [64.0, 64.0]))


def _results(two_ps=None):
    section = {"run": RUN, "runs": ONE_PS, "versions": VERSIONS, "model": "mlp-2.9M"}
    if two_ps is not None:
        section["two_ps"] = two_ps
    return {**RUN, "contrib": section}


def test_ratio_of_ratios_of_the_medians_and_per_round():
    # Medians: (86 / 100) / (43 / 70) = 0.86 * 70 / 43 = 1.4. Per round: (80 / 100) /
    # (30 / 60) = 1.6 and (92 / 100) / (56 / 80) = 0.92 / 0.7 = 1.3143: median 1.4571.
    medians, in_rounds = contrib.ratio_of_ratios({"runs": ONE_PS})
    assert medians == pytest.approx(1.4)
    assert in_rounds == pytest.approx((1.6 + 0.92 / 0.7) / 2)
    # 2 ps: (64 / 80) / (20 / 50) = 0.8 / 0.4 = 2, the one round's too.
    assert contrib.ratio_of_ratios({"runs": TWO_PS}) == pytest.approx((2.0, 2.0))


def test_ratio_of_ratios_is_none_without_a_configuration_or_runs():
    runs = {"contrib": ONE_PS["contrib"], "package": {"local": ONE_PS["package"]["local"]}}
    assert contrib.ratio_of_ratios({"runs": runs}) is None
    assert contrib.ratio_of_ratios({"skipped": "no tc"}) is None


def test_results_without_two_ps_render_the_one_table_as_before():
    # The rows: steps/s the median per round; x local the median of per-round ratios;
    # ms over local 1000 * (1 / steps - 1 / local's).
    #   contrib-easgd-10: 30 / 60 = 0.5, 56 / 80 = 0.7: 0.60; 1000 / 43 - 1000 / 70 = 8.97.
    #   easgd-10: 0.8 and 0.92: 0.86; 1000 / 86 - 1000 / 100 = 1.63.
    assert contrib.render(_results()) == [
        "### Side by side with contrib on TensorFlow 1.15",
        "",
        "Made by `benchmarks/contrib.py`; measured alone by `make bench-contrib`.",
        "",
        "mlp-2.9M, each side against its own `local`, in this run; same variables, batch and "
        "loss on both sides, checked before every window. Ratio of ratios (ours / contrib's): "
        "**1.40** (medians), 1.46 (per round).",
        "",
        "\n".join(HEADER + [
            "| 1.15.5 (contrib) | local | 70.0 | 1.00 | +0.0 |",
            "| 1.15.5 (contrib) | contrib-easgd-10 | 43.0 | 0.60 | +9.0 |",
            "| 2.21.0 (package) | local | 100.0 | 1.00 | +0.0 |",
            "| 2.21.0 (package) | easgd-10 | 86.0 | 0.86 | +1.6 |",
        ]),
        "",
    ]  # fmt: skip


def test_two_ps_rows_go_under_the_table_with_what_they_are():
    two_ps = {"num_ps": 2, "rate": "1gbit", "runs": TWO_PS,
              "placement": {"contrib": SPREAD, "package": SPREAD}}  # fmt: skip
    lines = contrib.render(_results(two_ps))
    assert lines[:8] == contrib.render(_results())
    text, gap, rows, end = lines[8:]
    assert text.startswith("**2 ps tasks, every task a host of its own on a 1 Gbit/s link**")
    # ps0: 802,816 + 1,024 + 1,048,576 = 1,852,416 parameters; ps1: 1,024 + 1,048,576 +
    # 1,024 + 10,240 + 10 = 1,060,874 (global_step is not the model's).
    assert "`replica_device_setter`" in text and "ps0 1.85 M, ps1 1.06 M." in text
    assert "direct calls" in text
    # (64 / 80) / (20 / 50) = 2 both ways.
    assert text.endswith(
        "Ratio of ratios (ours / contrib's): **2.00** (medians), 2.00 (per round)."
    )
    # contrib-easgd-10: 20 / 50 = 0.40, 1000 / 20 - 1000 / 50 = 30; easgd-10: 64 / 80 = 0.80,
    # 1000 / 64 - 1000 / 80 = 15.625 - 12.5 = 3.125.
    assert rows.splitlines() == HEADER + [
        "| 1.15.5 (contrib) | local | 50.0 | 1.00 | +0.0 |",
        "| 1.15.5 (contrib) | contrib-easgd-10 | 20.0 | 0.40 | +30.0 |",
        "| 2.21.0 (package) | local | 80.0 | 1.00 | +0.0 |",
        "| 2.21.0 (package) | easgd-10 | 64.0 | 0.80 | +3.1 |",
    ]  # fmt: skip
    assert (gap, end) == ("", "")


def test_two_ps_skipped_says_why_under_the_table():
    lines = contrib.render(_results({"skipped": "creating network namespaces needs root"}))
    assert lines[8:] == [
        "2 ps tasks, every task a host on a 1 Gbit/s link: skipped, creating network "
        "namespaces needs root.",
        "",
    ]


def test_parameters_per_task_counts_each_ps_tasks_centres():
    # ps0: 784 * 1024 + 1024 * 1024 + 1024 * 1024 + 1024 * 10 = 2,910,208 (global_step
    # not counted); ps1: 1024 + 1024 + 1024 + 10 = 3,082.
    assert contrib.parameters_per_task(SPREAD, protocol.COMM_MLP) == {0: 1852416, 1: 1060874}


def test_check_spread_takes_both_sides_alike_over_every_ps_task():
    contrib.check_spread({"contrib": SPREAD, "package": dict(SPREAD)}, 2)
    contrib.check_spread({"package": SPREAD}, 2)  # The first side built.


def test_check_spread_refuses_a_ps_task_left_out_or_sides_that_differ():
    on_ps0 = dict.fromkeys(SPREAD, 0)
    with pytest.raises(RuntimeError, match=r"package: variables on ps tasks \{0\}"):
        contrib.check_spread({"contrib": SPREAD, "package": on_ps0}, 2)
    swapped = {name: 1 - task for name, task in SPREAD.items()}
    with pytest.raises(RuntimeError, match="the sides spread the variables differently"):
        contrib.check_spread({"contrib": SPREAD, "package": swapped}, 2)


def test_a_bench_cluster_has_one_ps_unless_told(tmp_path):
    cluster = BenchCluster(2, tmp_path)
    assert cluster.tasks == ["ps0", "worker0", "worker1"]
    assert (len(cluster.spec["ps"]), len(cluster.spec["worker"])) == (1, 2)


def test_a_bench_cluster_with_two_ps_lists_them_first(tmp_path):
    cluster = BenchCluster(2, tmp_path, num_ps=2)
    assert cluster.tasks == ["ps0", "ps1", "worker0", "worker1"]
    assert (len(cluster.spec["ps"]), len(cluster.spec["worker"])) == (2, 2)
    assert len(set(cluster.spec["ps"] + cluster.spec["worker"])) == 4  # A port each.


@pytest.mark.parametrize("num_ps", [0, -1, 1.5, "2", True, None])
def test_a_bench_cluster_refuses_a_bad_num_ps_before_making_its_network(tmp_path, num_ps):
    # With a rate, making the cluster makes its hosts' namespaces (or fails without root):
    # the ValueError comes first.
    with pytest.raises(ValueError, match=rf"num_ps must be an int of at least 1, got {num_ps!r}"):
        BenchCluster(2, tmp_path, rate="1gbit", num_ps=num_ps)

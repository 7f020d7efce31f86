"""The cost model of benchmarks/common/cost_model.py (docs/SCALING.md), on numbers worked by hand.

No TensorFlow, no cluster: the model is arithmetic on measured constants.
"""

import pytest

from benchmarks.common import cost_model
from benchmarks.common.cost_model import Cluster, Costs

MS = 1e-3
GBIT = 1e9


def test_an_exchange_costs_a_call_per_ps_task_and_every_byte_both_ways():
    costs = Costs(worker_call_secs=1 * MS, worker_byte_secs=1e-9, ps_call_secs=1 * MS,
                  ps_byte_secs=1e-9)  # fmt: skip
    # The worker: 2 calls of 1 ms, and 4 MB sent + 4 MB received at 1 ns a byte: 2 + 8 ms.
    assert costs.worker_secs(4e6, 2) == pytest.approx(10 * MS)
    # Each of the 2 ps tasks: its call, 1 ms, and half the bytes both ways, 4 ms.
    assert costs.ps_secs(4e6, 2) == pytest.approx(5 * MS)


def test_one_worker_alone_waits_for_its_compute_its_cpu_and_the_ps():
    # tau 10 steps of 10 ms, the worker's 8 ms of CPU on its own machine, 5 ms on the ps:
    # a cycle of 100 + 8 + 5 = 113 ms, nobody in the way.
    costs = Costs(worker_byte_secs=1e-9, ps_call_secs=5 * MS)  # 2 x 4 MB x 1 ns = 8 ms.
    predicted = cost_model.predict(Cluster(None, workers=1), costs, 4e6, 10, 10 * MS)
    assert predicted.exchanges_per_sec == pytest.approx(1 / 0.113)
    assert predicted.latency_secs == pytest.approx(13 * MS)
    assert predicted.steps_per_sec == pytest.approx(10 / 0.113)
    assert predicted.ps_cores_busy == pytest.approx(5 * MS / 0.113)


def test_many_workers_saturate_the_ps_core():
    # 5 ms of a 1-core ps per exchange: at most 200 exchanges/s, however many workers; 100
    # workers would offer 100 / 0.113 s = 885 a second. The ps is then busy all the time,
    # and a worker's cycle is 100 / 200 = 0.5 s: 10 steps in 0.5 s. (The approximation
    # reaches the bound from below: within 1 % here.)
    costs = Costs(worker_byte_secs=1e-9, ps_call_secs=5 * MS)
    predicted = cost_model.predict(Cluster(None, workers=100), costs, 4e6, 10, 10 * MS)
    assert predicted.exchanges_per_sec == pytest.approx(200, rel=1e-2)
    assert predicted.ps_cores_busy == pytest.approx(1.0, rel=1e-2)
    assert predicted.steps_per_sec == pytest.approx(20, rel=1e-2)
    # Four cores serve four times as many (400 workers offer 3,540 a second).
    bigger = Cluster(None, workers=400, ps_cores=4)
    assert cost_model.predict(bigger, costs, 4e6, 10, 10 * MS).exchanges_per_sec == (
        pytest.approx(800, rel=1e-2)
    )


def test_a_ps_core_does_not_queue_as_many_workers_as_it_has_cores():
    # Two workers on two shared cores, compute included (BENCHMARKS.md section 5): each
    # cycle asks 240 ms of compute + 3 + 3 ms of exchange CPU; with a core each, nobody
    # waits: 246 ms per 10 steps.
    costs = Costs(worker_call_secs=3 * MS, ps_call_secs=3 * MS)
    box = Cluster(None, workers=2, shared_cores=2)
    assert cost_model.predict(box, costs, 4e6, 10, 24 * MS).steps_per_sec == (
        pytest.approx(10 / 0.246)
    )


def test_the_ps_links_bound_the_exchanges_each_way():
    # 10 MB each way over 2 ps tasks: 5 MB per link per direction, at 0.8 x 1 Gbit/s =
    # 100 MB/s: 50 ms. However many workers: at most 20 exchanges/s, each link 0.8 busy
    # (within 2 %: four stations share the bound, which the approximation nears slowly).
    costs = Costs(link_efficiency=0.8)
    many = Cluster(1 * GBIT, workers=200, ps_tasks=2)
    predicted = cost_model.predict(many, costs, 10e6, 10, 10 * MS)
    assert predicted.exchanges_per_sec == pytest.approx(20, rel=2e-2)
    assert predicted.link_busy == pytest.approx(0.8, rel=2e-2)


def test_the_overlapped_exchange_hides_its_transfer_behind_the_next_steps():
    # Late replies (the exchange before issue 38): a link carries the values, then the
    # centres.
    # 12.5 MB each way at 1 Gbit/s (125 MB/s): 100 ms in, 100 ms out. Waiting for it, one
    # worker's cycle is 100 ms of compute + 200 ms; overlapped, the compute's 100 ms, since
    # neither direction of the link is busy longer.
    one = Cluster(1 * GBIT, late_replies=True, workers=1)
    costs = Costs()
    assert cost_model.step_time("easgd-10", 10 * MS, 12.5e6, one, costs) == pytest.approx(0.03)
    assert cost_model.step_time("easgd-10-overlap", 10 * MS, 12.5e6, one, costs) == (
        pytest.approx(0.01)
    )


def test_on_shared_cores_the_overlapped_exchange_still_costs_its_cpu():
    # Two workers and the ps on two cores (section 5): the overlap hides the transfer, but
    # the exchange's 36 ms of CPU (worker and ps) still comes out of the cores that compute:
    # 10 steps of 24 ms + 36 ms = 276 ms per cycle of each worker, 27.6 ms a step.
    costs = Costs(worker_call_secs=18 * MS, ps_call_secs=18 * MS)
    box = Cluster(1 * GBIT, workers=2, shared_cores=2)
    assert cost_model.step_time("easgd-10-overlap", 24 * MS, 1e6, box, costs) == (
        pytest.approx(0.0276)
    )


def test_configurations_name_their_bytes_period_and_overlap():
    assert cost_model.config_exchange("async", 8e6) == (8e6, 1, False)
    assert cost_model.config_exchange("easgd-64", 8e6) == (8e6, 64, False)
    assert cost_model.config_exchange("easgd-10-overlap-bf16", 8e6) == (4e6, 10, True)
    with pytest.raises(ValueError, match="no formula for configuration 'naive-easgd-10'"):
        cost_model.config_exchange("naive-easgd-10", 8e6)


def test_sync_waits_for_every_workers_transfer():
    # c = 10 ms, the model 1 MB: 2 MB moved per step at 0.5 x 8 Gbit/s = 500 MB/s is 4 ms;
    # 8 workers on 2 ps links: 4 x 4 = 16 ms. No CPU: 10 + 16 = 26 ms.
    eight = Cluster(8 * GBIT, workers=8, ps_tasks=2)
    costs = Costs(link_efficiency=0.5)
    assert cost_model.step_time("sync", 10 * MS, 1e6, eight, costs) == pytest.approx(0.026)


def test_the_link_efficiency_that_fits_is_found():
    # Step times made with e = 0.8 give e = 0.8 back.
    truth = Costs(link_efficiency=0.8)
    measured = [
        (config, 10 * MS, Cluster(1 * GBIT, workers=w), cost_model.step_time(
            config, 10 * MS, 11.7e6, Cluster(1 * GBIT, workers=w), truth))
        for config in ("easgd-10", "easgd-64") for w in (2, 8)
    ]  # fmt: skip
    fitted = cost_model.fit_link_efficiency(measured, 11.7e6, Costs())
    assert fitted.link_efficiency == pytest.approx(0.8)


def test_the_ps_tasks_the_rule_asks_for():
    # 64 workers exchanging every 10 steps of 100 ms offer 64 exchanges/s. A 10 MB model at
    # 10 Gbit/s x 0.8 (1 GB/s) kept 80 % busy: 64 x 10 MB / 0.8 GB/s = 0.8 link -> 1 ps
    # by the link; at 2 ns a byte served both ways on 1 core, 64 x 20 MB x 2 ns = 2.56 core
    # seconds a second, / 0.8 busy -> 3.2 cores: 4 ps tasks of 1 core.
    costs = Costs(ps_byte_secs=2e-9, link_efficiency=0.8)
    assert cost_model.ps_tasks_needed(64, 10e6, 10, 0.1, costs, 10 * GBIT, 1) == 4
    # With 4 cores each, one ps is enough for the CPU; a 1 Gbit/s link then needs 8 by
    # the link (64 x 10 MB / (0.8 x 0.8 x 125 MB/s) = 8).
    assert cost_model.ps_tasks_needed(64, 10e6, 10, 0.1, costs, 10 * GBIT, 4) == 1
    assert cost_model.ps_tasks_needed(64, 10e6, 10, 0.1, costs, 1 * GBIT, 4) == 8
    # Calls alone may saturate a ps: 64 exchanges/s of 20 ms each is 1.28 cores.
    busy_calls = Costs(ps_call_secs=20 * MS, link_efficiency=0.8)
    assert cost_model.ps_tasks_needed(64, 10e6, 10, 0.1, busy_calls, 10 * GBIT, 1) is None


def test_a_lone_worker_is_not_crowded():
    # Crowding counts the other transfers and exchanges: one worker meets none, and its
    # cycle is the 113 ms of the first test, whatever the rates.
    crowded = Costs(worker_byte_secs=1e-9, ps_call_secs=5 * MS, link_crowding=0.5,
                    ps_crowding=0.5)  # fmt: skip
    predicted = cost_model.predict(Cluster(None, workers=1), crowded, 4e6, 10, 10 * MS)
    assert predicted.exchanges_per_sec == pytest.approx(1 / 0.113)


def test_two_transfers_in_flight_crowd_each_other():
    # Late replies (the exchange before issue 38): a link carries the values, then the
    # centres.
    # 12.5 MB each way at 1 Gbit/s (125 MB/s): D = 100 ms in, 100 ms out; no compute, no
    # CPU. Two workers share the link's two stations, one each on average (q = 1), and an
    # arriving transfer finds half of the other's: q' = 0.5 at each, 1 in flight on the
    # link's host. Without crowding it stays D (1 + 0.5) = 150 ms at each: a 300 ms cycle,
    # 2 / 0.3 = 6.67 exchanges/s. With 20 % a transfer in flight it takes D (1 + 0.2 x 1) =
    # 120 ms, 180 at each: 360 ms, 5.56 exchanges/s.
    two = Cluster(1 * GBIT, late_replies=True, workers=2)
    plain = cost_model.predict(two, Costs(), 12.5e6, 1, 0.0)
    assert plain.exchanges_per_sec == pytest.approx(2 / 0.3)
    crowded = cost_model.predict(two, Costs(link_crowding=0.2), 12.5e6, 1, 0.0)
    assert crowded.exchanges_per_sec == pytest.approx(2 / 0.36)


def test_links_of_one_network_host_crowd_each_other():
    # Late replies (the exchange before issue 38): a link carries the values, then the
    # centres.
    # 2 ps tasks: 6.25 MB per link each way, D = 50 ms at each of 4 link stations; no CPU.
    # The calls go at once: an exchange is at both tasks' links together and lasts as
    # long as the slower task's in + out, so a cycle is 2 R and each of the two workers
    # holds R / 2R at every station: q = 1, q' = 0.5, R = D (1 + 0.5) x crowding. On their
    # own machines a ps link counts its own two stations, 1 in flight: R = 50 x 1.5 x
    # (1 + 0.2 x 1) = 90 ms, a 180 ms cycle, 2 / 0.18 = 11.1 exchanges/s. Forwarded by
    # one machine (the scale harness), all 4 count, 2 in flight: 50 x 1.5 x 1.4 = 105 ms,
    # 210 ms a cycle, 9.52 exchanges/s.
    costs = Costs(link_crowding=0.2)
    apart = Cluster(1 * GBIT, late_replies=True, workers=2, ps_tasks=2)
    assert cost_model.predict(apart, costs, 12.5e6, 1, 0.0).exchanges_per_sec == (
        pytest.approx(2 / 0.18)
    )
    together = Cluster(1 * GBIT, late_replies=True, workers=2, ps_tasks=2, one_network_host=True)
    assert cost_model.predict(together, costs, 12.5e6, 1, 0.0).exchanges_per_sec == (
        pytest.approx(2 / 0.21)
    )
    # Called one after the other, the 4 stations add up: R / 4R at each, q' = 0.25 and
    # 0.5 in flight per link, 1 on one host: R = 50 x 1.25 x 1.1 = 68.75 ms (apart),
    # 50 x 1.25 x 1.2 = 75 ms (together): cycles of 275 and 300 ms.
    serial = {"ps_tasks": 2, "serial_calls": True}
    assert cost_model.predict(
        Cluster(1 * GBIT, late_replies=True, workers=2, **serial), costs, 12.5e6, 1, 0.0
    ).exchanges_per_sec == pytest.approx(2 / 0.275)
    assert cost_model.predict(
        Cluster(1 * GBIT, late_replies=True, workers=2, one_network_host=True, **serial),
        costs,
        12.5e6,
        1,
        0.0,
    ).exchanges_per_sec == pytest.approx(2 / 0.3)


def test_calls_at_once_wait_for_the_slowest_link_not_the_sum():
    # Late replies (the exchange before issue 38): a link carries the values, then the
    # centres.
    # One worker, 10 MB each way over 4 ps tasks at 1 Gbit/s (125 MB/s): 2.5 MB per link
    # each way, 20 ms in and 20 ms out, 40 ms a task; each task's 5 ms of CPU on cores of
    # its own overlaps its transfer. One after the other: 4 x 40 = 160 ms (the CPU, 20 ms,
    # hides behind it). At once: the slowest task, 40 ms: a quarter.
    costs = Costs(ps_call_secs=5 * MS)
    at_once = Cluster(1 * GBIT, late_replies=True, workers=1, ps_tasks=4)
    one_by_one = Cluster(1 * GBIT, late_replies=True, workers=1, ps_tasks=4, serial_calls=True)
    assert cost_model.predict(at_once, costs, 10e6, 10, 10 * MS).latency_secs == (
        pytest.approx(40 * MS)
    )
    assert cost_model.predict(one_by_one, costs, 10e6, 10, 10 * MS).latency_secs == (
        pytest.approx(160 * MS)
    )
    # One task: nothing to do at once, the same 10 MB in 80 + 80 ms either way.
    for serial in (False, True):
        alone = Cluster(1 * GBIT, late_replies=True, workers=1, ps_tasks=1, serial_calls=serial)
        assert cost_model.predict(alone, costs, 10e6, 10, 10 * MS).latency_secs == (
            pytest.approx(160 * MS)
        )


def test_replies_at_once_take_the_longer_way_of_a_link_not_both():
    # One worker, 10 MB each way at 1 Gbit/s (125 MB/s), no CPU: 80 ms in, 80 ms out on
    # one ps task. Replies after the updates (before issue 38): 160 ms; at once, both ways
    # of the link are busy together: 80 ms. Over 4 ps tasks, 20 ms a way per link: one
    # after the other 4 x 20 = 80 ms (4 x 40 with late replies), at once 20 ms. With 30 ms
    # of the worker's CPU on a core its bytes are copied on as they travel (the scale
    # harness's), the CPU bounds the calls at once: max(30, 20) = 30 ms.
    for ps_tasks, serial, late, expected in (
        (1, False, True, 160), (1, False, False, 80), (4, True, True, 160),
        (4, True, False, 80), (4, False, False, 20),
    ):  # fmt: skip
        cluster = Cluster(1 * GBIT, workers=1, ps_tasks=ps_tasks, serial_calls=serial,
                          late_replies=late)  # fmt: skip
        predicted = cost_model.predict(cluster, Costs(), 10e6, 10, 10 * MS)
        assert predicted.latency_secs == pytest.approx(expected * MS)
    cpu = Costs(worker_call_secs=7.5 * MS)  # 4 calls: 30 ms.
    pinned = Cluster(1 * GBIT, workers=1, ps_tasks=4, worker_pool_cores=1)
    predicted = cost_model.predict(pinned, cpu, 10e6, 10, 0.0)
    assert predicted.latency_secs == pytest.approx(30 * MS)


def test_calls_at_once_still_share_the_cores_they_share():
    # Late replies (the exchange before issue 38): a link carries the values, then the
    # centres.
    # The scale harness: the ps tasks share one core, the workers' exchanges another. One
    # worker, 2 ps tasks, 10 MB each way: 40 ms a way per link, 80 ms a task. The worker's
    # CPU is 2 calls of 5 ms; each ps task's 30 ms, on the one core: 60 ms. One after the
    # other the links add up: max(10 + 60, 2 x 80) = 160 ms. At once: max(70, 80) = 80 ms,
    # the slower link. With 50 ms a ps task the shared ps core's 100 ms (and the worker's
    # 10) bound it instead: max(110, 80) = 110 ms; one after the other still 160.
    harness = {"ps_tasks": 2, "ps_pool_cores": 1, "worker_pool_cores": 1}
    for ps_call, at_once, one_by_one in ((30 * MS, 80 * MS, 160 * MS),
                                         (50 * MS, 110 * MS, 160 * MS)):  # fmt: skip
        costs = Costs(worker_call_secs=5 * MS, ps_call_secs=ps_call)
        for serial, expected in ((False, at_once), (True, one_by_one)):
            cluster = Cluster(
                1 * GBIT, late_replies=True, workers=1, serial_calls=serial, **harness
            )
            predicted = cost_model.predict(cluster, costs, 10e6, 10, 10 * MS)
            assert predicted.latency_secs == pytest.approx(expected)


def test_a_crowded_ps_core_serves_fewer_exchanges():
    # 5 ms of a 1-core ps per exchange, two workers with nothing else to do: both are at
    # the ps (q = 2, q' = 1), so an exchange costs 5 x (1 + 0.1 x 1) = 5.5 ms and the core
    # serves 1 / 5.5 ms = 182 exchanges/s (200 uncrowded), busy all the time.
    costs = Costs(ps_call_secs=5 * MS, ps_crowding=0.1)
    predicted = cost_model.predict(Cluster(None, workers=2), costs, 4e6, 1, 0.0)
    assert predicted.exchanges_per_sec == pytest.approx(1 / 0.0055)
    assert predicted.ps_cores_busy == pytest.approx(1.0)


def test_the_rule_takes_crowding_at_its_load():
    # At 80 % busy a link holds 0.8 / 0.2 = 4 transfers each way on average: with 2.5 % a
    # transfer, 8 in flight slow one by 1 + 0.2, so e = 0.96 gives 0.8. 64 exchanges/s of
    # 100 MB at 10 Gbit/s: 6.4 GB/s / (0.8 x 0.8 x 1.25 GB/s) = 8 ps (uncrowded: 6.4 /
    # (0.8 x 0.96 x 1.25) = 6.67 -> 7). A ps core at 80 % holds 4 exchanges: with 5 % each
    # its CPU is 1.2 x dearer: 64 x 200 MB x 1 ns x 1.2 = 15.4 core s/s, / (0.8 x 4) = 4.8.
    costs = Costs(link_efficiency=0.96, link_crowding=0.025)
    assert cost_model.ps_tasks_needed(64, 100e6, 10, 0.1, costs, 10 * GBIT, 4) == 8
    assert cost_model.ps_tasks_needed(64, 100e6, 10, 0.1, Costs(link_efficiency=0.96),
                                      10 * GBIT, 4) == 7  # fmt: skip
    cpu = Costs(ps_byte_secs=1e-9, ps_crowding=0.05)
    assert cost_model.ps_tasks_needed(64, 100e6, 10, 0.1, cpu, 100 * GBIT, 4) == 5


def test_scaling_limit_is_the_first_worker_count_past_the_slowdown():
    # The ps core of the saturation test serves 200 exchanges/s; a worker alone takes 113
    # ms per 10 steps. With W workers the cycle is at least W / 200 s: a worker slows below
    # 0.9 x alone (a cycle over 113 / 0.9 = 125.6 ms) from W = 26 (26 / 200 = 130 ms) at
    # most; queueing before the bound makes it earlier.
    costs = Costs(worker_byte_secs=1e-9, ps_call_secs=5 * MS)
    limit = cost_model.scaling_limit("easgd-10", 10 * MS, 4e6, Cluster(None, 1), costs)
    assert 2 <= limit <= 26
    grown = cost_model.step_time("easgd-10", 10 * MS, 4e6, Cluster(None, limit), costs)
    assert grown > 0.0113 / 0.9

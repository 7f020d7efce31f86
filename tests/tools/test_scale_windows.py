"""The scale harness's window helpers (benchmarks/scale_windows.py) on hand-worked windows."""

from benchmarks import scale_windows

WARM = (1.0, 4.0)  # scale.py's WARM_SECS, MAX_WARM_SECS.


def measured(workers, seconds, exchanges):
    return {"workers": workers, "seconds": seconds, "exchanges": exchanges}


def test_a_window_of_two_cycles_or_fewer_runs_again_three_measured_cycles_long():
    # 16 workers, 18 exchanges in 2 s: 1.125 cycles each, so a cycle of 2 / 1.125 =
    # 1.78 s; three are 5.33 s (within 6 s), warmed up one cycle.
    warm, seconds = scale_windows.again(measured(16, 2.0, 18), 6.0, WARM)
    assert (round(warm, 2), round(seconds, 2)) == (1.78, 5.33)
    # No exchange at all: the longest window, warmed up the longest.
    assert scale_windows.again(measured(4, 2.0, 0), 6.0, WARM) == (4.0, 6.0)
    # --quick's longest window is 2 s: one cycle of 1 s becomes (1 s, 2 s), not 3 s.
    assert scale_windows.again(measured(2, 1.0, 2), 2.0, WARM) == (1.0, 2.0)


def test_a_window_of_three_cycles_or_not_much_shorter_stays():
    # Three cycles held (48 = 3 x 16).
    assert scale_windows.again(measured(16, 2.0, 48), 6.0, WARM) is None
    # 2.5 cycles of 0.8 s: three are 2.4 s, under 1.5 x 2 s.
    assert scale_windows.again(measured(2, 2.0, 5), 6.0, WARM) is None
    # 1.5 cycles of 4 s each: three are 12 s, capped at 6 s, under 1.5 x 6 s.
    assert scale_windows.again(measured(4, 6.0, 6), 6.0, WARM) is None

"""docs/SCALING.md's tables of what a job of many workers needs besides exchanges: start-up
and end, the work ledger, checkpoints, descriptors (scale.py measures them with easgd-train's
own pieces), the parameter servers' memory, and one exchange's calls one after the other
against all at once.
"""

import statistics

from benchmarks.common.report import ms, table


def calls_table(results):
    """One exchange alone: its latency with the calls to the ps tasks one after the other
    and all at once, medians of each form's windows in the same run, and their ratio."""
    rows, measured = [], results.get("calls")
    if not measured:
        return []
    for key in sorted({(m["ps"], m["rate"] or "") for m in measured}):

        def median(serial, key=key):
            return statistics.median(
                m["latency"]["median"] for m in measured
                if (m["ps"], m["rate"] or "") == key and m["serial_calls"] == serial
            )  # fmt: skip

        one_by_one, at_once = median(True), median(False)
        rows.append([key[0], key[1] or "not shaped", ms(one_by_one), ms(at_once),
                     f"{at_once / one_by_one:.2f}"])  # fmt: skip
    rounds = max(m["round"] for m in measured) + 1
    return [
        "### One exchange's calls: one after the other, and all at once", "",
        f"One worker exchanging {results['model']} back to back, float32, medians (ms) of "
        f"{rounds} interleaved round(s) of each form in this run; the calls one after the "
        "other are the exchange before issue 38, built again for this comparison.", "",
        table("ps | -link | one after the other | at once | ratio", rows), "",
    ]  # fmt: skip


def pieces_table(results):
    """What a job of many workers needs besides exchanges, one figure a row."""
    pieces, rows = results.get("pieces"), []
    if not pieces:
        return []
    for job in pieces["job"]:
        w, others = job["workers"], job["others_ready"]["median"]
        rows += [
            (f"{w} workers: the chief's session, the others' (median), the last (s)",
             f"{job['chief_ready']:.2f}, {others:.2f}, {job['last_ready']:.2f}"),
            (f"{w} workers: ps cores busy while they wait for the chief",
             f"{job['waiting_ps_cores']:.2f}"),
            (f"{w} workers: end of job (counts, checkpoint, export, acknowledgements), s",
             f"{job['end_of_job']:.2f} ({job['wait_for_counts']:.2f}, {job['checkpoint']:.2f}, "
             f"{job['export']:.2f}, {job['acknowledged']:.2f})"),
        ]  # fmt: skip
    what = {None: "written back to back", "read": "read whole", "end": "end polled"}
    for ledger in pieces["ledger"]:
        rows.append((
            f"work ledger, {ledger['workers']} workers, {what[ledger['poll']]}: calls/s, p99 ms, "
            "ps 0 cores",
            f"{ledger['calls_per_sec']:.0f}, {ms(ledger['latency']['p99'])}, "
            f"{ledger['ps0_cores']:.2f}",
        ))  # fmt: skip
    saves = [
        f"{ms(c['save']['median'])} ({ms(c['restore']['median'])})" for c in pieces["checkpoint"]
    ]
    ps_counts = ", ".join(str(c["ps"]) for c in pieces["checkpoint"])
    rows.append((f"checkpoint save (restore) of the centre, ms, {ps_counts} ps", ", ".join(saves)))
    top = [pc for pc in results["ps_counts"] if pc["wire"] is None][-1]
    fds = [f"{f[0]['all']} ({f[0]['sockets']})" for f in (top["fds"]["ps"], top["fds"]["hosts"])]
    rows.append((f"open files (sockets) of a ps and a host, {top['ps']} ps", ", ".join(fds)))
    title = "### What a job of many workers needs besides exchanges"
    return [title, "", table("-piece | measured", rows), ""]


def memory_table(results, last):
    """The ps tasks' resident memory, summed: none built, all built, after the windows."""

    def held(memory):
        return f"{sum(t['rss'] for t in memory) / 1e6:.0f}"

    rows = [[pc["ps"], pc["wire"] or "float32", held(pc["memory"]["0"]),
             held(pc["memory"][str(last)]), held(pc["memory_after_windows"])]
            for pc in results["ps_counts"]]  # fmt: skip
    return table(f"ps | -wire | W=0 | W={last} | after", rows)

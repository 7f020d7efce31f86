"""docs/SCALING.md's tables of what a job of many workers needs besides exchanges: start-up
and end, the work ledger, checkpoints, descriptors (scale.py measures them with easgd-train's
own pieces), the parameter servers' memory, and one exchange's calls in the forms of
`protocol.CALL_FORMS`.
"""

import statistics

from benchmarks.common.protocol import CALL_FORMS
from benchmarks.common.report import ms, table


def calls_table(results):
    """One exchange alone: its latency in each of `protocol.CALL_FORMS`, medians of each
    form's windows in the same run, and the library's against the other two."""
    rows, measured = [], results.get("calls")
    if not measured:
        return []
    for key in sorted({(m["ps"], m["rate"] or "") for m in measured}):

        def median(form, key=key):
            latencies = [m["latency"]["median"] for m in measured
                         if (m["ps"], m["rate"] or "") == key and _form(m) == form]  # fmt: skip
            return statistics.median(latencies) if latencies else None

        before, one_by_one, at_once = (median(form) for form in CALL_FORMS)
        rows.append([key[0], key[1] or "not shaped", *map(ms, (before, one_by_one, at_once)),
                     _ratio(at_once, before), _ratio(at_once, one_by_one)])  # fmt: skip
    rounds = max(m["round"] for m in measured) + 1
    names = " | ".join(CALL_FORMS.values())
    return [
        "### One exchange's calls: before issue 38, one after the other, and all at once", "",
        f"One worker exchanging {results['model']} back to back, float32, medians (ms) of "
        f"{rounds} interleaved round(s) of each form in this run{_alone(results)}. Before "
        "issue 38: the calls one after the other, each task's replies sent after its updates; "
        "one after the other: the library's calls, chained (the two built again for this "
        "comparison); at once: the library's exchange.", "",
        table(f"ps | -link | {names} | ratio to before | ratio to one after the other",
              rows), "",
    ]  # fmt: skip


def _alone(results):
    """Where the calls ran: in a cluster of their own (results with "calls_cluster", from
    83200f2 on), or before that beside the many-worker cluster's idle workers."""
    if "calls_cluster" in results:
        return ", in a cluster of one worker (nothing else on its core)"
    return ", beside the idle workers of the many-worker cluster"


def _ratio(seconds, other):
    return "-" if seconds is None or other is None else f"{seconds / other:.2f}"


def _form(m):
    """A calls row's form; runs before the form was recorded had two, the exchange of
    then (its calls chained: before issue 38) and the calls at once."""
    if "form" in m:
        return m["form"]
    return "before_38" if m["serial_calls"] else "at_once"


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

"""The soak's table of faults and its verdict, as text, from the record `runner.run` returns."""

import statistics

from soak import schedule as schedule_module

COLUMNS = (
    "#",
    "fault",
    "at (s)",
    "target",
    "duration (s)",
    "cost (s)",
    "bound (s)",
    "lost",
    "notes",
)


def fault_rows(record):
    """One row of strings per injected fault, in the order of `COLUMNS`."""
    rows = []
    for fault in record["faults"]:
        spec = fault["fault"]
        cost = fault["cost_secs"]
        notes = list(fault["notes"]) + [f"PROBLEM: {p}" for p in fault["problems"]]
        rows.append(
            (
                str(spec["index"]),
                spec["kind"],
                f"{fault['at_secs']:.0f}",
                spec["target"],
                f"{fault['ended'] - fault['injected']:.1f}",
                "stuck" if cost is None else f"{cost:.1f}",
                f"{fault['bound_secs']:.0f}",
                "" if fault["lost"] is None else f"{fault['lost']} exch.",
                "; ".join(notes),
            )
        )
    return rows


def table(rows, columns=COLUMNS):
    """A Markdown table of `rows` (sequences of strings) under `columns`."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def per_kind(record):
    """`{kind: (count, median cost, max cost)}` of the injected faults that recovered."""
    costs = {}
    for fault in record["faults"]:
        if fault["cost_secs"] is not None:
            costs.setdefault(fault["fault"]["kind"], []).append(fault["cost_secs"])
    return {
        kind: (len(costs[kind]), statistics.median(costs[kind]), max(costs[kind]))
        for kind in schedule_module.KINDS
        if kind in costs
    }


def text(record):
    """The whole report: settings, the table, costs per kind, the job's end, the checks."""
    settings = record["settings"]
    lines = [
        f"chaos soak: seed {settings['seed']}, {settings.get('ps', 1)} ps + "
        f"{settings['workers']} workers, "
        f"{settings['steps']} local steps each (period {settings['communication_period']}, "
        f"checkpoint every {settings['save_checkpoint_steps']} chief steps), "
        f"{len(record['faults'])} faults, {record['secs']:.0f} s",
        "",
        table(fault_rows(record)),
        "",
        table(
            [
                (kind, str(n), f"{median:.1f}", f"{most:.1f}")
                for kind, (n, median, most) in per_kind(record).items()
            ],
            ("fault", "count", "median cost (s)", "max cost (s)"),
        ),
        "",
    ]
    summary = record["summary"]
    if summary:
        lines.append(
            f"job: centre test accuracy {summary['test_accuracy']:.4f}, local steps "
            f"{summary['local_steps']}, {summary['exchanges']} exchanges, chief "
            f"{summary['chief_secs']:.0f} s, {summary['chief_recoveries']} chief recoveries"
        )
    starts = record["startup_secs"]
    if starts:
        lines.append(
            f"task start-ups (exec to first session): {len(starts)}, median "
            f"{statistics.median(starts):.1f} s, max {max(starts):.1f} s"
        )
    for check in record["checks"]:
        lines.append(f"{'ok  ' if check['ok'] else 'FAIL'} {check['name']}: {check['detail']}")
    lines.append(f"verdict: {'PASSED' if record['passed'] else 'FAILED'}")
    return "\n".join(lines)

"""The soak's checks of the whole job: its end, its work, and every fault's measures.

Pure functions of the chief's "summary" event, the faults as `measure.assess` saw them and
the tasks' exit codes; no TensorFlow, no processes. docs/RELIABILITY.md, "Chaos soak",
lists the checks in words.
"""

import dataclasses

from soak import measure
from soak import schedule as schedule_module


@dataclasses.dataclass(frozen=True)
class Check:
    """One check of the soak: its name, whether it passed, and the figures."""

    name: str
    ok: bool
    detail: str


def check_job(summary, assessed, config, exit_codes):
    """The soak's checks of the whole job.

    Args:
        summary: the chief's "summary" event, or None if it never came.
        assessed: `[(injection, assess(...) result)]`, one per injected fault.
        config: a dict with `faults` (how many were asked for), `workers`, `steps`,
            `communication_period` and `min_accuracy`.
        exit_codes: `{task name: exit code or None}` at the end.

    Returns:
        A list of `Check`s.
    """
    checks = []
    injected = len(assessed)
    checks.append(
        Check("faults injected", injected >= config["faults"], f"{injected} of {config['faults']}")
    )
    problems = [
        f"#{injection['fault']['index']}: {problem}"
        for injection, result in assessed
        for problem in result["problems"]
    ]
    checks.append(Check("every fault within its bound", not problems, "; ".join(problems)))
    if summary is None:
        checks.append(Check("job finished", False, "no summary from the chief"))
    else:
        accuracy = summary["test_accuracy"]
        checks.append(
            Check(
                "centre test accuracy",
                accuracy >= config["min_accuracy"],
                f"{accuracy:.4f} (>= {config['min_accuracy']})",
            )
        )
        expected = {str(i): config["steps"] for i in range(config["workers"])}
        complete = summary["local_steps"] == expected and not summary["unfinished_workers"]
        checks.append(
            Check(
                "work asked == work done",
                complete,
                f"local steps {summary['local_steps']}, unfinished {summary['unfinished_workers']}",
            )
        )
        # Each exchange in flight at a fault may count without its count, or its count
        # without it (0-2 per fault in tests/e2e/test_faults.py).
        asked = config["workers"] * config["steps"] // config["communication_period"]
        difference = summary["exchanges"] - asked
        checks.append(
            Check(
                "exchanges == asked",
                abs(difference) <= 2 * max(injected, 1),
                f"{summary['exchanges']} for {asked} asked ({difference:+d})",
            )
        )
    failed = {name: code for name, code in exit_codes.items() if code != 0}
    checks.append(
        Check(
            "every task exited 0",
            not failed,
            ", ".join(f"{n}: {c}" for n, c in failed.items()) or "yes",
        )
    )
    restarts = [
        (injection, result)
        for injection, result in assessed
        if injection["fault"].get("kind") == schedule_module.KILL_PS
    ]
    if restarts:
        checks.append(_ps_restarts_check(restarts))
    return checks


def _ps_restarts_check(restarts):
    """One check over every ps restart: its losses within one checkpoint interval, its
    centre equal to the checkpoint's, and every ps's centres trained on after it."""
    details = []
    for injection, result in restarts:
        fault = injection["fault"]
        moves = injection.get("moves") or {}
        trained = ", ".join(
            f"{measure.short_name(ps)} {move['moved']}/{move['variables']}"
            for ps, move in moves.items()
            if "moved" in move
        )
        details.append(
            f"#{fault['index']} {measure.short_name(fault['target'])}: lost {result['lost']}"
            + (f", centres changed after {trained}" if trained else "")
            + (f" ({len(result['problems'])} problem(s))" if result["problems"] else "")
        )
    ok = all(not result["problems"] for _, result in restarts)
    return Check("ps restarts: lost <= 1 interval, every ps trained on", ok, "; ".join(details))

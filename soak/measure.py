"""What each fault of a soak cost, and what went wrong with it, from the tasks' events.

Pure functions of the progress events the tasks print (`--progress_format=json`, in the
order the soak read them; every event has `task`, `event` and `time`, a `time.time()` of
the same machine) and of what the runner did when (an injection: `injected` and `ended`,
the times of the fault's start and end). No TensorFlow, no processes: the unit tests feed
them events made by hand. docs/RELIABILITY.md, "Chaos soak", gives the bounds in words;
`checks` turns these measures into the soak's verdict.
"""

import dataclasses
import math

from soak import schedule as schedule_module

#: `tf_contrib_easgd.trainer.stall.REJOIN_AFTER_SECS` (that module imports TensorFlow; a
#: test checks that the two agree): how long a step stalled on a cut may still wait once
#: the ps takes connections again, before the worker restarts itself.
REJOIN_AFTER_SECS = 5.0
#: The stall watch sees the link back within a poll (0.5 s) and a probe (<= 1 s).
REJOIN_NOTICE_SECS = 1.5


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The documented bound of each fault's cost, and the slack the soak allows beyond it.

    Attributes:
        startup_secs: a task's start-up, from exec to its first session (Python,
            TensorFlow's import, the graph, the session): the cost of a restart.
        slack_secs: how far beyond its bound a fault's cost may go before the soak calls
            a task stuck.
    """

    startup_secs: float = 40.0
    slack_secs: float = 60.0

    def of(self, kind, duration_secs):
        """The bound of a fault's cost, in seconds from its injection.

        - A kill and restart (a worker, the chief, the ps): the restarted task's start-up.
          The other workers go on (a worker or the chief), or open new sessions as soon as
          the ps takes connections and the chief has restored the centre (the ps).
        - A freeze: its length; the steps that need the frozen task wait, then go on.
        - A cut: its length, then `REJOIN_AFTER_SECS` and the watch's notice, after which
          a worker whose step still waits restarts itself: a start-up.
        """
        if kind in schedule_module.KILLS:
            return self.startup_secs
        if kind == schedule_module.FREEZE:
            return duration_secs
        return duration_secs + REJOIN_AFTER_SECS + REJOIN_NOTICE_SECS + self.startup_secs


def allowed_lost_exchanges(save_checkpoint_steps, communication_period, workers, skew=0.5):
    """How many exchanges a ps restart may lose: those of one checkpoint interval.

    The chief writes a checkpoint every `save_checkpoint_steps` of its local steps, that is
    every `save_checkpoint_steps / communication_period` of its exchanges; each other worker
    exchanges at its own speed meanwhile, which may be `skew` faster than the chief's (the
    chief also saves and evaluates). Each worker may have one exchange in flight, and one
    whose count the checkpoint missed: 2 more each.
    """
    per_worker = math.ceil(save_checkpoint_steps / communication_period)
    return math.ceil(per_worker * (1 + skew)) * workers + 2 * workers


def of(events, task, kinds):
    """The events of `task` whose kind is in `kinds` (a string or a tuple), in order."""
    kinds = (kinds,) if isinstance(kinds, str) else kinds
    return [e for e in events if e["task"] == task and e["event"] in kinds]


def first_after(events, task, kinds, after):
    """The first event of `task` of `kinds` later than `after`, or None."""
    return next((e for e in of(events, task, kinds) if e["time"] > after), None)


def last_before(events, task, kinds, before):
    """The last event of `task` of `kinds` earlier than `before`, or None."""
    found = [e for e in of(events, task, kinds) if e["time"] < before]
    return found[-1] if found else None


def asked_steps(events, task):
    """The local steps worker `task` was asked for, from its "progress" events, or None."""
    reports = [e["steps"] for e in of(events, task, "progress") if "steps" in e]
    return reports[-1] if reports else None


def is_finished(event, asked):
    """Whether a worker's `event` says it has done its `asked` steps and waits for the end:
    "done", or a "started" of a new session at its last step (a finished worker whose
    session a restored ps replaced resumes at its count, trains nothing, and reports no
    more "progress" or "done")."""
    if event["event"] == "done":
        return True
    return event["event"] == "started" and asked is not None and event.get("step", -1) >= asked


def finished_before(events, task, before):
    """Whether worker `task` had done its steps and was waiting for the end at `before`."""
    last = last_before(events, task, ("started", "progress", "done"), before)
    return last is not None and is_finished(last, asked_steps(events, task))


def recovery(events, workers, injected, ended):
    """When the job was back after a fault: every worker reported progress after the last
    (re)start of a worker's session.

    Walks the events in the order they were read. Every "started" event after `injected`
    (a restarted worker, a new session after a lost ps, a worker that rejoined) sets the
    anchor later, and only "progress" (or "done") events after the anchor count: so a
    worker whose steps hang once another one came back is not back.

    Args:
        events: the events so far.
        workers: the number of workers.
        injected: when the fault began.
        ended: when it ended (the restart, the SIGCONT, the link plugged back).

    Returns:
        `(time, {worker: time})`: the time every worker had reported a "progress" or
        "done" event later than the anchor (None while one has not), and each worker's.
        A worker whose last report says it is finished (`is_finished`) waits for the end
        of the job and reports nothing more: it counts as back.
    """
    names = schedule_module.worker_names(workers)
    asked = {name: asked_steps(events, name) for name in names}
    finished = {name for name in names if finished_before(events, name, injected)}
    anchor, back = ended, {}
    for event in events:
        name, kind = event["task"], event["event"]
        if event["time"] <= injected or name not in names:
            continue
        if is_finished(event, asked[name]):
            finished.add(name)
        elif kind in ("started", "progress"):
            finished.discard(name)
        if kind == "started" and event["time"] > anchor:
            anchor, back = event["time"], {}
        elif kind in ("progress", "done") and event["time"] > anchor:
            back.setdefault(name, event["time"])
        if all(name in back or name in finished for name in names):
            return max([anchor, *back.values()]), back
    if finished == set(names):
        return ended, back
    return None, back


def silence(events, workers, now):
    """How long each worker that is still training has reported nothing, at `now`.

    Returns:
        `{worker: seconds since its last "started" or "progress" event}`, for each worker
        that has reported and whose last such event does not say it is finished
        (`is_finished`: a finished worker waits for the end of the job silently).
    """
    quiet = {}
    for name in schedule_module.worker_names(workers):
        last = last_before(events, name, ("started", "progress", "done"), math.inf)
        if last is not None and not is_finished(last, asked_steps(events, name)):
            quiet[name] = now - last["time"]
    return quiet


def exchanges_before(events, before):
    """The most exchanges (`global_step`) any worker reported before `before` (0 if none).

    A lower bound of global_step at `before`: it misses the exchanges since the last report.
    """
    return max(
        (e["exchanges"] for e in events if e["event"] == "progress" and e["time"] < before),
        default=0,
    )


def assess(events, injection, workers, bounds, allowed_lost):
    """What one fault cost, and what went wrong.

    Args:
        events: every event of the job.
        injection: the runner's record of the fault: `fault` (a `schedule.Fault` dict),
            `injected`, `ended` and, for a ps restart, `digest` (`{"ok": bool, "detail":
            str}`, the restored centre against the checkpoint's), if known, and `moves`
            (`digest.moves_by_ps`: per ps, how many of its centres changed between the
            restored checkpoint and the next), if the runner compared them.
        workers: the number of workers.
        bounds: the `Bounds`.
        allowed_lost: the exchanges a ps restart may lose (`allowed_lost_exchanges`).

    Returns:
        A dict: `cost_secs` (from the injection until every worker reported progress
        again; None if one never did), `bound_secs`, `lost` (exchanges lost by a ps
        restart, else None), `notes` and `problems` (lists of strings).
    """
    fault = injection["fault"]
    kind, target = fault["kind"], fault["target"]
    injected, ended = injection["injected"], injection["ended"]
    recovered, _ = recovery(events, workers, injected, ended)
    bound = bounds.of(kind, fault["duration_secs"])
    result = {"cost_secs": None, "bound_secs": bound, "lost": None, "notes": [], "problems": []}
    notes, problems = result["notes"], result["problems"]
    if recovered is None:
        problems.append(f"not every worker reported progress again: stuck (bound {bound:.0f} s)")
        window_end = math.inf
    else:
        result["cost_secs"] = cost = recovered - injected
        window_end = recovered
        if cost > bound + bounds.slack_secs:
            problems.append(
                f"stuck: back after {cost:.1f} s, more than {bounds.slack_secs:g} s beyond "
                f"the bound ({bound:.1f} s)"
            )
    if kind in (schedule_module.KILL_WORKER, schedule_module.KILL_CHIEF):
        _resumed(events, target, injected, ended, notes, problems)
        if kind == schedule_module.KILL_CHIEF:
            started = first_after(events, target, "started", ended)
            if started is not None and started.get("restored_from"):
                problems.append(f"the restarted chief restored {started['restored_from']}")
    elif kind == schedule_module.KILL_PS:
        result["lost"] = _ps_restart(events, injection, workers, allowed_lost, notes, problems)
        if "moves" in injection:
            _trained_on(injection["moves"], target, notes, problems)
    elif kind == schedule_module.CUT:
        for name in schedule_module.worker_names(workers):
            rejoining = first_after(events, name, "rejoining", injected)
            if rejoining is not None and rejoining["time"] <= window_end:
                notes.append(f"{short_name(name)} rejoined")
                _resumed(events, name, injected, rejoining["time"], notes, problems)
    _window_notes(events, workers, injected, window_end, notes)
    return result


def _resumed(events, name, before, after, notes, problems):
    """Notes where a restarted worker resumed; a problem if below its last report."""
    started = first_after(events, name, "started", after)
    if started is None:
        return
    last = last_before(events, name, "progress", before)
    reported = last["step"] if last else 0
    notes.append(f"{short_name(name)} resumed at step {started['step']} (reported {reported})")
    if started["step"] < reported:
        problems.append(
            f"{name} resumed at step {started['step']}, below the {reported} it had reported: "
            "work whose exchanges reached the centre was lost"
        )


def _ps_restart(events, injection, workers, allowed_lost, notes, problems):
    """The checks of a ps restart; returns the exchanges lost, or None."""
    injected, ended = injection["injected"], injection["ended"]
    started = first_after(events, schedule_module.CHIEF, "started", ended)
    if started is None:
        problems.append("the chief never started a new session after the ps restart")
        return None
    if not started.get("restored_from"):
        problems.append("the chief's new session did not restore the centre from a checkpoint")
        return None
    before = exchanges_before(events, injected)
    lost = before - started["restored_global_step"]
    notes.append(
        f"restored {started['restored_from']} (global_step {started['restored_global_step']}"
        f" of >= {before})"
    )
    if lost > allowed_lost:
        problems.append(
            f"lost {lost} exchanges, more than one checkpoint interval's {allowed_lost}"
        )
    digest = injection.get("digest")
    if digest is None:
        problems.append("the restored centre was not compared with the checkpoint")
    elif digest["ok"]:
        notes.append("digest equal")
    else:
        problems.append(f"the restored centre differs from the checkpoint: {digest['detail']}")
    rewound = []
    for name in schedule_module.worker_names(workers):
        last = last_before(events, name, ("progress", "done"), injected)
        again = first_after(events, name, "started", ended)
        if last is not None and again is not None:
            rewound.append(
                f"{short_name(name)} {last.get('step', last.get('steps'))}->{again['step']}"
            )
    if rewound:
        notes.append("steps " + ", ".join(rewound))
    return lost


def _trained_on(moves, target, notes, problems):
    """Notes how each ps's centres changed after a restart of ps `target`; a problem if
    one did not change by the next checkpoint (it did not train on), or if unknown.

    A restart of either ps restores the whole centre, both ps's parts, from one checkpoint
    (with the counts on ps 0 that go with it): the other ps keeps running but its centres
    go back to that checkpoint too, then train on, which the next checkpoint shows.
    """
    if not moves or "error" in moves:
        why = moves["error"] if moves else "the chief named no ps of the centre (centre_ps)"
        problems.append(f"whether the centres trained on after the restore is unknown: {why}")
        return
    parts = []
    for ps, move in moves.items():
        other = "" if ps == target else " (not restarted)"
        parts.append(
            f"{short_name(ps)}{other} {move['moved']}/{move['variables']}, "
            f"max change {move['max_change']:.3g}"
        )
        if move["moved"] < move["variables"]:
            problems.append(
                f"{ps}'s centres did not train on after the restore: "
                f"{move['moved']} of {move['variables']} changed by the next checkpoint"
            )
    notes.append("centres changed by the next checkpoint: " + ", ".join(parts))


def _window_notes(events, workers, start, end, notes):
    """Notes the stalls, rejoins, recoveries and warnings reported between `start` and `end`."""
    inside = [e for e in events if start <= e["time"] <= end]
    for kind in ("stalled", "recovering"):
        names = sorted({short_name(e["task"]) for e in inside if e["event"] == kind})
        if names:
            notes.append(f"{kind} {','.join(names)}")
    for event in inside:
        if event["event"] == "warning":
            notes.append(f"warning from {short_name(event['task'])}: {event['message'][:80]}")
    del workers  # Every task's events count.


def short_name(name):
    """`"worker 1"` -> `"w1"`, `"ps 0"` -> `"ps0"`."""
    return name.replace("worker ", "w").replace(" ", "")


def startups(events):
    """The start-up (exec to first session) of each run of a task's process.

    A run's first "started" event: a fresh process's, or that of a worker that rejoined
    (re-executed itself), whose start-up counts from the re-execution. Later sessions of a
    run follow a recovery (`recoveries` > 0) and are not start-ups.
    """
    return [
        event["startup_secs"]
        for event in events
        if event["event"] == "started" and not event.get("recoveries")
    ]

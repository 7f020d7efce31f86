"""The time TensorFlow takes to read the tags of a failed step's message: its parser vs ours.

    python -m benchmarks.error_messages                  # tails of 2,500 to 20,000 chars
    python -m benchmarks.error_messages --tails=1000,4000 --rounds=5

Each message is a failed op's line with one `{{node ...}}` tag, then a tail without tags
(the part TensorFlow's `error_interpolation.parse_message` rescans from each position).
The two parsers alternate within each round, in forward order on even rounds and backward
on odd ones; the table gives the median seconds of each and their ratio. The parsers hold
the GIL throughout, so the time is also how long every other thread of the process waits.
See tf_contrib_easgd/trainer/error_messages.py and docs/RELIABILITY.md, "Chaos soak".
"""

import statistics
import time

from absl import app, flags

flags.DEFINE_list("tails", ["2500", "5000", "10000", "20000"], "Tail lengths, in characters.")
flags.DEFINE_integer("rounds", 3, "Rounds; each times both parsers on every tail once.")
FLAGS = flags.FLAGS

HEAD = "Connection reset by peer\n\t [[{{node ps_0/easgd/exchange/RecvTensor}}]]\n"
# A gRPC status text, as the runtime appends to an `UnavailableError`, repeated.
TAIL_TEXT = (
    "Additional GRPC error information from remote target /job:ps/replica:0/task:0: "
    ':{"created":"@1764800000.123456789","description":"Error received from peer '
    'ipv4:10.213.0.2:2222","file":"external/com_github_grpc_grpc/src/core/lib/surface/'
    'call.cc","file_line":1056,"grpc_message":"Socket closed","grpc_status":14}\n'
)


def message_with_tail(length):
    """A failed op's message: `HEAD`, then `length` characters of `TAIL_TEXT`, repeated."""
    repeats = length // len(TAIL_TEXT) + 1
    return HEAD + (TAIL_TEXT * repeats)[:length]


def time_parse(parse, message):
    """Seconds `parse(message)` takes."""
    start = time.perf_counter()
    parse(message)
    return time.perf_counter() - start


def main(argv):
    del argv
    tails = [int(tail) for tail in FLAGS.tails]
    # Imported here: `--help` answers without TensorFlow.
    from tensorflow.python.framework import error_interpolation  # noqa: PLC0415

    from tf_contrib_easgd.trainer import error_messages  # noqa: PLC0415

    parsers = {
        "tensorflow": error_interpolation.parse_message,
        "one pass": error_messages.parse_message,
    }
    assert parsers["tensorflow"] is not error_messages.parse_message
    times = {(name, tail): [] for name in parsers for tail in tails}
    for round_index in range(FLAGS.rounds):
        names = list(parsers) if round_index % 2 == 0 else list(reversed(parsers))
        for tail in tails:
            message = message_with_tail(tail)
            for name in names:
                times[name, tail].append(time_parse(parsers[name], message))
    print(f"Median seconds of {FLAGS.rounds} rounds:\n")
    print("| tail (chars) | TensorFlow's parser (s) | one pass (s) | ratio |")
    print("|---:|---:|---:|---:|")
    for tail in tails:
        theirs = statistics.median(times["tensorflow", tail])
        ours = statistics.median(times["one pass", tail])
        print(f"| {tail:,} | {theirs:.3f} | {ours:.6f} | {theirs / ours:,.0f} |")


if __name__ == "__main__":
    app.run(main)

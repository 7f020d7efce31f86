"""Line numbers carried from one version of a text to the next.

A helper of `tf_contrib_easgd.migrate.codemod`: each rewrite notes lines of the text it read;
`line_mapper` moves them to the matching lines of the final, migrated text.
"""

import difflib

# A changed block of more lines than this (old x new) maps by offset, not by likeness.
_MAX_ALIGNED_PAIRS = 4096


def line_mapper(old_code, new_code):
    """Returns a function mapping a line of `old_code` to the same place in `new_code`.

    An unchanged line maps to itself. A line of a changed block maps to the line of its
    replacement it is most like (the lines keep their order); a removed line maps to the
    line after it.
    """
    old, new = old_code.splitlines(), new_code.splitlines()
    blocks = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    aligned = {}  # Index of a changed block -> the new index of each of its old lines.

    def mapped(line):
        for index, (tag, i1, i2, j1, j2) in enumerate(blocks):
            if i1 <= line - 1 < i2:
                offset = line - 1 - i1
                if tag == "equal":
                    return j1 + offset + 1
                if tag == "delete":
                    return min(j1 + 1, max(len(new), 1))
                if index not in aligned:
                    aligned[index] = _align(old[i1:i2], new[j1:j2])
                return j1 + aligned[index][offset] + 1
        return max(len(new), 1)

    return mapped


def _align(old, new):
    """Maps each index of `old` to one of `new`, in order, so that mapped lines are most alike.

    Several old lines may map to the same new line. Beyond `_MAX_ALIGNED_PAIRS` pairs, the
    i-th line maps to the i-th (at most the last).
    """
    if len(old) * len(new) > _MAX_ALIGNED_PAIRS:
        return [min(i, len(new) - 1) for i in range(len(old))]
    like = [[difflib.SequenceMatcher(None, a, b).ratio() for b in new] for a in old]
    # best[i][j]: the highest total likeness of old[:i + 1] with old[i] mapped to new[j].
    best = [like[0][:]]
    for i in range(1, len(old)):
        row, running = [], -1.0
        for j in range(len(new)):
            running = max(running, best[i - 1][j])
            row.append(like[i][j] + running)
        best.append(row)
    choice = [0] * len(old)
    choice[-1] = max(range(len(new)), key=lambda j: best[-1][j])
    for i in range(len(old) - 2, -1, -1):
        choice[i] = max(range(choice[i + 1] + 1), key=lambda j: best[i][j])
    return choice

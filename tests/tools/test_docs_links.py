"""Every relative link of the repository's Markdown reaches a file, and its anchor a heading.

Links are `[text](target)` outside code; an anchor is a heading's GitHub slug (lower case,
punctuation but hyphens and underscores dropped, spaces as hyphens, `-1`, `-2` ... for
repeats). Web addresses are not followed.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".git", ".venv", ".venv-tf215", ".venv-tf115", "node_modules", ".pytest_cache"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _markdown_files():
    return sorted(
        path
        for path in ROOT.rglob("*.md")
        if not SKIPPED_DIRS & set(path.relative_to(ROOT).parts)
        and not path.relative_to(ROOT).parts[0].startswith("bazel-")
    )


def _prose_lines(path):
    """The lines of `path` outside fenced code blocks, with inline code blanked."""
    for number, line in _prose_lines_with_code(path):
        yield number, re.sub(r"`[^`]*`", "``", line)


def slug(heading):
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor of the headings of `path`."""
    seen = {}
    found = set()
    for _, line in _prose_lines_with_code(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def _prose_lines_with_code(path):
    """The lines outside fenced code blocks, inline code kept (headings keep it)."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def _links(path):
    for number, line in _prose_lines(path):
        for pattern in (LINK, IMAGE):
            for target in pattern.findall(line):
                if not re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                    yield number, target


CASES = [(path, number, target) for path in _markdown_files() for number, target in _links(path)]


@pytest.mark.parametrize(
    ("path", "number", "target"),
    CASES,
    ids=[f"{p.relative_to(ROOT)}:{n}:{t}" for p, n, t in CASES],
)
def test_a_relative_link_reaches_its_file_and_anchor(path, number, target):
    file_part, _, anchor = target.partition("#")
    where = f"{path.relative_to(ROOT)}:{number}"
    linked = (path.parent / file_part).resolve() if file_part else path
    assert linked.exists(), f"{where}: {target} links to a missing file"
    if anchor:
        assert linked.suffix == ".md", f"{where}: {target} has an anchor into a non-Markdown file"
        assert anchor in anchors(linked), (
            f"{where}: {target}: no heading of {linked.relative_to(ROOT)} has the anchor #{anchor}"
        )


def test_the_slugs_follow_github():
    assert slug("How an exchange reaches the parameter servers") == (
        "how-an-exchange-reaches-the-parameter-servers"
    )
    assert slug("`easgd-train --api=keras`") == "easgd-train---apikeras"
    assert slug("Step 2: the centre, 97 %") == "step-2-the-centre-97-"

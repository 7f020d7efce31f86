"""One libcst metadata analysis per version of a module, shared by every pass that reads it.

A helper of the rewrites of `tf_contrib_easgd.migrate`. A `MetadataWrapper` copies the module
it wraps and resolves scopes, qualified names and positions for that copy; a pass that
wrapped the module afresh paid for all of it again, though most passes change nothing.
libcst trees are immutable, so the metadata of one tree object never changes: `wrapper`
keeps the wrappers of the last few versions (by identity) and hands the same one to each
pass that reads that version; `transform` runs a transformer and, when its result is equal
to the tree it read, returns that tree, whose metadata is resolved already. `mentions` lets
a pass be skipped when its module's text lacks every name the pass acts on.
docs/DESIGN.md, "The migration tool", says why this gives the same output.
"""

import collections
import threading

from libcst.metadata import MetadataWrapper

# Versions kept: those of the module being migrated (one pass reads the version the
# previous one wrote); more would only hold memory.
_KEPT = 4


class _Version:
    """A module version: its trees (the one given, the wrapper's copy), wrapper and text."""

    def __init__(self, module):
        self.modules = (module,)  # Kept alive, so that their ids are not reused while cached.
        self.wrapper = None
        self.code = None


_versions = collections.OrderedDict()  # id(module) -> _Version
_lock = threading.Lock()


def _version(module):
    """The `_Version` of `module` (this very object), made when there is none."""
    version = _versions.get(id(module))
    if version is None or not any(tree is module for tree in version.modules):
        version = _Version(module)
        _remember(module, version)
    _versions.move_to_end(id(module))
    return version


def _remember(module, version):
    _versions[id(module)] = version
    while len(_versions) > 2 * _KEPT:  # Most versions are kept under two trees.
        _versions.popitem(last=False)


def wrapper(module, copy=True):
    """The `MetadataWrapper` of this version of `module`, made once.

    The wrapper's tree (`wrapper.module`, which visitors see) may be a copy of `module`, as
    with any `MetadataWrapper`: look nodes up in that tree, never in `module`.

    Args:
        module: a `libcst.Module`.
        copy: copy the module first (libcst's default: a tree built by a transformer may
            hold one node object in two places, which metadata keyed by node cannot tell
            apart). False for a tree straight from the parser, or one built only of such
            trees' nodes and freshly parsed ones, where the copy is wasted.

    Returns:
        The wrapper, with whatever metadata earlier passes resolved on it.
    """
    with _lock:
        version = _version(module)
        if version.wrapper is None:
            version.wrapper = MetadataWrapper(module, unsafe_skip_copy=not copy)
            copied = version.wrapper.module
            if copied is not module:
                version.modules += (copied,)
                _remember(copied, version)
        return version.wrapper


def code(module):
    """`module.code`, generated once per version."""
    with _lock:
        version = _version(module)
        if version.code is None:
            version.code = module.code
        return version.code


def mentions(module, words):
    """Whether the text of `module` contains one of `words` (substrings of names).

    A qualified name libcst gives is built of names written in the module (its imports,
    definitions and attribute chains; only `builtins.` and `<locals>` are added), so a pass
    that acts on `tensorflow.estimator.*` alone finds nothing in a module without
    `estimator`.
    """
    text = code(module)
    return any(word in text for word in words)


def transform(module, transformer):
    """Runs a metadata-dependent `transformer` on `module`.

    Returns:
        The transformed module; the very tree the transformer read when its result is equal
        to it (`deep_equals`), so that the next pass finds its metadata resolved.
    """
    wrapped = wrapper(module)
    result = wrapped.visit(transformer)
    if result.deep_equals(wrapped.module):
        return wrapped.module
    return result

# ruff: noqa: N802 -- libcst dispatches on the node class names: leave_Call.
"""Two `tf.image` calls that `tf_upgrade_v2` leaves failing in TF1 graph code, made TF1's again.

A helper of `tf_contrib_easgd.migrate.codemod`:

* `tf.image.draw_bounding_boxes(images, boxes)`: TF 2's takes a third, required `colors`
  argument (`TypeError: Missing required positional argument`), and its third positional
  argument was TF1's `name`. Without `colors` and with at most two positional arguments the
  call becomes `tf.compat.v1.image.draw_bounding_boxes(...)`, TF1's, whose `colors` is
  optional; with three, it is listed (the third is a name or colors).
* `tf.image.resize_images(x, size, method=0)` becomes `tf.image.resize(x, size, method=0)`,
  and TF 2's `resize` takes only strings (`ValueError: Resize method is not implemented:
  0`); TF1's integers 0 to 3 were bilinear, nearest neighbour, bicubic and area. Such a call
  becomes `tf.compat.v1.image.resize(...)`, TF1's op (its pixel centres too), which takes
  both the integers and the four names. A method that is not a literal gets the same
  rewrite in a module that builds TF1 graphs (TF1 code held only those four values), and a
  note elsewhere.
"""

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tf_contrib_easgd.migrate.contrib_names import Finding

_DRAW = "tensorflow.image.draw_bounding_boxes"
_RESIZE = "tensorflow.image.resize"
_TF2_METHODS = "tensorflow.image.ResizeMethod"  # Strings in TF 2, as tf_upgrade_v2 leaves them.
# What a module's text must contain for the rewriter to change or note anything.
TRIGGERS = ("draw_bounding_boxes", "resize")
DRAW_NOTE = (
    "`{call}` has three positional arguments: TF1's third was name=, TF 2's is colors= "
    "(required). Write tf.compat.v1.image.draw_bounding_boxes(images, boxes, name=NAME) "
    "(TF1's: colors optional) or pass colors= by name."
)
RESIZE_NOTE = (
    "`{call}`: TF 2's tf.image.resize takes the method as a string, and TF1's integer "
    "methods (0 bilinear, 1 nearest neighbour, 2 bicubic, 3 area) fail with ValueError: "
    "Resize method is not implemented. If this method can be an integer, call "
    "tf.compat.v1.image.resize, TF1's, which takes both."
)


class ImageRewriter(cst.CSTTransformer):
    """Makes TF1's `draw_bounding_boxes` and integer-method `resize` calls TF1's again.

    Attributes:
        findings: `Finding`s, with lines of the text visited.
    """

    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self, needs, graph_code):
        """Initializes the rewriter.

        Args:
            needs: the `tf1_apis.ImportNeeds` shared with the other rewrites.
            graph_code: whether the module builds TF1 graphs.
        """
        super().__init__()
        self._needs = needs
        self._graph_code = graph_code
        self.findings = []

    def notes(self):
        """The findings of the pass, after it ran."""
        return list(self.findings)

    def _note(self, node, text):
        line = self.get_metadata(PositionProvider, node).start.line
        call = cst.Module([]).code_for_node(node)
        call = call if len(call) <= 80 else call[:77] + "..."
        self.findings.append(Finding(line, text.format(call=call), unconverted=False))

    def leave_Call(self, original_node, updated_node):
        if any(arg.star for arg in updated_node.args):
            return updated_node
        found = {q.name for q in self.get_metadata(QualifiedNameProvider, original_node.func, ())}
        if _DRAW in found:
            return self._draw(original_node, updated_node)
        if _RESIZE in found:
            return self._resize(original_node, updated_node)
        return updated_node

    def _draw(self, original_node, updated_node):
        positional = [arg for arg in updated_node.args if arg.keyword is None]
        if any(arg.keyword and arg.keyword.value == "colors" for arg in updated_node.args):
            return updated_node  # TF 2's form.
        if len(positional) <= 2:
            return self._to_v1(updated_node, "draw_bounding_boxes")
        self._note(original_node, DRAW_NOTE)
        return updated_node

    def _resize(self, original_node, updated_node):
        # The original's arguments: the metadata (qualified names) is theirs.
        positional = [arg.value for arg in original_node.args if arg.keyword is None]
        keywords = {arg.keyword.value: arg.value for arg in original_node.args if arg.keyword}
        method = keywords.get("method", positional[2] if len(positional) > 2 else None)
        # TF1's fourth argument was align_corners, TF 2's preserve_aspect_ratio; TF1 had no
        # antialias: such calls are left as they are.
        unsure = "antialias" in keywords or len(positional) > 3
        if method is None or unsure or self._tf2_method(method):
            return updated_node
        if isinstance(method, cst.Integer) or self._graph_code:
            return self._to_v1(updated_node, "resize")
        self._note(original_node, RESIZE_NOTE)
        return updated_node

    def _tf2_method(self, node):
        """Whether `node` is a string or a `tf.image.ResizeMethod.X`: TF 2's own form."""
        if isinstance(node, cst.SimpleString | cst.ConcatenatedString | cst.FormattedString):
            return True
        found = {q.name for q in self.get_metadata(QualifiedNameProvider, node, ())}
        return any(name.startswith(_TF2_METHODS + ".") for name in found)

    def _to_v1(self, node, function):
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute):
            base = func.value.value  # The module's own spelling of `tensorflow`.
        else:
            base = cst.parse_expression(self._needs.tensorflow_name())
        for attr in ("compat", "v1", "image", function):
            base = cst.Attribute(value=base, attr=cst.Name(attr))
        return node.with_changes(func=base)

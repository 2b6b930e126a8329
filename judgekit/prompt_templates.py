"""User prompt templates: the user's own judge prompt as a harness variable.

A template is Jinja2 text rendered in a sandbox (:class:`jinja2.sandbox.ImmutableSandboxedEnvironment`)
with four fields: ``question``, ``context``, ``answer`` and ``criteria``. It writes the *user message*;
``{% set system %}…{% endset %}`` at the top level optionally replaces judgekit's persona paragraph of
the system message. Judgekit keeps what makes runs comparable and parseable: the call structure
(single / split / grouped), the criteria block and reply format that ``{{ criteria }}`` inserts, the
structured-output schema, the reply parser, and the shared-prefix layout — everything an example's calls
share comes first, byte-identical, the criterion-specific block last.

How the layout is guaranteed: the template is rendered once per example with a random placeholder for
``criteria`` and split there (:meth:`PromptTemplate.render`); the real block is put in afterwards. The
template never sees the criteria, so it cannot make the part before them differ between the calls of
one example.

Validation happens before any call (:func:`compile_template`): syntax, unknown fields (named, with
their line), ``{{ criteria }}`` missing, filtered, repeated or inside a conditional/loop, an example
field after the criteria block, no ``{{ answer }}``, loading other templates, and any attempt to reach
Python internals (attributes starting with ``_``; the sandbox refuses the rest at render time). A
failure is one :class:`~judgekit.userfiles.InputError` line naming the template, the line and the field.
Field values (answers are untrusted) are data: they are inserted verbatim and never interpreted.

The holistic call of a bundle (``judgekit run --level bundle``) takes a template of the same kind with
its own fields (:data:`BUNDLE`): ``bundle`` (who the bundle is), ``evidence`` (one line per answer) and
``dimensions``, where judgekit inserts the dimensions, the ⛔ K.O. marker and the reply format.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, NamedTuple

from judgekit.userfiles import InputError


class TemplateShape(NamedTuple):
    """What a template of one call level is given: its ``fields``; the ``block`` field judgekit fills with its
    own text and reply format (exactly once, as is); the ``shared`` fields, which every call of one unit
    (an example, a bundle) shares and so must come before the block; the fields it must show."""

    unit: str  # "an example" | "a bundle", for messages
    fields: tuple[str, ...]
    block: str
    shared: tuple[str, ...]
    required: tuple[str, ...]


ANSWER = TemplateShape("an example", ("question", "context", "answer", "criteria"), "criteria",
                       ("question", "context", "answer"), ("answer",))
BUNDLE = TemplateShape("a bundle", ("bundle", "evidence", "dimensions"), "dimensions", ("bundle", "evidence"),
                       ("bundle", "evidence"))
FIELDS: tuple[str, ...] = ANSWER.fields
EXAMPLE_FIELDS: tuple[str, ...] = ANSWER.shared
MAX_TEMPLATE_CHARS = 100_000
MAX_EXPRESSION_CHARS = 1_000_000  # bound on a string/list a template computes with * or **
BUILTIN = "builtin"  # the --prompt-template value for judgekit's own layout (overrides a rubric's template)

# A random placeholder per process: untrusted answer text cannot contain it by accident or design.
_MARK = secrets.token_hex(16)
_PLACEHOLDER = {f: f"\x00{f}:{_MARK}\x00" for f in (*ANSWER.fields, *BUNDLE.fields)}


@dataclass(frozen=True)
class Rendered:
    """One example's user message around the criteria block, and the template's persona (or None)."""

    system: str | None
    before: str  # everything up to the criteria block: the shared prefix of the example's calls
    after: str  # template text after the criteria block (the same for every call of the run)


@dataclass(frozen=True, eq=False)
class PromptTemplate:
    """A validated template. ``name`` is where it came from (a file, ``rubric NAME``); ``digest`` is a
    short sha256 of the source, which names the template in run labels and reports."""

    name: str
    source: str
    digest: str
    has_system: bool
    _template: Any
    shape: TemplateShape = ANSWER

    @property
    def label(self) -> str:
        return f"template {self.name} ({self.digest})"

    def render(self, question: str, context: str, answer: str) -> Rendered:
        """The example's text around the criteria block (values inserted verbatim)."""
        return self.render_fields(question=question, context=context, answer=answer)

    def render_fields(self, **values: str) -> Rendered:
        """The unit's text around the block (:attr:`TemplateShape.block`; ``values``: the other fields,
        inserted verbatim)."""
        block = _PLACEHOLDER[self.shape.block]
        module = self._template.make_module({**values, self.shape.block: block})
        body = str(module)
        before, sep, after = body.partition(block)
        if not sep or block in after:  # excluded by validation; kept as a guard
            raise InputError(self.name, f"the template must insert {{{{ {self.shape.block} }}}} exactly once")
        system = getattr(module, "system", None) if self.has_system else None
        return Rendered(None if system is None else str(system).strip(), before, after)


def _environment():
    from jinja2 import Undefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Sandbox(ImmutableSandboxedEnvironment):
        """The immutable sandbox, with ``*`` and ``**`` bounded so a template cannot exhaust memory."""

        intercepted_binops = frozenset(["*", "**"])

        def call_binop(self, context, operator, left, right):
            if operator == "**" and isinstance(right, int | float) and abs(right) > 64:
                raise self._unsafe(f"exponent {right} is too large")
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    sized = isinstance(seq, str | list | tuple) and isinstance(n, int)
                    if sized and len(seq) * n > MAX_EXPRESSION_CHARS:
                        raise self._unsafe(f"repeating a value {n} times is too large")
            return super().call_binop(context, operator, left, right)

        @staticmethod
        def _unsafe(message: str):
            from jinja2.sandbox import SecurityError

            return SecurityError(message)

    return Sandbox(undefined=Undefined, autoescape=False, keep_trailing_newline=True)


@functools.lru_cache(maxsize=1)
def _env():
    return _environment()


def _first_line(source: str, name: str) -> int | None:
    """The line of the first use of variable ``name`` in the template (for messages)."""
    for lineno, kind, value in _env().lex(source):
        if kind == "name" and value == name:
            return lineno
    return None


def compile_template(source: str, name: str = "<template>", shape: TemplateShape = ANSWER) -> PromptTemplate:
    """Validate ``source`` as a template of ``shape`` (:data:`ANSWER`, :data:`BUNDLE`) and compile it, or
    raise one :class:`InputError` line (nothing is called)."""
    from jinja2 import TemplateSyntaxError, meta, nodes
    from jinja2.sandbox import SecurityError

    if not isinstance(source, str) or not source.strip():
        raise InputError(name, "the prompt template is empty")
    if len(source) > MAX_TEMPLATE_CHARS:
        raise InputError(
            name, f"the prompt template has {len(source):,} characters; the limit is {MAX_TEMPLATE_CHARS:,}"
        )
    env = _env()
    try:
        ast = env.parse(source)
    except TemplateSyntaxError as e:
        raise InputError(name, f"template syntax error: {e.message}", line=e.lineno) from None

    for node in ast.find_all((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)):
        raise InputError(name, "a prompt template cannot load other templates (extends/include/import)",
                         line=node.lineno)
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        attr = node.attr if isinstance(node, nodes.Getattr) else getattr(node.arg, "value", None)
        if isinstance(attr, str) and attr.startswith("_"):
            raise InputError(name, f"unsafe: attribute {attr!r} is not allowed (templates run in a sandbox)",
                             line=node.lineno)
    for node in ast.find_all(nodes.Const):  # attr('__class__'), '{0.__class__}'.format(…), map(attribute=…)
        if isinstance(node.value, str) and "__" in node.value:
            raise InputError(name, f"unsafe: {node.value!r} names a Python internal (templates run in a sandbox)",
                             line=node.lineno)

    allowed = set(shape.fields) | set(env.globals)
    unknown = sorted(meta.find_undeclared_variables(ast) - allowed, key=lambda v: (_first_line(source, v) or 0, v))
    if unknown:
        raise InputError(name, f"unknown template field {unknown[0]!r} (fields: {', '.join(shape.fields)})",
                         line=_first_line(source, unknown[0]), field=unknown[0])

    block = shape.block
    uses = [n for n in ast.find_all(nodes.Name) if n.ctx == "load"]
    block_uses = [n for n in uses if n.name == block]
    if not block_uses:
        raise InputError(name, f"the template has no {block} block: put {{{{ {block} }}}} where judgekit should "
                         f"insert the {block} and the reply format", field=block)
    top_level = [n for n in ast.body if isinstance(n, nodes.Output)
                 for n in n.nodes if isinstance(n, nodes.Name) and n.name == block]
    if len(block_uses) != 1 or len(top_level) != 1:
        raise InputError(name, f"{{{{ {block} }}}} must appear exactly once, as is (no filter), outside "
                         "conditions, loops and blocks", line=block_uses[-1].lineno, field=block)
    for needed in shape.required:
        if not any(n.name == needed for n in uses):
            raise InputError(name, f"the template never shows the {needed}: add {{{{ {needed} }}}}", field=needed)
    has_system = any(isinstance(n, nodes.Assign | nodes.AssignBlock) and getattr(n.target, "name", None) == "system"
                     for n in ast.body)

    try:
        template = env.from_string(ast)
    except TemplateSyntaxError as e:  # pragma: no cover - parse() already caught these
        raise InputError(name, f"template syntax error: {e.message}", line=e.lineno) from None
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    compiled = PromptTemplate(name, source, digest, has_system, template, shape)
    _trial_render(compiled, name, source, SecurityError)
    return compiled


def _trial_render(t: PromptTemplate, name: str, source: str, security_error: type[Exception]) -> None:
    """Render with placeholders: surfaces sandbox refusals and checks the shared-prefix layout."""
    ph, shape = _PLACEHOLDER, t.shape
    block = shape.block
    try:
        module = t._template.make_module({f: ph[f] for f in shape.fields})
        body = str(module)
        system = str(getattr(module, "system", "")) if t.has_system else ""
    except security_error as e:
        raise InputError(name, f"unsafe: {e} (templates run in a sandbox)") from None
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - any other template error is the user's, shown as one line
        raise InputError(name, f"the template cannot be rendered: {e}") from None
    if ph[block] in system:
        raise InputError(name, f"{{{{ {block} }}}} belongs in the message, not in the system block", field=block)
    if body.count(ph[block]) != 1:
        raise InputError(name, f"{{{{ {block} }}}} must appear exactly once, as is (no filter)", field=block)
    cut = body.index(ph[block])
    for f in shape.shared:
        if ph[f] in body[cut:]:
            raise InputError(
                name,
                f"{{{{ {f} }}}} comes after {{{{ {block} }}}}: what {shape.unit}'s calls share "
                f"({', '.join(shape.shared)}) must come first so prefix caches reuse it — move {{{{ {block} }}}} "
                "to the end",
                line=_first_line(source, f), field=f,
            )


@functools.lru_cache(maxsize=32)
def cached(source: str, name: str, shape: TemplateShape = ANSWER) -> PromptTemplate:
    """:func:`compile_template` memoised by source (runs and batch files reuse one compiled template)."""
    return compile_template(source, name, shape)


def load_template_file(path: str, shape: TemplateShape = ANSWER) -> tuple[str, str]:
    """(source, name) of a template file, validated as ``shape``; one InputError line on any problem."""
    from pathlib import Path

    from judgekit.userfiles import read_text

    p = Path(path)
    source = read_text(p)
    compile_template(source, str(p), shape)
    return source, p.name

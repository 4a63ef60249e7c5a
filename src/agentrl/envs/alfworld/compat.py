"""TextWorld compatibility fix for CPython 3.13+ (PEP 667).

TextWorld 1.7.0 derives grammar expressions such as `{r.name}` in
`textworld.envs.pddl.textgen.EvalSymbol.derive` with::

    locals().update(context["variables"])
    value = eval(self.expression)

Up to CPython 3.12 `locals()` returns the frame's own dictionary, which `eval` then reads, so
the update is visible. From 3.13 on, `locals()` returns a fresh snapshot each call: the update
is lost and every observation fails with `NameError: name 'r' is not defined`.
`apply_textworld_compat()` replaces that method with one that passes the variables to `eval`
explicitly. The result is identical on every Python version, so the patch is applied
everywhere (3.11 - 3.14), and every code path that creates a TextWorld environment (the
group's worker processes, generation, the planner) calls it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["apply_textworld_compat", "derive_eval_symbol", "textworld_compat_applied"]

_MARK = "_agentrl_compat"


def derive_eval_symbol(symbol: Any, context: Mapping[str, Any] | None = None) -> list[Any]:
    """Evaluate an `EvalSymbol`'s expression with the context's variables as locals.

    Same result as TextWorld's own `derive` on CPython <= 3.12: the expression sees the
    context variables (`r`, `o`, ...), plus `self` and `context` as before.
    """
    from textworld.envs.pddl import textgen

    ctx = context or symbol.context
    scope: dict[str, Any] = {"self": symbol, "context": ctx}
    scope.update(ctx["variables"])
    value = eval(symbol.expression, vars(textgen), scope)
    return [textgen.TerminalSymbol(value)]


def textworld_compat_applied() -> bool:
    """True when `apply_textworld_compat` has patched TextWorld in this process."""
    from textworld.envs.pddl import textgen

    return bool(getattr(textgen.EvalSymbol.derive, _MARK, False))


def apply_textworld_compat() -> bool:
    """Patch TextWorld's grammar evaluation in this process (idempotent).

    Returns True when it patched now, False when it was already patched.
    """
    from textworld.envs.pddl import textgen

    if textworld_compat_applied():
        return False

    def derive(self: Any, context: Mapping[str, Any] | None = None) -> list[Any]:
        return derive_eval_symbol(self, context)

    setattr(derive, _MARK, True)
    textgen.EvalSymbol.derive = derive
    return True

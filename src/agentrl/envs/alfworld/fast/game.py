"""One ALFWorld game loaded once: its PDDL translation, facts, names and grammar.

Stock TextWorld translates the PDDL problem to SAS twice per load and twice per reset (once
more, optimized, for the planner) and loads a fresh 33 MB copy of fast-downward's library per
environment. A `FastGame` translates once (the planner's translation only when asked), keeps
one library whose state registry holds every branch's state (a state is an id), and computes
the initial observation, facts and admissible commands once for all branches and resets.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from agentrl._optional import require
from agentrl.envs.alfworld.fast.derive import Context, Deriver
from agentrl.envs.alfworld.fast.facts import FactState, SigKey, signature_key
from agentrl.envs.alfworld.fast.fd import GameLoadError, LibPool, read_game, translate
from agentrl.envs.alfworld.fast.grammar import ActionText, GrammarCache, GrammarError, Node
from agentrl.envs.alfworld.fast.records import key_of_sorted

__all__ = ["FastGame", "OpInfo", "Valid"]

_PURPOSE = "the ALFWorld engine"


@dataclass(slots=True)
class OpInfo:
    """What the text side needs about one grounded operator (keyed by its name)."""

    action: ActionText
    mapping: dict[Any, Any]
    variables: dict[str, Any]
    template: tuple[Node, ...]
    feedback: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Valid:
    """The applicable operators of a state, as TextWorld lists them."""

    commands: tuple[str, ...]
    """Command per operator, in fast-downward's order, one per operator name."""
    op_ids: tuple[int, ...]
    op_names: tuple[str, ...]
    effect_counts: tuple[int, ...]
    admissible: tuple[str, ...]
    """`sorted(set(commands))`."""
    won: bool


class FastGame:
    """A loaded game shared by all its branches (thread-safe)."""

    def __init__(self, gamefile: str, cache: GrammarCache, pool: LibPool) -> None:
        self.gamefile = gamefile
        data = read_game(gamefile)
        self._domain: str = data["pddl_domain"]
        self._problem: str = data["pddl_problem"]
        self.grammar = cache.document(data["grammar"])
        self._cache = cache
        self._fd = require("fast_downward", "alfworld", _PURPOSE)
        self._pddl = require("textworld.envs.pddl.logic", "alfworld", _PURPOSE)
        self._logic = require("textworld.logic", "alfworld", _PURPOSE)
        self.lock = threading.RLock()
        self._sas_replan: str | None = None
        self._replan_loaded = False

        try:
            task, sas = translate(self._domain, self._problem, optimize=False)
        except (Exception, SystemExit) as exc:  # the translator exits on a malformed problem
            raise GameLoadError(
                f"{gamefile}: fast-downward could not translate the PDDL domain and problem: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        try:
            self._load(task, sas, pool)
        except (GameLoadError, GrammarError):
            raise
        except Exception as exc:
            raise GameLoadError(
                f"{gamefile}: the game's PDDL problem, facts or grammar do not fit together "
                f"({type(exc).__name__}: {exc}); does it load with engine='textworld'?"
            ) from exc

    def _load(self, task: Any, sas: str, pool: LibPool) -> None:
        """Load the SAS task into a library and compute what every branch starts from."""
        self.lib: Any = pool.acquire()
        # The library goes back to the pool when the game is closed or garbage-collected.
        self._finalizer = weakref.finalize(self, pool.release, self.lib)
        self.lib.load_sas(sas.encode("utf-8"))
        self.initial_sid: int = int(self.lib.get_state_id())
        self._params = {
            action.name: [(p.name.strip("?"), p.type_name) for p in action.parameters]
            for action in task.actions
        }
        self.fluent = _fluent_predicates(task)
        self.name2type: dict[str, str] = {o.name: o.type_name for o in task.objects}
        self.types = self._type_hierarchy(task)
        self.initial_facts = self._initial_facts(task)
        self.entity_infos = self._entity_infos()
        self.name_map = {k: info.name for k, info in self.entity_infos.items()}
        self.deriver = Deriver(self.grammar, self._cache, self.entity_infos)
        self._ops: dict[str, OpInfo] = {}
        self._static_texts: list[str] | None = None
        self._plans: dict[str, tuple[bool, tuple[int, ...] | None]] = {}
        self._command_of: dict[str, str] = {}
        self._command_by_key: dict[tuple[str, ...] | str, str] = {}
        self._effects: dict[int, tuple[tuple[Any, SigKey, Any, SigKey], ...]] = {}
        empty = Context({}, {})
        self.intro = self.deriver.derive(self._cache.symbols("#intro#"), self.initial_facts, empty)
        self.initial_valid = self.valid(self.initial_sid, self.initial_facts)

    # -- fast-downward state ------------------------------------------------------------
    def valid(self, sid: int, facts: FactState) -> Valid:
        """Applicable operators of state `sid` and their commands (TextWorld's order)."""
        fd = self._fd
        with self.lock:
            lib = self.lib
            lib.set_state_id(sid)
            count = lib.get_applicable_operators_count()
            operators = (fd.Operator * count)()
            lib.get_applicable_operators(operators)
            won = bool(lib.check_goal())
        seen: set[str] = set()
        ids: list[int] = []
        names: list[str] = []
        counts: list[int] = []
        commands: list[str] = []
        for op in operators:
            name = op.name
            if name in seen:
                continue
            seen.add(name)
            ids.append(int(op.id))
            names.append(name)
            counts.append(int(op.nb_effect_atoms))
            commands.append(self.command(name, facts))
        admissible = tuple(sorted(set(commands)))
        return Valid(tuple(commands), tuple(ids), tuple(names), tuple(counts), admissible, won)

    def apply(self, sid: int, op_id: int, n_effects: int, facts: FactState) -> int:
        """Apply operator `op_id` to state `sid`, update `facts` as TextWorld does; new id."""
        effects = self._effects.get(op_id)
        with self.lock:
            lib = self.lib
            lib.set_state_id(sid)
            if effects is None:
                atoms = (self._pddl.Atom * n_effects)()
                lib.apply_operator(op_id, atoms)
                props = [atom.get_fact(self.name2type) for atom in atoms]
                effects = tuple(
                    (p, signature_key(p), n, signature_key(n)) for p in props for n in [p.negate()]
                )
                self._effects[op_id] = effects
            else:
                lib.apply_operator(op_id, None)
            new_sid = int(lib.get_state_id())
        for prop, key, negation, negation_key in effects:
            facts.remove_fact(negation, negation_key)
            facts.add_fact(prop, key)
        return new_sid

    def plan(self, sid: int) -> list[str]:
        """The planner's commands from state `sid` (TextWorld's `PddlState.replan`)."""
        if self._sas_replan is None:
            _, self._sas_replan = translate(self._domain, self._problem, optimize=True)
        with self.lock:
            lib = self.lib
            if not self._replan_loaded:
                lib.load_sas_replan(self._sas_replan.encode("utf-8"))
                self._replan_loaded = True
            lib.set_state_id(sid)
            if not lib.replan(False):
                return []
            operators = (self._fd.Operator * lib.get_last_plan_length())()
            lib.get_last_plan(operators)
            steps = [op.name for op in operators]
        commands = []
        for step in steps:
            parts = step.split()
            action = parts[0]
            values = {
                name: self.entity_infos[parts[i + 1]].name
                for i, (name, _) in enumerate(self._params[action])
            }
            template = self.grammar.actions[action].template
            if action == "gotolocation":
                template = "go to {r}"
            commands.append(template.format(**values))
        return commands

    def state_key(self, facts: FactState) -> str:
        """`facts_state_key` of `facts`, reusing the sorted texts of the facts no action changes."""
        if self._static_texts is None:
            initial = self.initial_facts
            texts = {
                t for k in initial.groups() if k[0] not in self.fluent for t in initial.texts(k)
            }
            self._static_texts = sorted(texts)
        dynamic = {t for k in facts.groups() if k[0] in self.fluent for t in facts.texts(k)}
        return key_of_sorted(sorted(self._static_texts + sorted(dynamic)))

    # -- text --------------------------------------------------------------------------
    def op_info(self, name: str) -> OpInfo:
        """Text-side facts of the operator `name` (cached)."""
        info = self._ops.get(name)
        if info is None:
            parts = name.split()
            action_name, arguments = parts[0], parts[1:]
            action, params = self._action(action_name, name)
            ph, var = self._logic.Placeholder, self._logic.Variable
            mapping = {
                ph(p, t): var(arg, t) for (p, t), arg in zip(params, arguments, strict=False)
            }
            variables = {p.name: self.entity_infos[v.name] for p, v in mapping.items()}
            template = self._cache.symbols(action.template)
            feedback = self._cache.symbols(action.feedback_rule)
            info = self._ops[name] = OpInfo(action, mapping, variables, template, feedback)
        return info

    def command(self, name: str, facts: FactState) -> str:
        """The command text of operator `name` in the state `facts`.

        A template that reads only facts no action changes gives the same text in every state:
        it is derived once per distinct value of the arguments it reads (`go to {r}` reads the
        receptacle and its location, not where the agent comes from) and remembered.
        """
        text = self._command_of.get(name)
        if text is not None:
            return text
        parts = name.split()
        static, relevant = self._template_plan(parts[0], name)
        if not static:
            return self._derive_command(self.op_info(name), facts)
        arguments = parts[1:]
        key = (parts[0], *(arguments[i] for i in relevant)) if relevant is not None else name
        text = self._command_by_key.get(key)
        if text is None:
            text = self._derive_command(self.op_info(name), self.initial_facts)
            self._command_by_key[key] = text
        self._command_of[name] = text
        return text

    def _action(self, action_name: str, op_name: str) -> tuple[ActionText, list[tuple[str, str]]]:
        try:
            return self.grammar.actions[action_name], self._params[action_name]
        except KeyError as exc:
            raise GameLoadError(
                f"{self.gamefile}: the grammar has no action for operator {op_name!r}"
            ) from exc

    def _template_plan(self, action_name: str, op_name: str) -> tuple[bool, tuple[int, ...] | None]:
        """(the template reads no fluent fact, the argument positions its text depends on)."""
        plan = self._plans.get(action_name)
        if plan is None:
            action, params = self._action(action_name, op_name)
            reads = self.grammar.reads(self._cache.symbols(action.template))
            static = not (reads.predicates & self.fluent)
            relevant: tuple[int, ...] | None = None
            # A query placeholder the arguments do not bind would be matched against every
            # variable not used by the arguments: then every argument matters.
            if reads.placeholders <= set(params):
                relevant = tuple(
                    i
                    for i, (p, t) in enumerate(params)
                    if p in reads.names or (p, t) in reads.placeholders
                )
            plan = self._plans[action_name] = (static, relevant)
        return plan

    def feedback(self, name: str, facts: FactState) -> str:
        """The feedback text after operator `name` was applied (facts: the new state)."""
        info = self.op_info(name)
        return self.deriver.derive(info.feedback, facts, Context(info.variables, info.mapping))

    def _derive_command(self, info: OpInfo, facts: FactState) -> str:
        text = self.deriver.derive(info.template, facts, Context(info.variables, info.mapping))
        return text.format(**self.name_map)

    # -- loading -----------------------------------------------------------------------
    def _type_hierarchy(self, task: Any) -> Any:
        types = self._logic.TypeHierarchy()
        for fd_type in task.types:
            with contextlib.suppress(ValueError):  # a type declared twice: keep the first
                types.add(self._logic.Type(fd_type.name, fd_type.supertype_names))
        return types

    def _initial_facts(self, task: Any) -> FactState:
        translate_mod = self._fd.translate
        prop_cls, var = self._logic.Proposition, self._logic.Variable
        n2t = self.name2type
        facts = FactState(self.types)
        for atom in task.init:
            if isinstance(atom, translate_mod.pddl.conditions.Atom):
                if atom.predicate == "=":
                    continue
                facts.add_fact(prop_cls(atom.predicate, [var(a, n2t[a]) for a in atom.args]))
            elif isinstance(atom, translate_mod.pddl.f_expression.Assign):
                if atom.fluent.symbol == "total-cost":
                    continue
                name = f"{atom.expression.value}"
                if str.isdigit(name):
                    continue
                facts.add_fact(prop_cls(name, [var(a, n2t[a]) for a in atom.fluent.args]))
        with self.lock:
            self.lib.set_state_id(self.initial_sid)
            atoms = (self._pddl.Atom * self.lib.get_state_size())()
            self.lib.get_state(atoms)
        for atom in atoms:
            fact = atom.get_fact(n2t)
            if not fact.is_negation:
                facts.add_fact(fact)
        facts.warm()
        return facts

    def _entity_infos(self) -> dict[str, Any]:
        entity_info = require("textworld.generator.game", "alfworld", _PURPOSE).EntityInfo
        demangler_cls = require("alfworld.agents.utils.misc", "alfworld", _PURPOSE).Demangler
        infos = {
            v.name: entity_info(v.name, v.type)
            for fact in self.initial_facts.facts
            for v in fact.arguments
        }
        for info in infos.values():
            info.name = info.id
            info.definite = "the"
            info.indefinite = "a"
        demangler = demangler_cls(game_infos=infos, shuffle=False)
        for info in infos.values():
            info.name = demangler.demangle_alfred_name(info.id)
        return infos

    def close(self) -> None:
        """Give the library back to the pool now; the game cannot be played afterwards."""
        with self.lock:
            self.lib = None
            self._finalizer()


def _fluent_predicates(task: Any) -> frozenset[str]:
    """Predicates an action may change, with their `not_` forms (TextWorld adds those)."""
    names: set[str] = set()
    for action in task.actions:
        for effect in action.effects:
            names.add(effect.literal.predicate)
    return frozenset(names | {"not_" + name for name in names})

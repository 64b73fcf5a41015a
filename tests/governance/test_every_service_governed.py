"""Every public service in memory, consent, dsar and inspection goes through the governance
pipeline (DESIGN invariant 8: every governed call leaves a decision).

Static: each module is parsed with `ast`; every public module-level function (no leading
underscore) must call `govern(...)` or `governance.effects.run_destructive(...)` (which
governs) — under any name it was imported as, or as `<module>.govern(...)` — or call a
function of the same module (public or private helper) that does, transitively, or call
a governed function it imported from another checked module (a job calling
`memory_forget`). A package is read module by module. A public function that neither
writes nor governs (a count, a pure helper, a read) is named in `EXEMPT` with the reason;
nothing else escapes. A services module that does not exist yet is skipped, so the test
picks each one up the day it lands.

Dynamic: for each module that exists, one real service is called and the decision it
left in the audit chain is asserted.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from governance.audit import Actor
from governance.errors import IrisError
from governance.models import AuditEvent, User
from tests.factories import as_member

SERVICE_MODULES = (
    "memory.services",
    "memory.continuity.services",
    "memory.recall.service",
    "memory.jobs",
    "consent.services",
    "dsar.services",
    "dsar.jobs",
    "dsar.export",
    "dsar.deletion",
    "dsar.access",
    "inspection.services",
    "inspection.jobs",
    "events.services",
    "events.delivery",
)


def _present(names):
    """The service modules that exist today: a module added later is checked from then on,
    and nothing is reported as skipped meanwhile."""
    import importlib.util

    return [n for n in names if importlib.util.find_spec(n) is not None]


PIPELINE_MODULES = {"governance.pipeline", "governance"}

# The public functions of the modules above that need not govern, each with why. A name
# here that has gone, or that governs after all, fails the test: the list stays true.
EXEMPT: dict[str, str] = {
    "memory.recall.service.ranker_name": "reads a setting",
    "memory.recall.service.ranker": "reads a setting and returns the ranker it names",
    "memory.recall.service.ranker_state": "reads which ranker is in use and why (model loaded?)",
    "memory.recall.service.destination_tier": "pure: the tier a request may narrow to",
    "memory.recall.service.consented_for": "reads the consent ledger for recall_resolve",
    "memory.recall.service.build_request": "builds recall_resolve's request; writes nothing",
    "memory.recall.service.body_class": "pure: the class of a text (cached per process)",
    "memory.recall.service.entry_class": "pure: the class of a candidate's texts",
    "memory.recall.service.recent_recalls": "reads one member's recall history",
    "memory.recall.service.warm_up": "loads the embedding model in the process; no row",
    "memory.recall.service.warm_start": "builds this process's recall snapshots; reads only",
    "memory.recall.service.warm_after_change": (
        "queues this worker's snapshot catch-up after the answer; reads only"
    ),
    "memory.recall.service.encode_ahead": (
        "pure: the vector of a body a governed write is about to store; writes nothing"
    ),
    "memory.recall.service.warm_worker": (
        "embeds a fixed query with no member's data once as a worker starts; reads and "
        "writes nothing"
    ),
    "memory.recall.service.rehearse": (
        "runs a recall's reads in this worker and discards the answer; its record is "
        "rolled back, so nothing is disclosed, kept or written"
    ),
    "memory.recall.service.latest_member": (
        "names the member a starting worker rehearses for (iris_site.warm); discloses "
        "nothing of them and writes nothing"
    ),
    "memory.recall.service.rehearse_latest": "rehearse for the latest member; as rehearse",
    "memory.recall.service.rehearse_again": "rehearse_latest on a new connection; as rehearse",
    "memory.recall.service.prepared_after": (
        "a count read off the database driver's settings; reads no data and writes nothing"
    ),
    "memory.recall.service.fresh_embeddings": (
        "builds the derived vector rows of revisions that a governed memory write is "
        "inserting, which that write stores; it writes and decides nothing of its own"
    ),
    "memory.jobs.retention_pending": "counts what retention has left to do",
    "memory.jobs.purge_pending": "counts what the purge has left to do",
    "memory.jobs.decay_pending": "counts what decay has left to do",
    "memory.jobs.expire_pending": "counts what expiry has left to do",
    "memory.jobs.extractive_summary": "pure: the text of a summary",
    "memory.jobs.handled": "pure: reads a finished run's counts",
    "dsar.export.signing_keys": "derives the export signing keys from the master key",
    "dsar.export.public_keys": "derives the public halves of the export signing keys",
    "dsar.export.published_keys": "formats the public signing keys for publication",
    "dsar.export.staging_dir": "names (and creates) the export staging folder",
    "dsar.access.access_report": (
        "reads the member's data for access_view and run_access, which govern; writes nothing"
    ),
    "dsar.access.report_fingerprint": "pure: the SHA-256 of a report's canonical JSON",
}


def load(name: str) -> ModuleType | None:
    """The module, or None if it (or its package's services module) does not exist yet.
    A module that exists but fails to import is an error, not a skip."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name in {name, name.rpartition(".")[0]}:
            return None
        raise


# -- static analysis -----------------------------------------------------------------------


def govern_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to `govern` itself, and names bound to the module that holds it."""
    functions: set[str] = {"govern"}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "governance.effects":
            for alias in node.names:
                if alias.name == "run_destructive":  # governs at PRE_DESTRUCTIVE itself
                    functions.add(alias.asname or alias.name)
        if isinstance(node, ast.ImportFrom) and node.module in PIPELINE_MODULES:
            for alias in node.names:
                if alias.name == "govern":
                    functions.add(alias.asname or alias.name)
                if alias.name == "pipeline":
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "governance.pipeline":
                    modules.add(alias.asname or "governance")
    return functions, modules


def _callee(call: ast.Call) -> tuple[str | None, str | None]:
    """(plain name, dotted owner.attr) of what a call calls."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id, None
    if isinstance(func, ast.Attribute):
        owner = func.value
        while isinstance(owner, ast.Attribute):
            owner = owner.value
        return None, f"{owner.id}.{func.attr}" if isinstance(owner, ast.Name) else func.attr
    return None, None


def imported_names(source: str) -> dict[str, tuple[str, str]]:
    """Local name -> (module, name) of everything imported by `from … import …`, at module
    level or inside a function."""
    return {
        alias.asname or alias.name: (node.module, alias.name)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module and not node.level
        for alias in node.names
    }


def governed_functions(
    source: str, imported_governed: frozenset[str] = frozenset()
) -> tuple[set[str], set[str]]:
    """(every module-level function, those that govern directly, through the module's own
    functions, or by calling one of `imported_governed`: local names of governed functions
    imported from another checked module)."""
    tree = ast.parse(source)
    aliases, modules = govern_aliases(tree)
    defs = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    direct: set[str] = set()
    calls: dict[str, set[str]] = {}
    for name, node in defs.items():
        called: set[str] = set()
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call):
                continue
            plain, dotted = _callee(sub)
            if plain in aliases or plain in imported_governed:
                direct.add(name)
            elif plain in defs:
                called.add(plain)
            if dotted and dotted.rpartition(".")[2] == "govern":
                owner = dotted.rpartition(".")[0]
                if owner in modules or owner.endswith("pipeline"):
                    direct.add(name)
        calls[name] = called
    governed = set(direct)
    changed = True
    while changed:  # through helpers, to a fixpoint
        changed = False
        for name, called in calls.items():
            if name not in governed and called & governed:
                governed.add(name)
                changed = True
    return set(defs), governed


def _owned(obj: object, module: ModuleType) -> bool:
    owner = getattr(obj, "__module__", "")
    return owner == module.__name__ or (
        hasattr(module, "__path__") and owner.startswith(module.__name__ + ".")
    )


def public_functions(module: ModuleType, defined: set[str]) -> list[str]:
    names = {
        name
        for name, obj in inspect.getmembers(module, inspect.isfunction)
        if _owned(obj, module) and not name.startswith("_")
    }
    # Decorated services (not plain functions any more) still count, by their definition.
    names |= {name for name in defined if not name.startswith("_")}
    return sorted(names)


# Imports from these packages are followed to the module that defines the function, so a
# service re-exported by a package (`memory.services` split into modules) still counts.
PROJECT_PACKAGES = frozenset({"governance", "consent", "memory", "dsar", "inspection"})


def _project_imports(source: str) -> list[tuple[str, str, str]]:
    """(local name, defining module, function name) of each project function imported."""
    found: list[tuple[str, str, str]] = []
    for local, (origin, name) in imported_names(source).items():
        if origin.partition(".")[0] not in PROJECT_PACKAGES:
            continue
        try:
            obj = getattr(importlib.import_module(origin), name, None)
        except ImportError:
            continue
        if inspect.isfunction(obj):
            obj = inspect.unwrap(obj)
            found.append((local, obj.__module__, obj.__name__))
    return found


@functools.cache
def module_analysis(module_name: str) -> tuple[set[str], set[str]]:
    """`governed_functions` of a module, counting the governed project functions it
    imports, each followed to the module that defines it. Solved over every module it
    reaches at once, to a fixpoint, so an import cycle gives the same answer in any order."""
    sources: dict[str, str] = {}
    imports: dict[str, list[tuple[str, str, str]]] = {}
    todo = [module_name]
    while todo:
        name = todo.pop()
        if name in sources:
            continue
        sources[name] = inspect.getsource(importlib.import_module(name))
        imports[name] = _project_imports(sources[name])
        todo.extend(defining for _, defining, _ in imports[name])
    result = {name: governed_functions(source) for name, source in sources.items()}
    changed = True
    while changed:
        changed = False
        for name, source in sources.items():
            through = frozenset(
                local for local, defining, func in imports[name] if func in result[defining][1]
            )
            again = governed_functions(source, through)
            if again[1] != result[name][1]:
                result[name] = again
                changed = True
    return result[module_name]


def analysis(module: ModuleType) -> tuple[set[str], set[str]]:
    """`module_analysis`; for a package (`memory.services`), over all of its modules."""
    if not hasattr(module, "__path__"):
        return module_analysis(module.__name__)
    defined: set[str] = set()
    governed: set[str] = set()
    for info in pkgutil.iter_modules(module.__path__):
        d, g = module_analysis(f"{module.__name__}.{info.name}")
        defined |= d
        governed |= g
    return defined, governed


@pytest.mark.parametrize("module_name", _present(SERVICE_MODULES))
def test_every_public_service_calls_govern(module_name: str) -> None:
    module = load(module_name)
    if module is None:
        pytest.skip(f"{module_name} does not exist yet")
    defined, governed = analysis(module)
    public = public_functions(module, defined)
    assert public, f"{module_name} has no public services"
    exempt = {n for n in public if f"{module_name}.{n}" in EXEMPT}
    ungoverned = [name for name in public if name not in governed and name not in exempt]
    assert not ungoverned, (
        f"{module_name}: public functions that never reach governance.pipeline.govern: "
        f"{', '.join(ungoverned)}. A service must be governed; a helper belongs in a rules "
        "module or behind a leading underscore; a public function that writes nothing is "
        "named in EXEMPT with the reason."
    )
    governed_yet_exempt = sorted(exempt & governed)
    assert not governed_yet_exempt, f"governed, so not exempt: {governed_yet_exempt}"


def test_every_exemption_names_a_public_function_and_says_why() -> None:
    for qualified, why in EXEMPT.items():
        module_name, _, name = qualified.rpartition(".")
        assert module_name in SERVICE_MODULES, qualified
        module = load(module_name)
        assert module is not None, qualified
        assert callable(getattr(module, name, None)), f"{qualified} is no longer there"
        assert not name.startswith("_"), f"{qualified} is private; it needs no exemption"
        assert len(why.split()) >= 2, f"{qualified}: say why it is exempt"


# The analysis itself, on small sources.


def test_the_analysis_follows_aliases_and_helpers() -> None:
    source = """
from governance.pipeline import govern as g
from governance import pipeline

def direct():
    g("pre_write", op)

def through_module():
    pipeline.govern("pre_write", op)

def _helper():
    g("pre_write", op)

def via_helper():
    return _helper()

def via_public():
    return direct()

def two_hops():
    return via_helper()

def ungoverned():
    return 1

def calls_a_method_named_govern():
    other.govern()

def calls_a_governed_import():
    memory_forget()
"""
    defined, governed = governed_functions(source)
    assert governed == {
        "direct",
        "through_module",
        "_helper",
        "via_helper",
        "via_public",
        "two_hops",
    }
    assert {"ungoverned", "calls_a_method_named_govern", "calls_a_governed_import"} <= (
        defined - governed
    )
    _, with_import = governed_functions(source, frozenset({"memory_forget"}))
    assert with_import - governed == {"calls_a_governed_import"}


def test_the_analysis_finds_imports_at_module_level_and_inside_functions() -> None:
    source = """
from memory.services import memory_forget as forget, memory_write

def f():
    from memory.services import memory_hard_delete
    from . import sibling
"""
    assert imported_names(source) == {
        "forget": ("memory.services", "memory_forget"),
        "memory_write": ("memory.services", "memory_write"),
        "memory_hard_delete": ("memory.services", "memory_hard_delete"),
    }


def test_a_job_counts_as_governed_through_the_service_it_calls() -> None:
    defined, governed = module_analysis("memory.jobs")
    assert {"decay_run", "purge_run", "expire_run", "consent_revocation_cascade"} <= governed
    assert "retention_pending" in defined - governed


def test_a_missing_module_is_skipped_but_a_broken_one_is_not() -> None:
    assert load("dsar.no_such_services") is None
    with pytest.raises(ModuleNotFoundError):
        load("no_such_package_anywhere.services.deeper")


# -- dynamic: a real service leaves a decision ---------------------------------------------------


def decisions_for(prefix: str) -> list[AuditEvent]:
    return [
        e
        for e in AuditEvent.objects.filter(action__startswith="iris.governance.decision.")
        if str(e.payload.get("operation", "")).startswith(prefix)
    ]


def _call(func: Callable[..., Any], **kwargs: Any) -> None:
    try:
        func(**kwargs)
    except IrisError:
        pass  # a refusal or a hold is a decision too


@pytest.mark.django_db
def test_consent_service_leaves_a_decision(member) -> None:
    module = load("consent.services")
    if module is None:
        pytest.skip("consent.services does not exist yet")
    _call(
        module.consent_record,
        principal=as_member(member),
        member=member,
        consent_type="data_processing",
        status="granted",
        legal_basis="consent",
        capture_method="settings-toggle",
    )
    events = decisions_for("consent.")
    assert events, "consent_record left no governance decision"
    assert events[0].payload["decisions"], "the decision names no check"


@pytest.mark.django_db
def test_memory_service_leaves_a_decision(member) -> None:
    module = load("memory.services")
    if module is None:
        pytest.skip("memory.services does not exist yet")
    draft = module.MemoryDraft(
        scope_kind="profile",
        scope_identifiers={"userId": str(member.public_id)},
        category="preference",
        body="My favourite colour is blue",
        origin="user-stated",
    )
    _call(module.memory_write, principal=as_member(member), member=member, draft=draft)
    events = decisions_for("memory.")
    assert events, "memory_write left no governance decision"
    assert any(d["check"] for e in events for d in e.payload["decisions"])


# For apps whose services appear later: call the first public service whose required
# arguments are all personas we have; any IrisError still counts (a refusal is a decision).
PROBE_MODULES = ("dsar.services", "inspection.services")


def _probe_arguments(member: User, make_operator) -> dict[str, Any]:
    operator = make_operator("legal")
    return {
        "principal": as_member(member),
        "member": member,
        "actor": Actor("member", str(member.public_id)),
        "operator": operator,
        "tenant": member.tenant,
        "user_id": member.public_id,
        "member_id": member.public_id,
        "request_id": uuid.uuid4(),
    }


# Defined only once such a module exists, so CI reports nothing as skipped meanwhile.
if _present(PROBE_MODULES):

    @pytest.mark.django_db
    @pytest.mark.parametrize("module_name", _present(PROBE_MODULES))
    def test_later_service_modules_leave_a_decision(module_name, member, make_operator) -> None:
        module = load(module_name)
        if module is None:
            pytest.skip(f"{module_name} does not exist yet")
        available = _probe_arguments(member, make_operator)
        defined, _ = governed_functions(inspect.getsource(module))
        tried = []
        for name in public_functions(module, defined):
            func = getattr(module, name, None)
            if not callable(func):
                continue
            try:
                signature = inspect.signature(func)
            except (TypeError, ValueError):
                continue
            required = [
                p.name
                for p in signature.parameters.values()
                if p.default is inspect.Parameter.empty
                and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            if not required or not set(required) <= set(available):
                continue
            tried.append(name)
            before = AuditEvent.objects.filter(
                action__startswith="iris.governance.decision."
            ).count()
            try:
                func(**{k: available[k] for k in required})
            except IrisError:
                pass
            after = AuditEvent.objects.filter(
                action__startswith="iris.governance.decision."
            ).count()
            assert after > before, f"{module_name}.{name} ran without leaving a governance decision"
            return
        pytest.skip(f"no service of {module_name} can be called with the test personas alone")

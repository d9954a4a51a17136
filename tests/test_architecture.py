"""Structural checks of the package, read from the source (``ast``), not
imported: module and function sizes, the Frontera adapter's size, import
cycles, the layering, and type hints on the public interface.

Imports are counted wherever they are in a module (inside functions too),
relative ones resolved, imports under ``if TYPE_CHECKING:`` too: a type
hint is a dependency as well (a lower layer that needs the shape of an
upper one's object names the fields it reads in a ``Protocol``). An import of a package's
``__init__`` counts as an import of that package, not of its submodules.

Conventions checked here:

- A function over :data:`MAX_FUNCTION_LINES` lines (from its ``def`` line
  to its last line, its docstring not counted) carries the reason in a
  comment ``# long: <reason>`` on its ``def`` line or on a line between
  the ``def`` line and the first statement of its body.
- Public = no leading underscore in the name (nor in an enclosing class);
  functions nested in functions are not public; dunder methods other than
  ``__init__`` are skipped. Every parameter but a method's ``self`` /
  ``cls`` is annotated, and the return too (``-> None`` included).
"""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "frontera_linkrank"
SOURCE = ROOT / PACKAGE

MAX_MODULE_LINES = 500
MAX_ADAPTER_LINES = 300
MAX_FUNCTION_LINES = 60
ADAPTER_CLASS = "LinkRankBackend"
LONG_REASON = re.compile(r"#\s*long:\s*\S")

# The layers (docs/architecture.md): a part of the package imports only
# parts of the same or a lower rank. Keys are the top-level modules and
# subpackages of the package, the package's own __init__ is PACKAGE.
LAYERS = {
    "numeric": 0,  # small numpy helpers, no package imports
    "data": 0,  # the data sets shipped with the package
    "storage": 1,
    "scoring": 2,
    "scheduling": 3,
    "recrawl": 4,
    "settings": 4.5,  # the settings table takes its choices from layers 2-4
    "default_settings": 4.5,
    "core": 5,
    "backend": 6,
    "scrapy": 6,
    "service": 6,  # the frontier as a service over a broker (the Scrapy scheduler's remote mode uses it)
    "cli": 7,
    "simulation": 7,
    "testweb": 7,
    PACKAGE: 8,  # the package's public names (lazy imports of the adapters)
}
# Storage is below everything: it takes plain parameters from its caller.
STORAGE_MUST_NOT_IMPORT = [
    "scoring", "scheduling", "recrawl", "core", "backend", "scrapy", "cli", "simulation", "settings",
    "default_settings",
]  # fmt: skip
# The frontier core and everything under it know nothing of these.
FRAMEWORKS = {"frontera", "scrapy", "twisted"}


# -- reading the source ----------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def modules() -> dict[str, tuple[Path, str, ast.Module]]:
    """Every module of the package: name -> (path, text, tree)."""
    out = {}
    for path in sorted(SOURCE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        out[_module_name(path)] = (path, text, ast.parse(text, str(path)))
    return out


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _import_nodes(tree: ast.AST):
    """Import statements of ``tree`` at any depth, those under
    ``if TYPE_CHECKING:`` included."""
    for node in ast.iter_child_nodes(tree):
        yield from _import_nodes_of(node)


def _import_nodes_of(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _import_nodes(node)


def _known(name: str) -> str | None:
    """The package module ``name`` is or lies in (longest known prefix)."""
    mods = modules()
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


@functools.cache
def imports() -> dict[str, dict[str, int]]:
    """module -> {imported package module: line of the first such import}."""
    mods = modules()
    out = {}
    for name, (path, _, tree) in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: dict[str, int] = {}
        for node in _import_nodes(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # "from pkg import mod" imports the module pkg.mod.
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in node.names]
            for t in targets:
                k = _known(t) if t.split(".")[0] == PACKAGE else None
                if k is not None and k != name:
                    found.setdefault(k, node.lineno)
        out[name] = found
    return out


def _third_party(tree: ast.Module) -> dict[str, int]:
    """Top-level names of the absolute imports: name -> first line."""
    found: dict[str, int] = {}
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for n in names:
            found.setdefault(n.split(".")[0], node.lineno)
    return found


def part(module: str) -> str:
    """The top-level module or subpackage a module belongs to (its layer key)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``a -> ... -> a``) per strongly connected component with
    more than one node (Tarjan, then a shortest cycle by BFS)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in comps:
        start = min(comp)
        prev: dict[str, str | None] = {start: None}
        queue, end = [start], None
        for v in queue:  # breadth first: the queue grows while read
            if start in graph[v]:
                end = v
                break
            for w in sorted(graph[v] & comp):
                if w not in prev:
                    prev[w] = v
                    queue.append(w)
        path = []
        while end is not None:
            path.append(end)
            end = prev[end]
        out.append(path[::-1] + [start])
    return out


def _functions(tree: ast.Module):
    """``(node, qualified name, public)`` for every function of the module;
    public as defined in the module docstring."""

    def walk(node: ast.AST, prefix: str, public: bool, in_class: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = child.name
                dunder = name.startswith("__") and name.endswith("__")
                pub = public and (name == "__init__" or (not dunder and not name.startswith("_")))
                yield child, prefix + name, pub, in_class
                yield from walk(child, f"{prefix}{name}.", False, False)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.", public and not child.name.startswith("_"), True)
            else:
                yield from walk(child, prefix, public, in_class)

    yield from walk(tree, "", True, False)


def _report(title: str, lines: list[str]) -> str:
    return f"{title} ({len(lines)}):\n  " + "\n  ".join(lines)


# -- the checks ------------------------------------------------------------


def test_modules_are_at_most_500_lines() -> None:
    over = [
        f"{_rel(path)}: {n} lines"
        for path, text, _ in modules().values()
        if (n := len(text.splitlines())) > MAX_MODULE_LINES
    ]
    assert not over, _report(f"modules over {MAX_MODULE_LINES} lines", over)


def test_the_frontera_adapter_is_thin() -> None:
    where = [
        (path, text)
        for path, text, tree in modules().values()
        if any(isinstance(n, ast.ClassDef) and n.name == ADAPTER_CLASS for n in tree.body)
    ]
    assert len(where) == 1, f"{ADAPTER_CLASS} defined in {[_rel(p) for p, _ in where]}, expected one module"
    path, text = where[0]
    n = len(text.splitlines())
    assert n <= MAX_ADAPTER_LINES, f"{_rel(path)} (the Frontera adapter) is {n} lines, at most {MAX_ADAPTER_LINES}"


def test_no_import_cycle_between_modules() -> None:
    graph = {m: set(t) for m, t in imports().items()}
    cycles = [" -> ".join(c) for c in _cycles(graph)]
    assert not cycles, _report("import cycles between modules", cycles)


def test_no_import_cycle_between_subpackages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    why: dict[tuple[str, str], str] = {}
    for m, targets in imports().items():
        graph.setdefault(part(m), set())
        for t, line in targets.items():
            if part(t) != part(m):
                graph[part(m)].add(part(t))
                why.setdefault((part(m), part(t)), f"{m}:{line} imports {t}")
    cycles = []
    for c in _cycles(dict(graph)):
        steps = [why[a, b] for a, b in zip(c, c[1:])]
        cycles.append(" -> ".join(c) + "\n      " + "\n      ".join(steps))
    assert not cycles, _report("import cycles between subpackages", cycles)


def test_storage_imports_nothing_above_it() -> None:
    bad = [
        f"{m}:{line} imports {t}"
        for m, targets in imports().items()
        if part(m) == "storage"
        for t, line in targets.items()
        if part(t) in STORAGE_MUST_NOT_IMPORT
    ]
    assert not bad, _report("storage imports from layers above it", bad)


def test_every_part_of_the_package_has_a_layer() -> None:
    unknown = sorted({part(m) for m in modules()} - set(LAYERS))
    assert not unknown, f"parts of the package missing from LAYERS in {__file__}: {unknown}"


def test_imports_only_go_down_the_layers() -> None:
    bad = []
    for m, targets in imports().items():
        for t, line in targets.items():
            a, b = LAYERS.get(part(m)), LAYERS.get(part(t))
            if a is not None and b is not None and b > a:
                bad.append(f"{m}:{line} imports {t} ({part(m)}: layer {a}, {part(t)}: layer {b})")
    assert not bad, _report("imports going up the layers", bad)


def test_the_core_knows_nothing_of_frontera_or_scrapy() -> None:
    bad = []
    for m, (path, _, tree) in modules().items():
        if LAYERS.get(part(m), 99) <= LAYERS["core"]:
            for name, line in _third_party(tree).items():
                if name in FRAMEWORKS:
                    bad.append(f"{_rel(path)}:{line} imports {name}")
    assert not bad, _report("the core and the layers under it import a crawl framework", bad)


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    n = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        n -= first.end_lineno - first.lineno + 1
    return n


def test_long_functions_say_why() -> None:
    bad = []
    for path, text, tree in modules().values():
        lines = text.splitlines()
        for node, name, _, _ in _functions(tree):
            n = _code_lines(node)
            if n <= MAX_FUNCTION_LINES:
                continue
            header = lines[node.lineno - 1 : max(node.body[0].lineno - 1, node.lineno)]
            if not any(LONG_REASON.search(line) for line in header):
                bad.append(f"{_rel(path)}:{node.lineno} {name}: {n} lines")
    assert not bad, _report(
        f"functions over {MAX_FUNCTION_LINES} lines (docstring not counted) without a '# long: <reason>' comment "
        "on the def line or before the first statement",
        bad,
    )


def _missing_hints(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    a = node.args
    params = a.posonlyargs + a.args
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    if method and not static and params:
        params = params[1:]  # self / cls
    params = params + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p is not None]
    missing = [p.arg for p in params if p.annotation is None]
    if node.returns is None:
        missing.append("return")
    return missing


def test_public_interface_has_type_hints() -> None:
    per_module: dict[str, list[str]] = {}
    for path, _, tree in modules().values():
        if any(p.startswith("_") and p != "__init__.py" for p in path.relative_to(SOURCE).parts):
            continue
        for node, name, public, method in _functions(tree):
            if public and (missing := _missing_hints(node, method)):
                per_module.setdefault(_rel(path), []).append(f"{node.lineno} {name}: {', '.join(missing)}")
    total = sum(len(v) for v in per_module.values())
    counts = [f"{m}: {len(v)}" for m, v in sorted(per_module.items(), key=lambda kv: -len(kv[1]))]
    details = [f"{m}:{item}" for m, v in sorted(per_module.items()) for item in v]
    assert not total, (
        f"{total} public functions/methods without full type hints\n"
        + _report("per module", counts)
        + "\n"
        + _report("unannotated (parameters, return)", details)
    )

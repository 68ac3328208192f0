"""Imports go one way: tools → planes → contract.

``onceover`` is the contract both planes import; ``onceover_jobs`` (the data plane) and
``onceover_backend`` (the control plane) never import each other or the tools
(``onceover_tools``); the contract imports none of them. Read from the source, every
import statement, lazy ones inside functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from onceover.modes import MODES

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "onceover": ROOT / "onceover",
    "onceover_jobs": ROOT / "jobs" / "onceover_jobs",
    "onceover_backend": ROOT / "backend" / "onceover_backend",
    "onceover_tools": ROOT / "tools" / "onceover_tools",
    "pyspark_onceover": ROOT / "pyspark_onceover",
}
MAY_IMPORT = {
    "onceover": {"onceover"},
    "onceover_jobs": {"onceover", "onceover_jobs"},
    "onceover_backend": {"onceover", "onceover_backend"},
    "pyspark_onceover": {"onceover", "onceover_jobs"},
    "onceover_tools": set(PACKAGES),
}


def imported_packages(path: Path) -> set[tuple[int, str]]:
    """(line, top-level name) of every absolute import in ``path`` of one of ours."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {(node.lineno, n.split(".")[0]) for n in names if n.split(".")[0] in PACKAGES}
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_package_imports_only_what_stands_below_it(package: str) -> None:
    crossing = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted(PACKAGES[package].rglob("*.py"))
        for line, name in sorted(imported_packages(path))
        if name not in MAY_IMPORT[package]
    ]
    assert not crossing, "\n".join(crossing)


def test_the_rule_sees_a_crossing(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from onceover_tools.cli import main\n")
    assert imported_packages(planted) == {(2, "onceover_tools")}


# -- inside the sink: layers, each importing only what stands below it ---------------------

SINK = PACKAGES["onceover_jobs"] / "sink"
SINK_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    # top to bottom; a layer is a folder of the sink, or some of its top-level modules
    ("entry points", frozenset({"__init__", "datasource", "claim", "settle"})),
    ("protocol", frozenset({"protocol/"})),
    ("modes", frozenset({"modes/"})),
    ("reporting", frozenset({"reporting/"})),
    ("job", frozenset({"job/"})),
    ("ledger", frozenset({"ledger/"})),
    ("table", frozenset({"table/"})),
    ("rows", frozenset({"rows/"})),
    ("wire", frozenset({"wire/"})),
    ("base", frozenset({"errors", "failpoints", "driver"})),
)
OUTBOX = "onceover_jobs.outbox"
"""The durable event outbox beside the sink: the sink may use it; it knows nothing of the sink."""
PREFLIGHT = "onceover_jobs.preflight"
"""The checks before a job (``onceover check``): built on the sink's layers below its entry
points, and called by one entry point, the driver's ``prepare_job`` (``check=true``)."""
PREFLIGHT_CALLERS = frozenset({"onceover_jobs.sink.datasource"})


def module_name(path: Path, package_root: Path, package: str) -> str:
    parts = list(path.relative_to(package_root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def sink_modules() -> dict[str, Path]:
    """Every module of the sink by its dotted name (a package by its own name)."""
    return {
        module_name(path, SINK, "onceover_jobs.sink"): path for path in sorted(SINK.rglob("*.py"))
    }


def layer_of(module: str) -> int:
    """The index in :data:`SINK_LAYERS` of a sink module (``onceover_jobs.sink.x.y``)."""
    parts = module.removeprefix("onceover_jobs.sink").lstrip(".").split(".")
    top = parts[0] or "__init__"
    member = f"{top}/" if len(parts) > 1 or (SINK / top).is_dir() else top
    for index, (_, members) in enumerate(SINK_LAYERS):
        if member in members:
            return index
    raise AssertionError(f"{module} is in no layer of SINK_LAYERS: give it one")


def imported_modules(path: Path, known: set[str]) -> set[tuple[int, str]]:
    """(line, module) of every import in ``path`` of a module in ``known``: ``from a.b
    import c`` names ``a.b.c`` where that is a module, else ``a.b``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found |= {(node.lineno, alias.name)} if alias.name in known else set()
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if dotted in known:
                    found.add((node.lineno, dotted))
                elif node.module in known:
                    found.add((node.lineno, node.module))
    return found


def sink_imports() -> dict[str, set[tuple[int, str]]]:
    modules = sink_modules()
    known = set(modules)
    return {name: imported_modules(path, known) for name, path in modules.items()}


def test_every_sink_module_stands_in_a_layer() -> None:
    for module in sink_modules():
        layer_of(module)


def test_the_sink_imports_only_downward() -> None:
    """Lazy imports and those made only for type-checking count too."""
    upward = [
        f"{sink_modules()[module].relative_to(ROOT)}:{line} imports {target} "
        f"({SINK_LAYERS[layer_of(module)][0]} -> {SINK_LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(sink_imports().items())
        for line, target in sorted(targets)
        if layer_of(target) < layer_of(module)
    ]
    assert not upward, "\n".join(upward)


def test_the_sinks_modules_import_each_other_in_no_circle() -> None:
    graph = {m: {t for _, t in targets if t != m} for m, targets in sink_imports().items()}
    circles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not circles, "\n".join(circles)


def test_the_sink_and_the_outbox_stand_apart_from_the_jobs_that_use_them() -> None:
    """The sink imports, of the data plane, only itself and the outbox; the outbox
    imports nothing of the data plane but itself."""
    jobs = PACKAGES["onceover_jobs"]
    crossing = []
    for path in sorted(jobs.rglob("*.py")):
        name = module_name(path, jobs, "onceover_jobs")
        own = OUTBOX if name.startswith(OUTBOX) else "onceover_jobs.sink"
        if not name.startswith(("onceover_jobs.sink", OUTBOX)):
            continue
        allowed = (own,) if own == OUTBOX else (own, OUTBOX)
        if name in PREFLIGHT_CALLERS:
            allowed = (*allowed, PREFLIGHT)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            crossing += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
                for n in names
                if n.startswith("onceover_jobs") and not n.startswith(allowed)
            ]
    assert not crossing, "\n".join(crossing)


def test_the_preflight_checks_stand_below_the_sinks_entry_points() -> None:
    """``onceover_jobs.preflight`` uses the sink's layers, never its entry points, so the
    driver that calls it is in no circle with it."""
    entry_points = {f"onceover_jobs.sink.{m}" for m in SINK_LAYERS[0][1]} | {"onceover_jobs.sink"}
    package = PACKAGES["onceover_jobs"] / "preflight"
    crossing = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for path in sorted(package.rglob("*.py"))
        for line, target in imported_modules(path, entry_points)
    ]
    assert package.is_dir()
    assert not crossing, "\n".join(crossing)


def test_the_sinks_reading_order_names_every_protocol_and_mode_module() -> None:
    """``onceover_jobs/sink/__init__.py`` is where a reader starts: it names every file of
    the protocol and of the modes, and the write identity."""
    reading = ast.get_docstring(ast.parse((SINK / "__init__.py").read_text())) or ""
    wanted = [
        name
        for name in sink_modules()
        if name.startswith(("onceover_jobs.sink.protocol.", "onceover_jobs.sink.modes."))
    ] + ["onceover_jobs.sink.ledger.identity", "onceover_jobs.sink.datasource"]
    missing = [name for name in wanted if name not in reading]
    assert not missing, f"the sink's reading order leaves out {missing}"


def test_the_layer_rule_sees_an_upward_import() -> None:
    assert layer_of("onceover_jobs.sink.wire.appender") > layer_of(
        "onceover_jobs.sink.modes.pending"
    )
    assert layer_of("onceover_jobs.sink.errors") == len(SINK_LAYERS) - 1
    assert layer_of("onceover_jobs.sink.datasource") == 0


# -- a write mode's behaviour has one home ---------------------------------------------------

MODE_HOMES = (ROOT / "onceover" / "modes.py", SINK / "modes")
"""Where a mode's name may decide something: its traits, and its class in the sink."""
MODE_NAMES = frozenset(MODES)


def _mode_constants(node: ast.AST) -> set[str]:
    """The mode names a constant, or a tuple, list or set of constants, spells."""
    if isinstance(node, ast.Constant) and node.value in MODE_NAMES:
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_mode_constants(e) for e in node.elts)) if node.elts else set()
    return set()


def _names_a_mode(node: ast.AST) -> bool:
    """``mode``, ``x.mode``, ``record.mode``, ``kind_of_mode``...: an operand that holds a mode."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return "mode" in name.lower()


def mode_decisions(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, what) of each place ``source`` decides by a mode's name: a comparison of a
    mode-holding operand with a mode name (or any comparison with ``"buffered"``, a word
    that means nothing else here), a ``match`` on one, or a dict keyed by two mode names
    or more (a table of modes)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            spelled = set().union(*(_mode_constants(o) for o in operands))
            if spelled and (any(_names_a_mode(o) for o in operands) or "buffered" in spelled):
                found.append((node.lineno, f"compares a mode with {sorted(spelled)}"))
        elif isinstance(node, ast.Match) and _names_a_mode(node.subject):
            found.append((node.lineno, "matches on a mode"))
        elif isinstance(node, ast.Dict):
            keys = {str(k.value) for k in node.keys if isinstance(k, ast.Constant)} & MODE_NAMES
            if len(keys) >= 2:
                found.append((node.lineno, f"a table keyed by modes {sorted(keys)}"))
    return found


def test_a_mode_is_decided_only_in_its_traits_and_its_class() -> None:
    """Everyone else asks the mode (``onceover.modes.traits_of``, the sink's
    ``onceover_jobs.sink.modes.mode_of``) and never compares its name."""
    outside = [
        f"{path.relative_to(ROOT)}:{line} {what}"
        for root in PACKAGES.values()
        for path in sorted(root.rglob("*.py"))
        if not any(path == home or home in path.parents for home in MODE_HOMES)
        for line, what in mode_decisions(path.read_text(), str(path))
    ]
    assert not outside, "\n".join(outside)


@pytest.mark.parametrize(
    "planted",
    [
        "if job.options.mode == 'pending': pass",
        "if record.mode in ('committed', 'default'): pass",
        "ok = kind != 'buffered'",
        "TYPES = {'pending': 1, 'buffered': 2}",
        "match mode:\n    case 'pending': pass",
    ],
)
def test_the_mode_rule_sees_a_decision_by_name(planted: str) -> None:
    assert mode_decisions(planted)


@pytest.mark.parametrize(
    "innocent",
    [
        "if record.state == 'committed': pass",
        "SHOWN = ('pending', 'firing', 'resolved')",
        "if status == 'pending': pass",
        "parser.add_argument('--mode', choices=MODES)",
    ],
)
def test_the_mode_rule_leaves_other_words_alone(innocent: str) -> None:
    assert not mode_decisions(innocent)

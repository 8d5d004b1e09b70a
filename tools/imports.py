"""sealstore's import graph, every import counted (a lazy import inside a function too): the
layer rules and the import cycles it breaks.

    python tools/imports.py        print violations and cycles; exit 1 if there is one

Layers (docs/CONTRIBUTING.md): the core (``plugin/``, imported as ``sealstore``) imports no
adapter, no migration and no bench module; an adapter imports no other adapter (but may use
``sealstore.adapters.objects``, the storage-neutral base of object-store adapters, which itself
imports no adapter), no migration, no bench module and no kernel binding (``sealstore.native``,
``_native``, ``_speedups``); the migrations import no bench module.  tests/test_layers.py runs the same checks.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import layout  # noqa: E402  (tools/layout.py)

ROOT = Path(__file__).resolve().parent.parent
#: source folder -> the package it is installed as (tools/layout.py: pyproject's package-dir)
PACKAGES = layout.PACKAGES
EXTENSIONS = ("sealstore._native", "sealstore._speedups")
KERNELS = ("sealstore.native", *EXTENSIONS)
#: the adapters' shared base: any adapter may import it
SHARED_ADAPTER = "objects"


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imports(name: str, path: Path, known) -> set[str]:
    """The sealstore modules ``name`` imports.  ``from . import x`` names the submodule ``x``,
    not the package, when ``x`` is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names}
            out.update(s for s in subs if s in known or s in EXTENSIONS)
            if not all(s in known or s in EXTENSIONS for s in subs):
                out.add(target)
    return {m for m in out if (m in known or m in EXTENSIONS) and m != name}


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def _layer(name: str) -> tuple[str, str | None]:
    parts = name.split(".")
    if parts[1:2] == ["adapters"]:
        return "adapters", (parts[2] if len(parts) > 2 else None)
    if parts[1:2] in (["migrations"], ["bench"]):
        return parts[1], None
    return "core", None


def violations(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for a, deps in sorted(g.items()):
        layer, adapter = _layer(a)
        for b in sorted(deps):
            other, other_adapter = _layer(b)
            if layer == "core" and other != "core":
                bad.append(f"{a} (core) imports {b} ({other})")
            elif layer == "adapters" and other in ("migrations", "bench"):
                bad.append(f"{a} (adapter) imports {b} ({other})")
            elif (
                layer == "adapters"
                and adapter
                and other_adapter
                and other_adapter not in (adapter, SHARED_ADAPTER)
            ):
                bad.append(f"{a} imports another adapter's {b}")
            elif layer == "adapters" and b in KERNELS:
                bad.append(f"{a} (adapter) imports the kernel binding {b}")
            elif layer == "migrations" and other == "bench":
                bad.append(f"{a} (migrations) imports {b} (bench)")
    return bad


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def main() -> int:
    g = graph()
    bad = violations(g)
    loops = cycles(g)
    for line in bad:
        print("layer:", line)
    for comp in loops:
        edges = [f"{a} -> {b}" for a in comp for b in sorted(g[a] & set(comp))]
        print("cycle:", ", ".join(edges))
    print(f"{len(g)} modules, {len(bad)} layer violation(s), {len(loops)} import cycle(s)")
    return 1 if bad or loops else 0


if __name__ == "__main__":
    sys.exit(main())
